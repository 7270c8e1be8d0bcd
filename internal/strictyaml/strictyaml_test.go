package strictyaml

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// target is a Go type with every kind of field Decode checks.
type target struct {
	Name string         `yaml:"name"`
	N    int            `yaml:"n"`
	B    *bool          `yaml:"b,omitempty"`
	L    []string       `yaml:"l"`
	M    map[string]int `yaml:"m"`
	S    struct {
		X string `yaml:"x"`
	} `yaml:"s"`
}

// refusals is every rule Decode holds, with the exact error; typed is whether the rule needs a Go
// type (a decode into any accepts the document).
var refusals = []struct {
	name, doc, want string
	typed           bool
}{
	{"empty file", "", "f.yaml: empty document", false},
	{"comment only", "# c\n", "f.yaml: empty document", false},
	{"blank line only", "\n", "f.yaml: empty document", false},
	{"two documents", "n: 1\n---\nn: 2\n", "f.yaml:2: more than one YAML document", false},
	{"lone carriage return", "n: 1\rname: x\n", "f.yaml: carriage return without a line feed: use LF or CRLF line ends", false},
	{"too large", strings.Repeat("#", 1<<20+1), "f.yaml: file is 1048577 bytes, the limit is 1048576", false},
	{"anchor", "name: &a x\n", "f.yaml:1: name: anchors and aliases are not allowed", false},
	{"alias", "s: &a {x: y}\nm: *a\n", "f.yaml:1: s: anchors and aliases are not allowed", false},
	{"explicit tag", "name: !!str x\n", "f.yaml:1: name: explicit tags are not allowed", false},
	{"local tag", "name: !x y\n", "f.yaml:1: name: explicit tags are not allowed", false},
	{"anchored key", "&k name: x\n", `f.yaml:1: key "name": anchors and explicit tags are not allowed`, false},
	{"tagged key", "!!str name: x\n", `f.yaml:1: key "name": anchors and explicit tags are not allowed`, false},
	{"integer key", "1: x\n", `f.yaml:1: key "1" is not a string`, false},
	{"list key", "[a]: x\n", `f.yaml:1: key "" is not a string`, false},
	{"merge key", "s: {x: y}\nm: {<<: {a: 1}}\n", `f.yaml:2: m: key "<<" is not a string`, false},
	{"duplicate key", "name: x\nname: y\n", "f.yaml:2: name: duplicate key (first at line 1)", false},
	{"unknown field", "n: 1\nnope: 2\n", "f.yaml:2: nope: unknown field", true},
	{"unknown nested field", "s:\n  x: a\n  y: b\n", "f.yaml:3: s.y: unknown field", true},
	{"multi-line key", "? |\n  a\n  b\n: 1\n", `f.yaml:1: "a\nb\n": unknown field`, true},
	{"float", "n: 1.5\n", `f.yaml:1: n: floats are not allowed (1.5); use an integer or a string such as "64Mi"`, false},
	{"infinity", "n: .inf\n", `f.yaml:1: n: floats are not allowed (.inf); use an integer or a string such as "64Mi"`, false},
	{"integer too large for a float", "n: 99999999999999999999\n", `f.yaml:1: n: floats are not allowed (99999999999999999999); use an integer or a string such as "64Mi"`, false},
	{"2^53", "n: 9007199254740992\n", "f.yaml:1: n: integer 9007199254740992 is out of range: integers must be below 2^53 (RFC 8785 hashing)", false},
	{"-2^53", "n: -9007199254740992\n", "f.yaml:1: n: integer -9007199254740992 is out of range: integers must be below 2^53 (RFC 8785 hashing)", false},
	{"2^53 in hex", "n: 0x20000000000000\n", "f.yaml:1: n: integer 0x20000000000000 is out of range: integers must be below 2^53 (RFC 8785 hashing)", false},
	{"integer in a string field", "name: 16\n", "f.yaml:1: name: must be a string, not an integer (16): quote it", true},
	{"hex integer in a string field", "name: 0x10\n", "f.yaml:1: name: must be a string, not an integer (0x10): quote it", true},
	{"bool in a string field", "name: true\n", "f.yaml:1: name: must be a string, not true or false (true): quote it", true},
	{"null", "name: ~\n", "f.yaml:1: name: null is not allowed: leave the field out instead", true},
	{"empty value", "name:\n", "f.yaml:1: name: null is not allowed: leave the field out instead", true},
	{"YAML 1.1 boolean", "b: yes\n", "f.yaml:1: b: must be true or false, not a string (yes)", true},
	{"quoted boolean", "b: \"true\"\n", "f.yaml:1: b: must be true or false, not a string (true)", true},
	{"integer in a bool field", "b: 1\n", "f.yaml:1: b: must be true or false, not an integer (1)", true},
	{"string in an int field", "n: \"1\"\n", "f.yaml:1: n: must be an integer, not a string (1)", true},
	{"bool in an int field", "n: true\n", "f.yaml:1: n: must be an integer, not true or false (true)", true},
	{"mapping for a list", "l: {a: 1}\n", "f.yaml:1: l: must be a list, not a mapping", true},
	{"scalar for a list", "l: a\n", "f.yaml:1: l: must be a list, not a string (a)", true},
	{"list for a map", "m: [1]\n", "f.yaml:1: m: must be a mapping, not a list", true},
	{"scalar for a struct", "s: x\n", "f.yaml:1: s: must be a mapping, not a string (x)", true},
	{"map value of the wrong type", "m: {a: x}\n", "f.yaml:1: m.a: must be an integer, not a string (x)", true},
	{"list element of the wrong type", "l: [a, 1]\n", "f.yaml:1: l[1]: must be a string, not an integer (1): quote it", true},
	{"null list element", "l: [null]\n", "f.yaml:1: l[0]: null is not allowed: leave the field out instead", true},
	{"list document", "- a\n", "f.yaml:1: must be a mapping, not a list", true},
	{"scalar document", "x\n", "f.yaml:1: must be a mapping, not a string (x)", true},
	{"syntax error", "n: [\n", "f.yaml:1: did not find expected node content", false},
}

