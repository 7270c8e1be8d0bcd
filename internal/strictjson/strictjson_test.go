package strictjson

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCheck(t *testing.T) {
	deep := strings.Repeat("[", 65) + strings.Repeat("]", 65)
	for _, tc := range []struct {
		name, in string
		want     string // substring of the error, "" for none
	}{
		{"object", `{"model":"a","messages":[{"role":"user","content":"hi"}]}`, ""},
		{"empty object and array", `{"a":{},"b":[],"c":[{}]}`, ""},
		{"scalars", `"x"`, ""},
		{"whitespace around", " {\"a\":1}\n", ""},
		{"same key in sibling objects", `[{"a":1},{"a":2}]`, ""},
		{"same key at two depths", `{"a":{"a":1}}`, ""},
		{"duplicate key", `{"model":"a","model":"b"}`, `duplicate key "model"`},
		{"case variant", `{"model":"a","MODEL":"b"}`, `keys "model" and "MODEL" differ only in case`},
		{"kelvin sign folds to k", "{\"kind\":1,\"\u212aind\":2}", "differ only in case"},
		{"nested duplicate", `{"messages":[{"role":"user","role":"assistant"}]}`, `duplicate key "role"`},
		{"duplicate after nested value", `{"a":{"b":1},"a":2}`, `duplicate key "a"`},
		{"trailing value", `{"a":1}{"a":2}`, "data after the value"},
		{"trailing garbage", `{"a":1} x`, "json:"},
		{"invalid", `{"a":}`, "json:"},
		{"unterminated", `{"a":1`, "json:"},
		{"empty", ``, "json: empty"},
		{"invalid utf-8", "{\"a\":\"\xff\"}", "invalid UTF-8"},
		{"too deep", deep, "nested deeper than 64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Check([]byte(tc.in), 64)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Check: %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Check: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestDecodeRefusesUnknownFields(t *testing.T) {
	var v struct{ A int }
	if err := Decode([]byte(`{"A":1,"B":2}`), 8, &v); err == nil {
		t.Fatal("Decode accepted an unknown field")
	}
	if err := Decode([]byte(`{"A":1}`), 8, &v); err != nil || v.A != 1 {
		t.Fatalf("Decode = %v, %+v", err, v)
	}
}

// FuzzCheck holds Check to encoding/json's grammar: whatever Check accepts, json.Valid accepts
// and re-encodes to a document Check also accepts; whatever valid UTF-8 json.Valid accepts, Check
// accepts unless a key repeats or it is too deep.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `{"a":1,"A":2}`, `[{"k":{"k":[1,2,{"x":null}]}}]`, `"\u212a"`, `{"a":{"b":1},"a":2}`,
		`-0.5e+10`, `[true,false,null]`, `{"\u0041":1,"a":2}`, `"\ud800"`, `01`, `1.`, `[1,]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		err := Check(data, 32)
		valid := json.Valid(data) && utf8.Valid(data)
		if err == nil && !valid {
			t.Fatalf("Check accepted what encoding/json refuses: %q", data)
		}
		if err != nil {
			if valid && !strings.Contains(err.Error(), "key") && !strings.Contains(err.Error(), "deeper") {
				t.Fatalf("Check refused valid JSON for another reason: %v: %q", err, data)
			}
			return
		}
		var v any
		if err := json.Unmarshal(data, &v); err != nil {
			t.Fatal(err)
		}
		again, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if err := Check(again, 33); err != nil {
			t.Fatalf("re-encoded value refused: %v", err)
		}
	})
}

func BenchmarkCheck(b *testing.B) {
	// A Messages request with a 256 KiB tool result, the size that made llm slow.
	big := strings.Repeat(`line of tool output with \"quotes\" and \u00e9 escapes\n`, 5000)
	body := []byte(`{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"` + big + `"}]}]}`)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if err := Check(body, 64); err != nil {
			b.Fatal(err)
		}
	}
}
