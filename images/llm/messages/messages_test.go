package messages

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sharness-ai/sharness/policies/pbp"
)

func ptr[T any](v T) *T { return &v }

// testTools is a custom tool list and its pin.
const testTools = `[{"name":"read","description":"read a file","input_schema":{"type":"object","properties":{"path":{"type":"string"}}}}]`

func pin(t testing.TB, tools string) string {
	t.Helper()
	h, err := ToolsHash(json.RawMessage(tools))
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func testPolicy(t testing.TB) *pbp.LLMRules {
	return &pbp.LLMRules{
		Upstream: "https://api.anthropic.com", Models: &[]string{"claude-sonnet-4-5"},
		MaxTokens: ptr(1000), Budget: ptr(100000), KeySecret: "anthropic-api-key",
		Betas: &[]string{"interleaved-thinking-2025-05-14"}, ServerTools: &[]string{"web_search_20250305"},
		MCPServers: &[]string{"https://mcp.example/sse"}, ExtraFields: &[]string{"x_extra"},
		Tools: &[]string{pin(t, testTools)},
	}
}

func testRules(t testing.TB) *Rules {
	t.Helper()
	r, err := Compile(testPolicy(t))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestCompile(t *testing.T) {
	tests := []struct {
		name   string
		change func(*pbp.LLMRules)
		want   string // substring of the error; "" for success
	}{
		{"complete", func(*pbp.LLMRules) {}, ""},
		{"no upstream", func(r *pbp.LLMRules) { r.Upstream = "" }, "upstream is not set"},
		{"http upstream", func(r *pbp.LLMRules) { r.Upstream = "http://api.anthropic.com" }, "want https"},
		{"upstream with path", func(r *pbp.LLMRules) { r.Upstream = "https://api.anthropic.com/v1" }, "want https"},
		{"upstream with user", func(r *pbp.LLMRules) { r.Upstream = "https://u:p@api.anthropic.com" }, "want https"},
		{"bad upstream", func(r *pbp.LLMRules) { r.Upstream = "https://[::1" }, "upstream"},
		{"no models", func(r *pbp.LLMRules) { r.Models = nil }, "models is not set"},
		{"empty models", func(r *pbp.LLMRules) { r.Models = &[]string{} }, "models is not set"},
		{"no max_tokens", func(r *pbp.LLMRules) { r.MaxTokens = nil }, "max_tokens"},
		{"zero max_tokens", func(r *pbp.LLMRules) { r.MaxTokens = ptr(0) }, "max_tokens"},
		{"no budget", func(r *pbp.LLMRules) { r.Budget = nil }, "session_token_budget"},
		{"no key secret", func(r *pbp.LLMRules) { r.KeySecret = "" }, "key_secret"},
		{"bad on_secret", func(r *pbp.LLMRules) { r.OnSecret = "log" }, "on_secret"},
		{"negative cache", func(r *pbp.LLMRules) { r.KeyCacheSeconds = ptr(-1) }, "negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := testPolicy(t)
			tt.change(p)
			_, err := Compile(p)
			if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Fatalf("Compile: got %v, want %q", err, tt.want)
			}
		})
	}
	if _, err := Compile(nil); err == nil {
		t.Error("Compile(nil): got nil error")
	}
	r, err := Compile(&pbp.LLMRules{Upstream: "https://api.anthropic.com/", Models: &[]string{"m"}, MaxTokens: ptr(1), Budget: ptr(2), KeySecret: "k", KeyCacheSeconds: ptr(30), OnSecret: "redact", FilterRules: []pbp.FilterRule{{Name: "x", Regex: "x"}}})
	if err != nil {
		t.Fatal(err)
	}
	got := []any{r.Upstream().String(), r.Budget(), r.KeySecret(), r.KeyCache(), r.redact, len(r.FilterRules())}
	if diff := cmp.Diff([]any{"https://api.anthropic.com", int64(2), "k", 30 * time.Second, true, 1}, got); diff != "" {
		t.Errorf("accessors (-want +got):\n%s", diff)
	}
}