func TestDecodeRefuses(t *testing.T) {
	for _, tc := range refusals {
		t.Run(tc.name, func(t *testing.T) {
			var v target
			_, err := Decode("f.yaml", []byte(tc.doc), &v)
			var e *Error
			switch {
			case err == nil:
				t.Fatalf("Decode accepted %q", tc.doc)
			case !errors.As(err, &e):
				t.Fatalf("error is a %T, not an *Error: %v", err, err)
			case err.Error() != tc.want:
				t.Errorf("Decode error\n got: %s\nwant: %s", err, tc.want)
			}
			var a any
			_, err = Decode("f.yaml", []byte(tc.doc), &a)
			switch {
			case tc.typed && err != nil:
				t.Errorf("into any: %v, want success (the rule is the Go type's)", err)
			case !tc.typed && (err == nil || err.Error() != tc.want):
				t.Errorf("into any: %v, want %s", err, tc.want)
			}
		})
	}
}

func TestDecodeAccepts(t *testing.T) {
	const doc = "# a comment\nname: \"16\"\nn: 9007199254740991\nb: false\nl: [a, b]\nm:\n  k: -3\ns: {x: y}\n"
	for _, tc := range []struct{ name, doc string }{
		{"LF", doc},
		{"CRLF", strings.ReplaceAll(doc, "\n", "\r\n")},
		{"flow", "{s: {x: y}, m: {k: -3}, l: [a, b], b: false, n: 0x1fffffffffffff, name: '16'}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var v target
			d, err := Decode("f.yaml", []byte(tc.doc), &v)
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]any{"name": "16", "n": int64(1<<53 - 1), "b": false, "l": []any{"a", "b"},
				"m": map[string]any{"k": int64(-3)}, "s": map[string]any{"x": "y"}}
			if diff := cmp.Diff(want, d.Value()); diff != "" {
				t.Errorf("Value (-want +got):\n%s", diff)
			}
			if v.Name != "16" || v.N != 1<<53-1 || v.B == nil || *v.B || len(v.L) != 2 || v.M["k"] != -3 || v.S.X != "y" {
				t.Errorf("decoded %+v", v)
			}
		})
	}
}

