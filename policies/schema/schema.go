// Package schema is the JSON Schema of Process Behaviour Policy documents (format pbp: 1): the
// manifest and its layer files. Editors use the schema (Document) to complete and check policies
// as they are written; Validate checks one YAML file against it with a one-line error.
//
// It checks shape only: the fields, their types and the spelling of single values (sizes,
// durations, hashes, names, kinds). It does not check the design's rules, that a layer's hash
// matches its file, that layers narrow rather than widen, or that names refer to something that
// exists: policies/pbp does all of that when it loads a manifest, and remains the authority.
//
// It is pure: the schema is embedded and compiled from memory, and nothing is read from disk or
// the network.
package schema

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
	"gopkg.in/yaml.v3"
)

//go:embed pbp.schema.json
var document []byte

// ID is the schema's $id. It names the schema; nothing ever fetches it.
const ID = "https://sharness.ai/schema/pbp-1.json"

// maxDocBytes is the policies/pbp decoder's limit on one file.
const maxDocBytes = 1 << 20

// maxSafeInt is 2^53, as in policies/pbp: integers must stay below it in magnitude.
const maxSafeInt = 1 << 53

// Document returns the schema (JSON, draft 2020-12).
func Document() []byte { return bytes.Clone(document) }

var compiled = sync.OnceValues(func() (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(document))
	if err != nil {
		return nil, fmt.Errorf("schema: embedded pbp.schema.json: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	if err := c.AddResource(ID, doc); err != nil {
		return nil, fmt.Errorf("schema: embedded pbp.schema.json: %w", err)
	}
	s, err := c.Compile(ID)
	if err != nil {
		return nil, fmt.Errorf("schema: embedded pbp.schema.json: %w", err)
	}
	return s, nil
})

// noLoader refuses every URL: the schema refers only to itself and the draft's bundled
// meta-schemas, so any other reference is a mistake, never a download.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("schema: refusing to load %s: only the embedded schema is used", url)
}