// body builds a request body from a base and top-level fields to add (or, with a nil value,
// remove).
func body(t testing.TB, add map[string]any) []byte {
	t.Helper()
	m := map[string]any{
		"model": "claude-sonnet-4-5", "max_tokens": 100,
		"messages": []any{map[string]any{"role": "user", "content": "hello"}},
	}
	for k, v := range add {
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func raw(s string) json.RawMessage { return json.RawMessage(s) }

func TestParseCheck(t *testing.T) {
	rules := testRules(t)
	tests := []struct {
		name  string
		body  []byte
		ep    Endpoint
		betas []string
		want  Reason // "" allows
	}{
		{"plain", body(t, nil), Create, nil, ""},
		{"stream", body(t, map[string]any{"stream": true}), Create, nil, ""},
		{"invalid json", []byte(`{"model":`), Create, nil, ReasonBadJSON},
		{"not an object", []byte(`[1]`), Create, nil, ReasonBadJSON},
		{"null", []byte(`null`), Create, nil, ReasonBadJSON},
		{"trailing data", append(body(t, nil), `{}`...), Create, nil, ReasonBadJSON},
		{"duplicate key", []byte(`{"model":"claude-sonnet-4-5","model":"other","max_tokens":1,"messages":[]}`), Create, nil, ReasonBadJSON},
		{"case-variant key", []byte(`{"model":"claude-sonnet-4-5","MODEL":"other","max_tokens":1,"messages":[]}`), Create, nil, ReasonBadJSON},
		{"nested duplicate", []byte(`{"model":"claude-sonnet-4-5","max_tokens":1,"messages":[{"role":"user","content":"a","Content":"b"}]}`), Create, nil, ReasonBadJSON},
		{"too deep", []byte(`{"model":"claude-sonnet-4-5","max_tokens":1,"messages":[],"metadata":` + strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth) + `}`), Create, nil, ReasonBadJSON},
		{"model not a string", body(t, map[string]any{"model": 1}), Create, nil, ReasonBadField},
		{"stream not a bool", body(t, map[string]any{"stream": "yes"}), Create, nil, ReasonBadField},
		{"max_tokens float", body(t, map[string]any{"max_tokens": 1.5}), Create, nil, ReasonBadField},
		{"max_tokens null", body(t, map[string]any{"max_tokens": raw("null")}), Create, nil, ReasonBadField},
		{"no messages", body(t, map[string]any{"messages": nil}), Create, nil, ReasonBadField},
		{"messages not array", body(t, map[string]any{"messages": "hi"}), Create, nil, ReasonBadField},
		{"tools not array", body(t, map[string]any{"tools": "x"}), Create, nil, ReasonBadField},
		{"tool null", body(t, map[string]any{"tools": raw(`[null]`)}), Create, nil, ReasonBadField},
		{"tool name not string", body(t, map[string]any{"tools": raw(`[{"name":1}]`)}), Create, nil, ReasonBadField},
		{"unknown field", body(t, map[string]any{"fallbacks": []string{"claude-opus-4-5"}}), Create, nil, ReasonUnknownField},
		{"extra field allowed", body(t, map[string]any{"x_extra": 1}), Create, nil, ""},
		{"model not allowed", body(t, map[string]any{"model": "claude-opus-4-5"}), Create, nil, ReasonModel},
		{"model missing", body(t, map[string]any{"model": nil}), Create, nil, ReasonModel},
		{"max_tokens missing", body(t, map[string]any{"max_tokens": nil}), Create, nil, ReasonMaxTokens},
		{"max_tokens missing, count", body(t, map[string]any{"max_tokens": nil}), CountTokens, nil, ""},
		{"max_tokens zero", body(t, map[string]any{"max_tokens": 0}), Create, nil, ReasonMaxTokens},
		{"max_tokens negative", body(t, map[string]any{"max_tokens": -5}), Create, nil, ReasonMaxTokens},
		{"max_tokens at cap", body(t, map[string]any{"max_tokens": 1000}), Create, nil, ""},
		{"max_tokens over cap", body(t, map[string]any{"max_tokens": 1001}), Create, nil, ReasonMaxTokens},
		{"beta allowed", body(t, nil), Create, []string{"interleaved-thinking-2025-05-14"}, ""},
		{"beta list with one bad", body(t, nil), Create, []string{"interleaved-thinking-2025-05-14, mcp-client-2025-04-04"}, ReasonBeta},
		{"beta second line bad", body(t, nil), Create, []string{"interleaved-thinking-2025-05-14", "files-api-2025-04-14"}, ReasonBeta},
		{"beta empty entries", body(t, nil), Create, []string{" , "}, ""},
		{"pinned tools", body(t, map[string]any{"tools": raw(testTools)}), Create, nil, ""},
		{"pinned tools with cache_control", body(t, map[string]any{"tools": raw(`[{"name":"read","description":"read a file","input_schema":{"type":"object","properties":{"path":{"type":"string"}}},"cache_control":{"type":"ephemeral"}}]`)}), Create, nil, ""},
		{"pinned tools, keys reordered", body(t, map[string]any{"tools": raw(`[{"input_schema":{"properties":{"path":{"type":"string"}},"type":"object"},"description":"read a file","name":"read"}]`)}), Create, nil, ""},
		{"tools changed", body(t, map[string]any{"tools": raw(`[{"name":"read","description":"read any file","input_schema":{"type":"object"}}]`)}), Create, nil, ReasonToolsNotPinned},
		{"custom type pinned the same", body(t, map[string]any{"tools": raw(`[{"type":"custom","name":"read"}]`)}), Create, nil, ReasonToolsNotPinned},
		{"client tool needs pin", body(t, map[string]any{"tools": raw(`[{"type":"bash_20250124","name":"bash"}]`)}), Create, nil, ReasonToolsNotPinned},
		{"server tool allowed", body(t, map[string]any{"tools": raw(`[{"type":"web_search_20250305","name":"web_search"}]`)}), Create, nil, ""},
		{"server tool plus pinned", body(t, map[string]any{"tools": raw(`[{"type":"web_search_20250305","name":"web_search"},` + testTools[1:])}), Create, nil, ""},
		{"server tool refused", body(t, map[string]any{"tools": raw(`[{"type":"web_fetch_20250910","name":"web_fetch"}]`)}), Create, nil, ReasonServerTool},
		{"unknown tool type refused", body(t, map[string]any{"tools": raw(`[{"type":"mcp_toolset","mcp_server_name":"x"}]`)}), Create, nil, ReasonServerTool},
		{"tool number JCS rounds", body(t, map[string]any{"tools": raw(`[{"name":"read","input_schema":{"maxItems":9007199254740993}}]`)}), Create, nil, ReasonBadField},
		{"mcp allowed", body(t, map[string]any{"mcp_servers": raw(`[{"type":"url","url":"https://mcp.example/sse","name":"m"}]`)}), Create, nil, ""},
		{"mcp refused", body(t, map[string]any{"mcp_servers": raw(`[{"type":"url","url":"https://evil.example/sse","name":"m"}]`)}), Create, nil, ReasonMCPServer},
		{"mcp without url", body(t, map[string]any{"mcp_servers": raw(`[{"type":"url"}]`)}), Create, nil, ReasonMCPServer},
		{"mcp not array", body(t, map[string]any{"mcp_servers": raw(`{}`)}), Create, nil, ReasonBadField},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got Reason
			r, ref := Parse(tt.body)
			if ref == nil {
				ref = Check(rules, r, tt.ep, tt.betas)
			}
			if ref != nil {
				got = ref.Reason
				if !strings.HasPrefix(ref.Message, "llm: ") || ref.Status == 0 || ref.Type == "" {
					t.Errorf("refusal %+v: want an llm: message, a status and a type", ref)
				}
			}
			if got != tt.want {
				t.Fatalf("got %q (%v), want %q", got, ref, tt.want)
			}
		})
	}
}