func TestLines(t *testing.T) {
	const doc = "# header\nname: x\nl:\n  - a\n  - b\ns:\n  x: y\n"
	var v target
	d, err := Decode("f.yaml", []byte(doc), &v)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		field string
		has   bool
		line  int
	}{
		{"", true, 2}, {"name", true, 2}, {"l", true, 3}, {"l[0]", true, 4}, {"l[1]", true, 5}, {"s", true, 6}, {"s.x", true, 7},
		{"n", false, 2},     // absent: the document's first line
		{"l[7]", false, 3},  // absent element: its list
		{"s.x.y", false, 7}, // beneath a scalar: the scalar
		{"s.z", false, 6},
	} {
		if got := d.Has(tc.field); got != tc.has {
			t.Errorf("Has(%q) = %v, want %v", tc.field, got, tc.has)
		}
		if got := d.Line(tc.field); got != tc.line {
			t.Errorf("Line(%q) = %d, want %d", tc.field, got, tc.line)
		}
	}
	e := d.ErrAt("s.z", "no %s", "z")
	if got, want := e.Error(), "f.yaml:6: s.z: no z"; got != want {
		t.Errorf("ErrAt = %q, want %q", got, want)
	}
}

// TestErrorFormat pins how *Error renders, which every want.txt under policies/testdata relies on.
func TestErrorFormat(t *testing.T) {
	tests := []struct {
		e    Error
		want string
	}{
		{Error{File: "m.yaml", Line: 3, Field: "a.b", Msg: "bad"}, "m.yaml:3: a.b: bad"},
		{Error{File: "m.yaml", Line: 3, Msg: "bad"}, "m.yaml:3: bad"},
		{Error{File: "m.yaml", Field: "a", Msg: "bad"}, "m.yaml: a: bad"},
		{Error{File: "m.yaml", Msg: "bad"}, "m.yaml: bad"},
		{Error{File: "m.yaml", Line: 1, Field: "a\nb", Msg: "bad"}, `m.yaml:1: "a\nb": bad`},
	}
	for _, tc := range tests {
		if got := tc.e.Error(); got != tc.want {
			t.Errorf("%+v.Error() = %q, want %q", tc.e, got, tc.want)
		}
	}
}

// FuzzDecode feeds arbitrary bytes to Decode, into a Go type and into any. It must never panic;
// every refusal is an *Error naming the file; an accepted document's value holds only the JSON types,
// integers below 2^53, and a line for every key; a typed decode is never laxer than an untyped
// one, and the same bytes always give the same value.
func FuzzDecode(f *testing.F) {
	for _, tc := range refusals {
		f.Add([]byte(tc.doc))
	}
	f.Add([]byte("name: x\nn: 1\nb: true\nl: [a]\nm: {k: 1}\ns: {x: y}\n"))
	// The policy fixtures: real manifests and layers, valid and not.
	files, _ := filepath.Glob("../../policies/testdata/*/*/*.yaml")
	more, _ := filepath.Glob("../../policies/testdata/*/*/*/*.yaml")
	for _, p := range append(files, more...) {
		if data, err := os.ReadFile(p); err == nil {
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var a any
		d, err := Decode("f.yaml", data, &a)
		if err != nil {
			checkRefusal(t, err)
		}
		var v target
		typed, terr := Decode("f.yaml", data, &v)
		if terr != nil {
			checkRefusal(t, terr)
			return
		}
		if err != nil {
			t.Fatalf("decoded into a Go type but not into any: %v", err)
		}
		checkValue(t, d, d.Value(), "")
		if !cmp.Equal(d.Value(), typed.Value()) {
			t.Fatalf("the same bytes gave two values:\n%v\n%v", d.Value(), typed.Value())
		}
		if _, err := json.Marshal(d.Value()); err != nil {
			t.Fatalf("the value does not encode as JSON: %v", err)
		}
	})
}

func checkRefusal(t *testing.T, err error) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) || e.File != "f.yaml" {
		t.Fatalf("refusal %T %v is not an *Error naming the file", err, err)
	}
	if err.Error() == "" {
		t.Fatal("empty refusal")
	}
}

func checkValue(t *testing.T, d *Document, v any, path string) {
	t.Helper()
	switch x := v.(type) {
	case map[string]any:
		for k, c := range x {
			sub := k
			if path != "" {
				sub = path + "." + k
			}
			if !strings.ContainsAny(k, ".[") && !d.Has(sub) {
				t.Fatalf("no line for field %q", sub)
			}
			checkValue(t, d, c, sub)
		}
	case []any:
		for i, c := range x {
			checkValue(t, d, c, fmt.Sprintf("%s[%d]", path, i))
		}
	case int64:
		if x >= MaxSafeInt || x <= -MaxSafeInt {
			t.Fatalf("integer %d accepted", x)
		}
	case string, bool, nil:
	default:
		t.Fatalf("value of type %T", v)
	}
}