// Error is a rejection naming the file and the JSON pointer of the offending value. Line is the
// value's line in the file when known (0 otherwise).
type Error struct {
	File    string
	Line    int
	Pointer string // JSON pointer; "" is the whole document
	Msg     string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Pointer == "" && e.Line > 0 {
		// A YAML-level failure with no field: say where it is.
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	b.WriteString(": ")
	if e.Pointer != "" {
		b.WriteString(e.Pointer)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return printable(b.String())
}

// printable keeps an error on one line: a key or value holding a newline or another control
// character is shown escaped, as Go would quote it.
func printable(s string) string {
	if !strings.ContainsFunc(s, notPrintable) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if notPrintable(r) {
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

func notPrintable(r rune) bool { return r != ' ' && !unicode.IsPrint(r) }

// Validate checks one manifest or layer file (YAML) against the schema. file names it in the
// error, which is one line: the file, the JSON pointer of the first failure in document order,
// and what is wrong. YAML the policy decoder would refuse (anchors, aliases, explicit tags,
// duplicate keys, non-string keys, floats, integers of 2^53 or more, several documents) is
// refused here too, and so is a carriage return without a line feed.
func Validate(file string, doc []byte) error {
	p, err := parse(doc, false)
	if err != nil {
		err.File = file
		return err
	}
	fs, err2 := p.validate()
	if err2 != nil {
		return &Error{File: file, Msg: err2.Error()}
	}
	if len(fs) == 0 {
		return nil
	}
	f := fs[0]
	return &Error{File: file, Line: f.line, Pointer: f.pointer, Msg: f.msg}
}

// parsed is one YAML document as a JSON value, with where each value stands.
type parsed struct {
	value any               // map[string]any / []any / string / int64 / bool / nil
	pos   map[string][2]int // JSON pointer → line, column
	decor []string          // pointers of mapping keys carrying an anchor or tag (lenient parse only)
}

// parse reads data as the policy decoder does. With lenient set, anchors and tags on mapping keys
// are recorded in decor instead of refused (the tests use it to tell apart known decoder gaps).
func parse(data []byte, lenient bool) (*parsed, *Error) {
	if len(data) > maxDocBytes {
		return nil, &Error{Msg: fmt.Sprintf("file is %d bytes, the limit is %d", len(data), maxDocBytes)}
	}
	// As in policies/pbp: YAML counts a lone CR as a line break, which would put errors on the
	// wrong lines.
	if bytes.IndexByte(bytes.ReplaceAll(data, []byte("\r\n"), nil), '\r') >= 0 {
		return nil, &Error{Msg: "carriage return without a line feed: use LF or CRLF line ends"}
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var root yaml.Node
	if err := dec.Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &Error{Msg: "empty document"}
		}
		return nil, yamlError(err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, &Error{Line: extra.Line, Msg: "more than one YAML document"}
	}
	body := &root
	if body.Kind == yaml.DocumentNode && len(body.Content) == 1 {
		body = body.Content[0]
	}
	p := &parsed{pos: map[string][2]int{}}
	w := walker{p: p, lenient: lenient}
	v, err := w.walk(body, "")
	if err != nil {
		return nil, err
	}
	p.value = v
	return p, nil
}

func yamlError(err error) *Error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	var line int
	if n, _ := fmt.Sscanf(msg, "line %d:", &line); n == 1 {
		_, msg, _ = strings.Cut(msg, ": ")
	}
	return &Error{Line: line, Msg: msg}
}

type walker struct {
	p       *parsed
	lenient bool
}

func (w *walker) fail(n *yaml.Node, ptr, format string, args ...any) *Error {
	return &Error{Line: n.Line, Pointer: ptr, Msg: fmt.Sprintf(format, args...)}
}

func (w *walker) walk(n *yaml.Node, ptr string) (any, *Error) {
	if _, seen := w.p.pos[ptr]; !seen {
		w.p.pos[ptr] = [2]int{n.Line, n.Column}
	}
	if n.Kind == yaml.AliasNode || n.Anchor != "" {
		return nil, w.fail(n, ptr, "anchors and aliases are not allowed")
	}
	if n.Tag != "" && n.Style&yaml.TaggedStyle != 0 {
		return nil, w.fail(n, ptr, "explicit tags are not allowed")
	}
	switch n.Kind {
	case yaml.MappingNode:
		out := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode || k.Tag != "!!str" {
				return nil, w.fail(k, ptr, "key %q is not a string", k.Value)
			}
			sub := ptr + "/" + escape(k.Value)
			if _, dup := out[k.Value]; dup {
				return nil, w.fail(k, sub, "duplicate key (first at line %d)", w.p.pos[sub][0])
			}
			if k.Anchor != "" || k.Style&yaml.TaggedStyle != 0 {
				if !w.lenient {
					return nil, w.fail(k, sub, "anchors and explicit tags are not allowed on keys")
				}
				w.p.decor = append(w.p.decor, sub)
			}
			w.p.pos[sub] = [2]int{k.Line, k.Column}
			v, err := w.walk(n.Content[i+1], sub)
			if err != nil {
				return nil, err
			}
			out[k.Value] = v
		}
		return out, nil
	case yaml.SequenceNode:
		out := make([]any, 0, len(n.Content))
		for i, c := range n.Content {
			v, err := w.walk(c, fmt.Sprintf("%s/%d", ptr, i))
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	case yaml.ScalarNode:
		return w.scalar(n, ptr)
	}
	return nil, w.fail(n, ptr, "unsupported YAML node")
}

func (w *walker) scalar(n *yaml.Node, ptr string) (any, *Error) {
	switch n.Tag {
	case "!!str":
		return n.Value, nil
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err != nil {
			return nil, w.fail(n, ptr, "bad boolean %q", n.Value)
		}
		return b, nil
	case "!!null":
		return nil, nil
	case "!!float":
		return nil, w.fail(n, ptr, "floats are not allowed (%s); use an integer or a string such as \"64Mi\"", n.Value)
	case "!!int":
		var i int64
		if err := n.Decode(&i); err != nil || i >= maxSafeInt || i <= -maxSafeInt || i == math.MinInt64 {
			return nil, w.fail(n, ptr, "integer %s is out of range: integers must be below 2^53", n.Value)
		}
		return i, nil
	}
	return nil, w.fail(n, ptr, "unsupported scalar type %s", n.Tag)
}

// escape spells one JSON pointer token (RFC 6901).
func escape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

func pointer(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		b.WriteString(escape(t))
	}
	return b.String()
}

// failure is one leaf of the validator's error tree, placed in the document.
type failure struct {
	pointer   string
	line, col int
	msg       string
	kind      jsonschema.ErrorKind
}

var printer = message.NewPrinter(language.English)

// validate returns every leaf failure, in document order (nil when the document is valid).
func (p *parsed) validate() ([]failure, error) {
	s, err := compiled()
	if err != nil {
		return nil, err
	}
	err = s.Validate(p.value)
	if err == nil {
		return nil, nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return nil, err
	}
	var out []failure
	p.collect(ve, &out)
	slices.SortFunc(out, func(a, b failure) int {
		if c := a.line - b.line; c != 0 {
			return c
		}
		if c := a.col - b.col; c != 0 {
			return c
		}
		if c := strings.Compare(a.pointer, b.pointer); c != 0 {
			return c
		}
		return strings.Compare(a.msg, b.msg)
	})
	return out, nil
}

func (p *parsed) collect(e *jsonschema.ValidationError, out *[]failure) {
	base := pointer(e.InstanceLocation)
	switch k := e.ErrorKind.(type) {
	case *kind.AdditionalProperties:
		for _, prop := range k.Properties {
			*out = append(*out, p.place(base+"/"+escape(prop), "unknown field", k))
		}
		return
	case *kind.PropertyNames:
		// jsonschema v6.0.3 stores the validator's reused location slice for this error, not a
		// copy, so only its length is reliable: place the name in the document instead.
		base = p.objectWith(k.Property, len(e.InstanceLocation))
		msg := fmt.Sprintf("invalid name %q", k.Property)
		var inner []failure
		for _, c := range e.Causes {
			p.collect(c, &inner)
		}
		if len(inner) > 0 {
			msg += ": " + inner[0].msg
		}
		*out = append(*out, p.place(base+"/"+escape(k.Property), msg, k))
		return
	}
	if len(e.Causes) == 0 {
		*out = append(*out, p.place(base, e.ErrorKind.LocalizedString(printer), e.ErrorKind))
		return
	}
	for _, c := range e.Causes {
		p.collect(c, out)
	}
}

// objectWith returns the pointer of the first object, depth tokens deep, that has the key name.
func (p *parsed) objectWith(name string, depth int) string {
	best, at := "", [2]int{math.MaxInt, 0}
	for ptr, pos := range p.pos {
		parent, last, ok := cutLast(ptr)
		if !ok || last != escape(name) || strings.Count(parent, "/") != depth {
			continue
		}
		if v, ok := p.lookup(parent); ok {
			if _, isMap := v.(map[string]any); isMap && (pos[0] < at[0] || pos[0] == at[0] && pos[1] < at[1]) {
				best, at = parent, pos
			}
		}
	}
	return best
}

func cutLast(ptr string) (parent, last string, ok bool) {
	i := strings.LastIndexByte(ptr, '/')
	if i < 0 {
		return "", "", false
	}
	return ptr[:i], ptr[i+1:], true
}

// lookup returns the value at a JSON pointer.
func (p *parsed) lookup(ptr string) (any, bool) {
	v := p.value
	if ptr == "" {
		return v, true
	}
	for _, tok := range strings.Split(ptr[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch x := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = x[tok]; !ok {
				return nil, false
			}
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(x) {
				return nil, false
			}
			v = x[i]
		default:
			return nil, false
		}
	}
	return v, true
}

// place finds where ptr (or its nearest parent) stands in the document.
func (p *parsed) place(ptr, msg string, k jsonschema.ErrorKind) failure {
	f := failure{pointer: ptr, msg: msg, kind: k}
	for q := ptr; ; {
		if at, ok := p.pos[q]; ok {
			f.line, f.col = at[0], at[1]
			break
		}
		i := strings.LastIndexByte(q, '/')
		if i < 0 {
			break
		}
		q = q[:i]
	}
	return f
}
