package pbp

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

// maxSafeInt is 2^53: JCS (RFC 8785) serialises numbers as IEEE doubles, so two integers at or
// above it could canonicalise, and so hash, the same.
const maxSafeInt = 1 << 53

// maxDocBytes caps a manifest or layer file; policies are small, a huge one is a mistake or an attack.
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

// doc is one decoded file: where each field stands, and its generic JSON value for hashing.
type doc struct {
	file  string
	lines map[string]int // dotted field path → line
	value any            // map[string]any / []any / string / int64 / bool / nil
}

// errAt builds an Error for field, at the line where the field (or its nearest parent) stands.
func (d *doc) errAt(field, format string, args ...any) *Error {
	line := 0
	for f := field; ; {
		if l, ok := d.lines[f]; ok {
			line = l
			break
		}
		if f == "" {
			break
		}
		f = f[:max(strings.LastIndexAny(f, ".["), 0)]
	}
	return &Error{File: d.file, Line: line, Field: field, Msg: fmt.Sprintf(format, args...)}
}

// decodeStrict reads one YAML document into v, refusing duplicate keys, unknown fields, floats,
// integers outside ±2^53, aliases, tags and non-string keys.
func decodeStrict(file string, data []byte, v any) (*doc, error) {
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
	d := &doc{file: file, lines: map[string]int{}}
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
func (d *doc) walk(n *yaml.Node, path string, t reflect.Type) (any, error) {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if path != "" {
		if _, seen := d.lines[path]; !seen {
			d.lines[path] = n.Line
		}
	}
	if n.Kind == yaml.AliasNode || n.Anchor != "" {
		return nil, d.errAt(path, "anchors and aliases are not allowed")
	}
	if n.Tag != "" && n.Style&yaml.TaggedStyle != 0 {
		return nil, d.errAt(path, "explicit tags are not allowed")
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
	return nil, d.errAt(path, "unsupported YAML node")
}

// checkKind refuses a node whose YAML type is not the Go field's: a string field takes only a
// string scalar (so `image: 16` and `image: 0x10` cannot hash alike), a bool field only true or
// false (not YAML 1.1's yes/no/on/off), an int field only an integer, and null nowhere.
func (d *doc) checkKind(n *yaml.Node, path string, t reflect.Type) error {
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
		return d.errAt(path, "null is not allowed: leave the field out instead")
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
		return d.errAt(path, "must be a string, not %s: quote it", what)
	}
	return d.errAt(path, "must be %s, not %s", names[want], what)
}

func (d *doc) walkMap(n *yaml.Node, path string, t reflect.Type) (any, error) {
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

func (d *doc) scalar(n *yaml.Node, path string) (any, error) {
	switch n.Tag {
	case "!!str":
		return n.Value, nil
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err != nil {
			return nil, d.errAt(path, "bad boolean %q", n.Value)
		}
		return b, nil
	case "!!null":
		return nil, nil
	case "!!float":
		return nil, d.errAt(path, "floats are not allowed (%s); use an integer or a string such as \"64Mi\"", n.Value)
	case "!!int":
		var i int64
		if err := n.Decode(&i); err != nil || i >= maxSafeInt || i <= -maxSafeInt || i == math.MinInt64 {
			return nil, d.errAt(path, "integer %s is out of range: integers must be below 2^53 (RFC 8785 hashing)", n.Value)
		}
		return i, nil
	}
	return nil, d.errAt(path, "unsupported scalar type %s", n.Tag)
}
