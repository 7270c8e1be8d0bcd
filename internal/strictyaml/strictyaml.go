// Package strictyaml reads one YAML document the way a policy must be read before anything
// hashes or trusts it. yaml.v3 alone accepts what two readers can take differently: anchors and
// aliases, explicit tags, duplicate keys (the last wins), non-string keys, YAML 1.1 booleans
// (yes, off) in a bool field, a number where a string belongs (image: 0x10 decodes as the text
// "0x10" but hashes as 16), floats and integers beyond 2^53 (which RFC 8785 cannot tell apart),
// several documents, and a lone carriage return (a line break to YAML, not to a line count).
// Decode refuses every such document with an *Error naming the file, the line and the field, and
// records the line of every field so that a later refusal can name its place too.
//
// What it does not guarantee: anything about the values themselves, beyond their YAML type
// matching the Go field's.
package strictyaml

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// MaxSafeInt is 2^53: RFC 8785 (JCS) serialises numbers as IEEE doubles, so two integers at or
// above it could canonicalise, and so hash, the same. Decode refuses them.
const MaxSafeInt = 1 << 53

// maxDocBytes caps a document; policies are small, a huge one is a mistake or an attack.
const maxDocBytes = 1 << 20

// Error is a rejection that names the file, the line and the field.
type Error struct {
	File  string
	Line  int
	Field string
	Msg   string
}

func (e *Error) Error() string {
	if strings.ContainsAny(e.Field, "\n\r") { // keep the error on one line
		e = &Error{File: e.File, Line: e.Line, Field: strconv.Quote(e.Field), Msg: e.Msg}
	}
	loc := e.File
	if e.Line > 0 {
		loc = fmt.Sprintf("%s:%d", e.File, e.Line)
	}
	if e.Field == "" {
		return fmt.Sprintf("%s: %s", loc, e.Msg)
	}
	return fmt.Sprintf("%s: %s: %s", loc, e.Field, e.Msg)
}

// Document is one decoded file: where each field stands, and its generic JSON value for hashing.
// A field is named by its dotted path, with list indexes in brackets: "layers[0].id".
type Document struct {
	file  string
	lines map[string]int // dotted field path → line
	value any            // map[string]any / []any / string / int64 / bool / nil
}

// Value is the document as a generic JSON value: map[string]any, []any, string, int64, bool or
// nil, nothing else.
func (d *Document) Value() any { return d.value }

// Has says whether the document holds field.
func (d *Document) Has(field string) bool {
	_, ok := d.lines[field]
	return ok
}

// Line is the line where field stands, or where its nearest parent does when the field is
// absent ("" is the document itself).
func (d *Document) Line(field string) int {
	for f := field; ; {
		if l, ok := d.lines[f]; ok {
			return l
		}
		if f == "" {
			return 0
		}
		f = f[:max(strings.LastIndexAny(f, ".["), 0)]
	}
}

// ErrAt builds an Error for field, at the line where the field (or its nearest parent) stands.
func (d *Document) ErrAt(field, format string, args ...any) *Error {
	return &Error{File: d.file, Line: d.Line(field), Field: field, Msg: fmt.Sprintf(format, args...)}
}

// Decode reads one YAML document into v (a pointer), refusing duplicate keys, fields v's struct
// types do not have (by their yaml tags), a value whose YAML type is not its field's, null,
// floats, integers outside ±2^53, anchors, aliases, tags, non-string keys, several documents,
// lone carriage returns and files over 1 MiB. file names the document in errors, which are all
// *Error. With v a *any, only the field types are not checked.
func Decode(file string, data []byte, v any) (*Document, error) {
	if len(data) > maxDocBytes {
		return nil, &Error{File: file, Msg: fmt.Sprintf("file is %d bytes, the limit is %d", len(data), maxDocBytes)}
	}
	// YAML counts a lone CR as a line break; line numbers and Lock count LF only. Refuse it
	// rather than report the wrong lines.
	if i := bytes.IndexByte(bytes.ReplaceAll(data, []byte("\r\n"), nil), '\r'); i >= 0 {
		return nil, &Error{File: file, Msg: "carriage return without a line feed: use LF or CRLF line ends"}
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var root yaml.Node
	if err := dec.Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &Error{File: file, Msg: "empty document"}
		}
		return nil, yamlError(file, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, &Error{File: file, Line: extra.Line, Msg: "more than one YAML document"}
	}
	d := &Document{file: file, lines: map[string]int{}}
	body := &root
	if body.Kind == yaml.DocumentNode && len(body.Content) == 1 {
		body = body.Content[0]
	}
	d.lines[""] = body.Line // a missing field is reported where its parent starts
	val, err := d.walk(body, "", reflect.TypeOf(v).Elem())
	if err != nil {
		return nil, err
	}
	d.value = val
	if err := body.Decode(v); err != nil {
		return nil, yamlError(file, err)
	}
	return d, nil
}

