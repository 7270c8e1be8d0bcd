package messages

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sharness-ai/sharness/internal/strictjson"
)

// stringsV1 is the reference: every string value of doc as encoding/json reads it, sorted
// (v1's maps lose member order).
func stringsV1(t testing.TB, doc []byte) []string {
	var v any
	if err := json.Unmarshal(doc, &v); err != nil {
		t.Fatalf("v1 refuses what strictjson accepted: %v", err)
	}
	var out []string
	var walk func(any)
	walk = func(v any) {
		switch t := v.(type) {
		case string:
			out = append(out, t)
		case []any:
			for _, e := range t {
				walk(e)
			}
		case map[string]any:
			for _, e := range t {
				walk(e)
			}
		}
	}
	walk(v)
	slices.Sort(out)
	return out
}

func stringsFast(doc []byte) ([]string, error) {
	var out []string
	err := walkStrings(doc, false, func(b []byte) { out = append(out, string(b)) })
	slices.Sort(out)
	return out, err
}

func TestWalk(t *testing.T) {
	for _, doc := range []string{
		`"plain"`, `  "a\"b\\" `, `"\u00e9\n\t\/\b\f\r"`, `"\ud83d\ude00 \ud83d x \ude00 \ud83d\u0041"`,
		`{"a":"x","b":[1,true,null,{"c":"y"}],"d":{},"e":[]}`, ` { "k" : [ "v" , -1.5e3 ] } `,
		`["\\\\", "\\\"", "a\\\\\"b"]`, `123`, `{"type":"base64","data":"x"}`,
	} {
		got, err := stringsFast([]byte(doc))
		if err != nil {
			t.Errorf("%s: %v", doc, err)
			continue
		}
		if diff := cmp.Diff(stringsV1(t, []byte(doc)), got, cmpEmpty); diff != "" {
			t.Errorf("%s (-v1 +fast):\n%s", doc, diff)
		}
	}
	var skipped []string
	_ = walkStrings([]byte(`{"type":"base64","media_type":"image/png","data":"AAAA","id":"i","x":"kept"}`), true, func(b []byte) { skipped = append(skipped, string(b)) })
	if diff := cmp.Diff([]string{"kept"}, skipped); diff != "" {
		t.Errorf("skip (-want +got):\n%s", diff)
	}
	for _, bad := range []string{``, `"open`, `{"a"}`, `{"a":1,}x`, `[1 2]`, `{1:2}`, `[`, `"\x"`, `"\u12"`, `{"a":`} {
		if _, err := stringsFast([]byte(bad)); err == nil {
			t.Errorf("%q: accepted", bad)
		}
	}
	if _, err := members([]byte(`[]`)); err == nil {
		t.Error("members of an array: accepted")
	}
	if _, err := unquote([]byte(`x`)); err == nil {
		t.Error("unquote of a non-string: accepted")
	}
}

// FuzzWalk: on every document strictjson accepts, the fast reader finds exactly the strings
// encoding/json finds, and the members Parse takes.
func FuzzWalk(f *testing.F) {
	for _, s := range []string{`{"a":"\ud83d\ude00","b":["x",{"c":"\\\""}]}`, stream, string(body(f, nil)), `"\u0000"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		if strictjson.Check(doc, MaxDepth) != nil {
			return
		}
		got, err := stringsFast(doc)
		if err != nil {
			t.Fatalf("fast reader refuses valid JSON: %v", err)
		}
		if diff := cmp.Diff(stringsV1(t, doc), got, cmpEmpty); diff != "" {
			t.Fatalf("(-v1 +fast):\n%s", diff)
		}
		if trimmed := bytes.TrimSpace(doc); len(trimmed) > 0 && trimmed[0] == '{' {
			ms, err := members(doc)
			var v1 map[string]json.RawMessage
			if err != nil || json.Unmarshal(doc, &v1) != nil || len(ms) != len(v1) {
				t.Fatalf("members: %v, %d vs %d", err, len(ms), len(v1))
			}
			for _, m := range ms {
				if !bytes.Equal(m.val, bytes.TrimSpace(v1[m.key])) {
					t.Fatalf("member %q: %s vs %s", m.key, m.val, v1[m.key])
				}
			}
		}
	})
}
