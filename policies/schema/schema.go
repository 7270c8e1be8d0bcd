// Package schema is the JSON Schema of Process Behaviour Policy documents (format pbp: 1): the
// manifest and its layer files. Editors use the schema (pbp.schema.json, beside this file) to
// complete and check policies as they are written; Validate checks one YAML file against it with
// a one-line error.
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
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/sharness-ai/sharness/internal/strictyaml"
)

//go:embed pbp.schema.json
var document []byte

// ID is the schema's $id. It names the schema; nothing ever fetches it.
const ID = "https://sharness.ai/schema/pbp-1.json"

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

// Error is the schema's rejection of a document that parsed, naming the file and the JSON
// pointer of the offending value. Line is the value's (or its nearest parent's) line in the file
// when known (0 otherwise).
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
		// A failure of the whole document: say where it starts.
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
// and what is wrong. The YAML is read by internal/strictyaml, as policies/pbp reads it, so what
// the policy decoder refuses (anchors, aliases, explicit tags, duplicate keys, non-string keys,
// floats, integers of 2^53 or more, several documents, a carriage return without a line feed) is
// refused here too, with its *strictyaml.Error, which is pbp.Error (file:line: field: message).
func Validate(file string, doc []byte) error {
	var v any
	d, err := strictyaml.Decode(file, doc, &v)
	if err != nil {
		return err
	}
	fs, err := validate(d.Value(), d.Line)
	if err != nil {
		return &Error{File: file, Msg: err.Error()}
	}
	if len(fs) == 0 {
		return nil
	}
	return &Error{File: file, Line: fs[0].line, Pointer: fs[0].pointer, Msg: fs[0].msg}
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

// field spells a JSON pointer into value as policies/pbp's dotted field path: /layers/0/id is
// layers[0].id. A token is an index where value holds a list there, a key otherwise.
func field(value any, ptr string) string {
	if ptr == "" {
		return ""
	}
	var b strings.Builder
	for _, tok := range strings.Split(ptr[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch x := value.(type) {
		case []any:
			if i, err := strconv.Atoi(tok); err == nil && i >= 0 {
				fmt.Fprintf(&b, "[%d]", i)
				value = nil
				if i < len(x) {
					value = x[i]
				}
				continue
			}
		case map[string]any:
			value = x[tok]
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(tok)
	}
	return b.String()
}

// failure is one leaf of the validator's error tree, placed in the document.
type failure struct {
	pointer string
	line    int
	msg     string
}

var printer = message.NewPrinter(language.English)

// validate returns every leaf failure, in document order (nil when value is valid); line places
// a dotted field path in the file.
func validate(value any, line func(string) int) ([]failure, error) {
	s, err := compiled()
	if err != nil {
		return nil, err
	}
	err = s.Validate(value)
	if err == nil {
		return nil, nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return nil, err
	}
	p := placer{value, line}
	var out []failure
	p.collect(ve, &out)
	slices.SortFunc(out, func(a, b failure) int {
		if c := a.line - b.line; c != 0 {
			return c
		}
		if c := strings.Compare(a.pointer, b.pointer); c != 0 {
			return c
		}
		return strings.Compare(a.msg, b.msg)
	})
	return out, nil
}

// placer places the validator's failures in the document.
type placer struct {
	value any
	line  func(string) int
}

func (p placer) place(ptr, msg string) failure {
	return failure{pointer: ptr, line: p.line(field(p.value, ptr)), msg: msg}
}

func (p placer) collect(e *jsonschema.ValidationError, out *[]failure) {
	base := pointer(e.InstanceLocation)
	switch k := e.ErrorKind.(type) {
	case *kind.AdditionalProperties:
		for _, prop := range k.Properties {
			*out = append(*out, p.place(base+"/"+escape(prop), "unknown field"))
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
		*out = append(*out, p.place(base+"/"+escape(k.Property), msg))
		return
	}
	if len(e.Causes) == 0 {
		*out = append(*out, p.place(base, e.ErrorKind.LocalizedString(printer)))
		return
	}
	for _, c := range e.Causes {
		p.collect(c, out)
	}
}

// objectWith returns the pointer of the first object in the file, depth tokens deep, that has
// the key name.
func (p placer) objectWith(name string, depth int) string {
	best, at, found := "", 0, false
	var walk func(v any, ptr string, d int)
	walk = func(v any, ptr string, d int) {
		switch x := v.(type) {
		case map[string]any:
			if d == depth {
				if _, ok := x[name]; ok {
					l := p.line(field(p.value, ptr+"/"+escape(name)))
					if !found || l < at || l == at && ptr < best {
						best, at, found = ptr, l, true
					}
				}
				return
			}
			for k, c := range x {
				walk(c, ptr+"/"+escape(k), d+1)
			}
		case []any:
			for i, c := range x {
				if d < depth {
					walk(c, ptr+"/"+strconv.Itoa(i), d+1)
				}
			}
		}
	}
	walk(p.value, "", 0)
	return best
}