func TestParseFields(t *testing.T) {
	r, ref := Parse([]byte(`{"model":"m","stream":true,"max_tokens":7,"messages":[],"tools":[{"name":"a"},{"type":"web_search_20250305","name":"web_search"}]}`))
	if ref != nil {
		t.Fatal(ref)
	}
	got := []any{r.Model, r.Stream, r.MaxTokens, r.Tools}
	if diff := cmp.Diff([]any{"m", true, int64(7), []string{"a", "web_search"}}, got); diff != "" {
		t.Errorf("fields (-want +got):\n%s", diff)
	}
}

func TestRefusalShape(t *testing.T) {
	for _, tt := range []struct {
		reason  Reason
		status  int
		errType string
	}{
		{ReasonBadJSON, http.StatusBadRequest, "invalid_request_error"},
		{ReasonBadField, http.StatusBadRequest, "invalid_request_error"},
		{ReasonModel, http.StatusBadRequest, "invalid_request_error"},
		{ReasonSecret, http.StatusBadRequest, "invalid_request_error"},
		{ReasonTooLarge, http.StatusBadRequest, "invalid_request_error"},
		{ReasonNotFound, http.StatusNotFound, "not_found_error"},
		{ReasonKey, http.StatusServiceUnavailable, "api_error"},
	} {
		r := refuse(tt.reason, "x %d", 1)
		if r.Status != tt.status || r.Type != tt.errType || r.Error() != "llm: x 1"+hints[tt.reason] {
			t.Errorf("refuse(%s) = %+v", tt.reason, r)
		}
	}
	var e struct {
		Type  string `json:"type"`
		Error struct{ Type, Message string }
	}
	if err := json.Unmarshal(ErrorBody("api_error", `a "b"`), &e); err != nil || e.Type != "error" || e.Error.Type != "api_error" || e.Error.Message != `a "b"` {
		t.Errorf("ErrorBody: %+v, %v", e, err)
	}
}

