package messages

import (
	"bytes"
	"strings"
	"testing"
)

// FuzzRequest feeds request bodies through every step llm takes before forwarding. Whatever the
// bytes, nothing panics, and a body that passes re-parses to a body that passes.
func FuzzRequest(f *testing.F) {
	rules := testRules(f)
	for _, b := range []string{
		string(body(f, nil)), string(body(f, map[string]any{"tools": raw(testTools)})),
		`{"model":"claude-sonnet-4-5","max_tokens":1,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"SECRET-a"}]}]}]}`,
		`{"model":"a","MODEL":"b"}`, `{"tools":[{"name":"n","x":1e999}]}`, `{"mcp_servers":[{"url":"x"}]}`,
	} {
		f.Add([]byte(b), false)
		f.Add([]byte(b), true)
	}
	f.Fuzz(func(t *testing.T, b []byte, redact bool) {
		r, ref := Parse(b)
		if ref != nil {
			return
		}
		_ = Check(rules, r, Create, []string{string(b[:min(len(b), 20)])})
		_, ref = Secrets(fakeScanner{}, r, redact)
		if ref != nil {
			return
		}
		out, err := r.Body()
		if err != nil {
			t.Fatalf("Body: %v", err)
		}
		r2, ref := Parse(out)
		if ref != nil {
			t.Fatalf("forwarded body does not re-parse: %v\n%s", ref, out)
		}
		if _, ref := Secrets(fakeScanner{}, r2, false); redact && ref != nil {
			t.Fatalf("redacted body still has a secret: %s", out)
		}
	})
}

// FuzzRelay: whatever the upstream sends, Relay copies it byte for byte (or stops with an
// error) and reports no negative count.
func FuzzRelay(f *testing.F) {
	f.Add([]byte(stream))
	f.Add([]byte(strings.ReplaceAll(stream, "\n", "\r\n")))
	f.Add([]byte("data: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":-1}}\n\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		var out bytes.Buffer
		u, err := Relay(&out, func() {}, bytes.NewReader(in))
		if err == nil && !bytes.Equal(out.Bytes(), in) {
			t.Fatalf("relay changed the bytes")
		}
		if u.Input < 0 || u.Output < 0 || u.CacheRead < 0 || u.CacheCreation < 0 {
			t.Fatalf("negative usage %+v", u)
		}
	})
}