var yamlLine = regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`)

// yamlError turns yaml.v3's messages into our one-line file:line form.
func yamlError(file string, err error) error {
	msg := err.Error()
	var te *yaml.TypeError
	if errors.As(err, &te) && len(te.Errors) > 0 {
		msg = te.Errors[0]
	}
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		return &Error{File: file, Line: line, Msg: m[2]}
	}
	return &Error{File: file, Msg: strings.TrimPrefix(msg, "yaml: ")}
}

// walk checks n against the Go type t (for unknown fields) and returns its generic value.
func (d *Document) walk(n *yaml.Node, path string, t reflect.Type) (any, error) {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if path != "" {
		if _, seen := d.lines[path]; !seen {
			d.lines[path] = n.Line
		}
	}
	if n.Kind == yaml.AliasNode || n.Anchor != "" {
		return nil, d.ErrAt(path, "anchors and aliases are not allowed")
	}
	if n.Tag != "" && n.Style&yaml.TaggedStyle != 0 {
		return nil, d.ErrAt(path, "explicit tags are not allowed")
	}
	if err := d.checkKind(n, path, t); err != nil {
		return nil, err
	}
	switch n.Kind {
	case yaml.MappingNode:
		return d.walkMap(n, path, t)
	case yaml.SequenceNode:
		var elem reflect.Type
		if t != nil && t.Kind() == reflect.Slice {
			elem = t.Elem()
		}
		out := make([]any, 0, len(n.Content))
		for i, c := range n.Content {
			v, err := d.walk(c, fmt.Sprintf("%s[%d]", path, i), elem)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	case yaml.ScalarNode:
		return d.scalar(n, path)
	}
	return nil, d.ErrAt(path, "unsupported YAML node")
}

// checkKind refuses a node whose YAML type is not the Go field's: a string field takes only a
// string scalar (so `image: 16` and `image: 0x10` cannot hash alike), a bool field only true or
// false (not YAML 1.1's yes/no/on/off), an int field only an integer, and null nowhere.
func (d *Document) checkKind(n *yaml.Node, path string, t reflect.Type) error {
	if t == nil || n.Kind == yaml.AliasNode {
		return nil
	}
	want := map[reflect.Kind]string{
		reflect.String: "!!str", reflect.Bool: "!!bool", reflect.Int: "!!int", reflect.Int64: "!!int",
		reflect.Struct: "mapping", reflect.Map: "mapping", reflect.Slice: "list",
	}[t.Kind()]
	got := n.Tag
	switch n.Kind {
	case yaml.MappingNode:
		got = "mapping"
	case yaml.SequenceNode:
		got = "list"
	}
	if want == "" || got == want || got == "!!float" { // floats get their own message in scalar
		return nil
	}
	if got == "!!null" {
		return d.ErrAt(path, "null is not allowed: leave the field out instead")
	}
	names := map[string]string{"!!str": "a string", "!!bool": "true or false", "!!int": "an integer", "mapping": "a mapping", "list": "a list"}
	what := names[got]
	if what == "" {
		what = got
	}
	if n.Kind == yaml.ScalarNode {
		what += fmt.Sprintf(" (%s)", n.Value)
	}
	if want == "!!str" && n.Kind == yaml.ScalarNode {
		return d.ErrAt(path, "must be a string, not %s: quote it", what)
	}
	return d.ErrAt(path, "must be %s, not %s", names[want], what)
}

func (d *Document) walkMap(n *yaml.Node, path string, t reflect.Type) (any, error) {
	fields := map[string]reflect.Type{}
	if t != nil && t.Kind() == reflect.Struct {
		for i := 0; i < t.NumField(); i++ {
			name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
			fields[name] = t.Field(i).Type
		}
	}
	out := map[string]any{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		if k.Anchor != "" || k.Style&yaml.TaggedStyle != 0 {
			return nil, &Error{File: d.file, Line: k.Line, Field: path, Msg: fmt.Sprintf("key %q: anchors and explicit tags are not allowed", k.Value)}
		}
		if k.Kind != yaml.ScalarNode || k.Tag != "!!str" {
			return nil, &Error{File: d.file, Line: k.Line, Field: path, Msg: fmt.Sprintf("key %q is not a string", k.Value)}
		}
		sub := k.Value
		if path != "" {
			sub = path + "." + k.Value
		}
		if _, dup := out[k.Value]; dup {
			return nil, &Error{File: d.file, Line: k.Line, Field: sub, Msg: fmt.Sprintf("duplicate key (first at line %d)", d.lines[sub])}
		}
		var ft reflect.Type
		switch {
		case t != nil && t.Kind() == reflect.Struct:
			var ok bool
			if ft, ok = fields[k.Value]; !ok {
				return nil, &Error{File: d.file, Line: k.Line, Field: sub, Msg: "unknown field"}
			}
		case t != nil && t.Kind() == reflect.Map:
			ft = t.Elem()
		}
		d.lines[sub] = k.Line
		v, err := d.walk(n.Content[i+1], sub, ft)
		if err != nil {
			return nil, err
		}
		out[k.Value] = v
	}
	return out, nil
}

func (d *Document) scalar(n *yaml.Node, path string) (any, error) {
	switch n.Tag {
	case "!!str":
		return n.Value, nil
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err != nil {
			return nil, d.ErrAt(path, "bad boolean %q", n.Value)
		}
		return b, nil
	case "!!null":
		return nil, nil
	case "!!float":
		return nil, d.ErrAt(path, "floats are not allowed (%s); use an integer or a string such as \"64Mi\"", n.Value)
	case "!!int":
		var i int64
		if err := n.Decode(&i); err != nil || i >= MaxSafeInt || i <= -MaxSafeInt || i == math.MinInt64 {
			return nil, d.ErrAt(path, "integer %s is out of range: integers must be below 2^53 (RFC 8785 hashing)", n.Value)
		}
		return i, nil
	}
	return nil, d.ErrAt(path, "unsupported scalar type %s", n.Tag)
}