func TestToolsHash(t *testing.T) {
	base := pin(t, testTools)
	tests := []struct {
		name  string
		tools string
		same  bool // hashes like testTools
		err   bool
	}{
		{"whitespace and key order", `[ {"input_schema":{"properties":{"path":{"type":"string"}},"type":"object"}, "description":"read a file","name":"read"} ]`, true, false},
		{"cache_control ignored", `[{"name":"read","description":"read a file","input_schema":{"type":"object","properties":{"path":{"type":"string"}}},"cache_control":{"type":"ephemeral"}}]`, true, false},
		{"server tools ignored", `[{"type":"web_search_20250305","name":"web_search","max_uses":3},` + testTools[1:], true, false},
		{"escaped string same", `[{"name":"\u0072ead","description":"read a file","input_schema":{"type":"object","properties":{"path":{"type":"string"}}}}]`, true, false},
		{"description changed", `[{"name":"read","description":"read a File","input_schema":{"type":"object","properties":{"path":{"type":"string"}}}}]`, false, false},
		{"number 1.0 equals 1", `[{"name":"n","x":1.0}]`, false, false},
		{"rounded integer", `[{"name":"n","x":9007199254740993}]`, false, true},
		{"huge exponent", `[{"name":"n","x":1e-999999999}]`, false, true},
		{"overflow", `[{"name":"n","x":1e400}]`, false, true},
		{"long number", `[{"name":"n","x":1.00000000000000000000000000000000000000001}]`, false, true},
		{"not an array", `{}`, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := ToolsHash(json.RawMessage(tt.tools))
			if (err != nil) != tt.err {
				t.Fatalf("err = %v, want error %v", err, tt.err)
			}
			if err == nil && (h == base) != tt.same {
				t.Errorf("hash %s vs base %s: want same=%v", h, base, tt.same)
			}
		})
	}
	a, _ := ToolsHash(raw(`[{"name":"n","x":1.0}]`))
	b, _ := ToolsHash(raw(`[{"name":"n","x":1}]`))
	c, _ := ToolsHash(raw(`[{"name":"n","x":0.1}]`))
	e, _ := ToolsHash(raw(`[]`))
	if a != b || c == "" || !strings.HasPrefix(e, "sha256:") || len(e) != len("sha256:")+64 {
		t.Errorf("1.0 vs 1: %s %s; 0.1: %q; empty: %q", a, b, c, e)
	}
	// The pin is the SHA-256 of the JCS bytes, so anyone can compute it with other tools.
	if e != "sha256:4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945" {
		t.Errorf("hash of [] = %s", e)
	}
}

// fakeScanner finds "SECRET-" followed by letters, and AKIA keys, like a filter with two rules.
type fakeScanner struct{}

func (fakeScanner) Scan(text []byte) []Hit {
	var hits []Hit
	for _, rule := range []string{"SECRET-", "AKIA"} {
		off := 0
		for {
			i := bytes.Index(text[off:], []byte(rule))
			if i < 0 {
				break
			}
			start, end := off+i, off+i+len(rule)
			for end < len(text) && (text[end] >= 'A' && text[end] <= 'Z' || text[end] >= 'a' && text[end] <= 'z') {
				end++
			}
			hits = append(hits, Hit{Rule: strings.ToLower(strings.TrimSuffix(rule, "-")), Start: start, End: end})
			off = end
		}
	}
	return hits
}

func (f fakeScanner) Redact(text []byte) ([]byte, []Hit) {
	hits := f.Scan(text)
	out := append([]byte(nil), text...)
	for i := len(hits) - 1; i >= 0; i-- { // hits of different rules do not overlap in tests
		h := hits[i]
		out = append(out[:h.Start], append([]byte("[REDACTED:"+h.Rule+"]"), out[h.End:]...)...)
	}
	return out, hits
}

func TestSecrets(t *testing.T) {
	tests := []struct {
		name     string
		body     string
		redact   bool
		want     Findings
		refused  bool
		wantBody string // after redaction; "" = unchanged
	}{
		{"clean", `{"messages":[{"role":"user","content":"hello"}]}`, false, Findings{}, false, ""},
		{"string content", `{"messages":[{"role":"user","content":"key SECRET-abc"}]}`, false,
			Findings{Rules: []string{"secret"}, Where: []string{"messages[0]"}}, true, ""},
		{"text block", `{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"ok"},{"role":"user","content":[{"type":"text","text":"AKIAxyz"}]}]}`, false,
			Findings{Rules: []string{"akia"}, Where: []string{"messages[2]"}}, true, ""},
		{"nested tool_result", `{"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"out SECRET-x"}]}]}]}`, false,
			Findings{Rules: []string{"secret"}, Where: []string{"messages[0]"}}, true, ""},
		{"tool_result string", `{"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"SECRET-y AKIAz"}]}]}`, false,
			Findings{Rules: []string{"akia", "secret"}, Where: []string{"messages[0]"}}, true, ""},
		{"system", `{"system":[{"type":"text","text":"SECRET-s"}],"messages":[]}`, false,
			Findings{Rules: []string{"secret"}, Where: []string{"system"}}, true, ""},
		{"text document", `{"messages":[{"role":"user","content":[{"type":"document","source":{"type":"text","media_type":"text/plain","data":"SECRET-d"}}]}]}`, false,
			Findings{Rules: []string{"secret"}, Where: []string{"messages[0]"}}, true, ""},
		{"assistant not scanned", `{"messages":[{"role":"assistant","content":"SECRET-a"}]}`, false, Findings{}, false, ""},
		// Claude Code sends a "system" role message; a role llm does not know is scanned too.
		{"system role message", `{"messages":[{"role":"system","content":"SECRET-r"},{"role":"user","content":"hi"}]}`, false,
			Findings{Rules: []string{"secret"}, Where: []string{"messages[0]"}}, true, ""},
		{"unknown role", `{"messages":[{"role":"developer","content":[{"type":"text","text":"AKIAq"}]}]}`, false,
			Findings{Rules: []string{"akia"}, Where: []string{"messages[0]"}}, true, ""},
		{"redact system role", `{"messages":[{"role":"system","content":"x SECRET-z"}]}`, true,
			Findings{Rules: []string{"secret"}, Where: []string{"messages[0]"}}, false,
			`{"messages":[{"content":"x [REDACTED:secret]","role":"system"}]}`},
		{"ids and base64 not scanned", `{"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"SECRET-i"}},{"type":"tool_result","tool_use_id":"SECRET-t","content":"ok"}]}]}`, false, Findings{}, false, ""},
		{"redact", `{"messages":[{"role":"user","content":"a SECRET-abc <b> & 12345678901234567890"},{"role":"assistant","content":"x"}],"model":"m"}`, true,
			Findings{Rules: []string{"secret"}, Where: []string{"messages[0]"}}, false,
			`{"messages":[{"content":"a [REDACTED:secret] <b> & 12345678901234567890","role":"user"},{"content":"x","role":"assistant"}],"model":"m"}`},
		{"redact, escaped role", `{"messages":[{"role":"\u0075ser","content":"SECRET-abc"}]}`, true,
			Findings{Rules: []string{"secret"}, Where: []string{"messages[0]"}}, false,
			`{"messages":[{"role":"user","content":"[REDACTED:secret]"}]}`},
		{"redaction the slow path misses is refused", `{"messages":[{"role":"user","content":[{"type":"\u0062ase64","data":"SECRET-b"}]}]}`, true,
			Findings{Rules: []string{"secret"}, Where: []string{"messages[0]"}}, true, ""},
		{"redact system and number kept", `{"system":"SECRET-q","messages":[{"role":"user","content":[{"type":"text","text":"n","x":12345678901234567890123}]}]}`, true,
			Findings{Rules: []string{"secret"}, Where: []string{"system"}}, false,
			`{"messages":[{"content":[{"type":"text","text":"n","x":12345678901234567890123}],"role":"user"}],"system":"[REDACTED:secret]"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, ref := Parse([]byte(tt.body))
			if ref != nil {
				t.Fatal(ref)
			}
			f, ref := Secrets(fakeScanner{}, r, tt.redact)
			if (ref != nil) != tt.refused {
				t.Fatalf("refusal %v, want refused=%v", ref, tt.refused)
			}
			if ref != nil && (ref.Reason != ReasonSecret || strings.Contains(ref.Message, "SECRET-") || strings.Contains(ref.Message, "AKIA")) {
				t.Errorf("refusal %q echoes the secret or has the wrong reason", ref.Message)
			}
			if diff := cmp.Diff(tt.want, f, cmpEmpty); diff != "" {
				t.Errorf("findings (-want +got):\n%s", diff)
			}
			got, err := r.Body()
			if err != nil {
				t.Fatal(err)
			}
			if tt.wantBody != "" {
				if !jsonEqual(t, got, []byte(tt.wantBody)) || !r.Redacted() {
					t.Errorf("body\n got %s\nwant %s", got, tt.wantBody)
				}
			} else if r.Redacted() {
				t.Errorf("body rewritten without a redaction: %s", got)
			}
		})
	}
}

var cmpEmpty = cmp.FilterValues(func(a, b []string) bool { return len(a) == 0 && len(b) == 0 }, cmp.Comparer(func(a, b []string) bool { return true }))

func TestSecretsBadShapes(t *testing.T) {
	for _, b := range []string{
		`{"model":"m","messages":[1]}`,
		`{"model":"m","messages":[{"role":1}]}`,
		`{"model":"m","messages":[null]}`,
		`{"model":"m","messages":[{"content":"x"}]}`,
	} {
		r, ref := Parse([]byte(b))
		if ref != nil {
			t.Fatal(ref)
		}
		if _, ref := Secrets(fakeScanner{}, r, false); ref == nil || ref.Reason != ReasonBadField {
			t.Errorf("%s: got %v, want %s", b, ref, ReasonBadField)
		}
	}
}

// jsonEqual compares two JSON documents by value, numbers by their text.
func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var va, vb any
	for _, p := range []struct {
		b []byte
		v *any
	}{{a, &va}, {b, &vb}} {
		dec := json.NewDecoder(bytes.NewReader(p.b))
		dec.UseNumber()
		if err := dec.Decode(p.v); err != nil {
			t.Fatalf("%s: %v", p.b, err)
		}
	}
	return cmp.Equal(va, vb)
}
