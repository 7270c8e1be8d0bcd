package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sharness-ai/sharness/images/llm/messages"
	"github.com/sharness-ai/sharness/policies/pbp"
)

func req(extra string) string {
	return `{"model":"claude-sonnet-4-5","max_tokens":100,"messages":[{"role":"user","content":"hello"}]` + extra + `}`
}

func TestHandler(t *testing.T) {
	tests := []struct {
		name      string
		method    string
		path      string
		body      string
		hdr       []string
		status    int
		errType   string // Anthropic error type; "" for success
		deny      messages.Reason
		forwarded bool
	}{
		{"plain", "POST", "/v1/messages", req(""), nil, 200, "", "", true},
		{"beta query kept", "POST", "/v1/messages?beta=true&x=1", req(""), nil, 200, "", "", true},
		{"stream", "POST", "/v1/messages", req(`,"stream":true`), nil, 200, "", "", true},
		{"count tokens", "POST", "/v1/messages/count_tokens", `{"model":"claude-sonnet-4-5","messages":[{"role":"user","content":"hi"}]}`, nil, 200, "", "", true},
		{"models", "GET", "/v1/models?limit=1&evil=1", "", nil, 200, "", "", true},
		{"one model", "GET", "/v1/models/claude-sonnet-4-5", "", nil, 200, "", "", true},
		{"models, beta refused", "GET", "/v1/models", "", []string{"anthropic-beta", "files-api-2025-04-14"}, 400, "invalid_request_error", messages.ReasonBeta, false},
		{"model id with a slash", "GET", "/v1/models/a%2F..%2Fb", "", nil, 404, "not_found_error", messages.ReasonNotFound, false},
		{"unknown path", "POST", "/v1/complete", req(""), nil, 404, "not_found_error", messages.ReasonNotFound, false},
		{"wrong method", "GET", "/v1/messages", "", nil, 404, "not_found_error", messages.ReasonNotFound, false},
		{"invalid json", "POST", "/v1/messages", `{"model":`, nil, 400, "invalid_request_error", messages.ReasonBadJSON, false},
		{"case-variant model", "POST", "/v1/messages", `{"model":"claude-sonnet-4-5","MODEL":"claude-opus-4-5","max_tokens":1,"messages":[]}`, nil, 400, "invalid_request_error", messages.ReasonBadJSON, false},
		{"too large", "POST", "/v1/messages", req(`,"metadata":{"user_id":"` + strings.Repeat("a", maxBody) + `"}`), nil, 400, "invalid_request_error", messages.ReasonTooLarge, false},
		{"model not allowed", "POST", "/v1/messages", strings.Replace(req(""), "sonnet", "opus", 1), nil, 400, "invalid_request_error", messages.ReasonModel, false},
		{"max_tokens over cap", "POST", "/v1/messages", strings.Replace(req(""), ":100", ":5000", 1), nil, 400, "invalid_request_error", messages.ReasonMaxTokens, false},
		{"beta allowed", "POST", "/v1/messages", req(""), []string{"anthropic-beta", "token-efficient-tools-2025-02-19"}, 200, "", "", true},
		{"beta refused", "POST", "/v1/messages", req(""), []string{"anthropic-beta", "token-efficient-tools-2025-02-19,mcp-client-2025-04-04"}, 400, "invalid_request_error", messages.ReasonBeta, false},
		{"pinned tools", "POST", "/v1/messages", req(`,"tools":` + testTools), nil, 200, "", "", true},
		{"tools not pinned", "POST", "/v1/messages", req(`,"tools":[{"name":"sh","input_schema":{"type":"object"}}]`), nil, 400, "invalid_request_error", messages.ReasonToolsNotPinned, false},
		{"server tool", "POST", "/v1/messages", req(`,"tools":[{"type":"web_fetch_20250910","name":"web_fetch"}]`), nil, 400, "invalid_request_error", messages.ReasonServerTool, false},
		{"unknown field", "POST", "/v1/messages", req(`,"fallbacks":[{"model":"x"}]`), nil, 400, "invalid_request_error", messages.ReasonUnknownField, false},
		{"planted secret", "POST", "/v1/messages", strings.Replace(req(""), "hello", "my token is "+planted, 1), nil, 400, "invalid_request_error", messages.ReasonSecret, false},
		{"secret in a tool_result", "POST", "/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"` + planted + `"}]}]}]}`, nil, 400, "invalid_request_error", messages.ReasonSecret, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, llmPolicy(t))
			r, _ := http.NewRequest(tt.method, h.srv.URL+tt.path, strings.NewReader(tt.body))
			r.Header.Set("x-api-key", placeholder)
			r.Header.Set("anthropic-version", "2023-06-01")
			for i := 0; i+1 < len(tt.hdr); i += 2 {
				r.Header.Add(tt.hdr[i], tt.hdr[i+1])
			}
			resp, err := http.DefaultClient.Do(r)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.status, b)
			}
			if tt.errType != "" {
				var e struct {
					Type  string
					Error struct{ Type, Message string }
				}
				if err := json.Unmarshal(b, &e); err != nil || e.Type != "error" || e.Error.Type != tt.errType || !strings.HasPrefix(e.Error.Message, "llm: ") {
					t.Errorf("error body %s: want type %s", b, tt.errType)
				}
				if got := resp.Header.Get("x-sharness-deny"); got != string(tt.deny) {
					t.Errorf("X-Sharness-Deny %q, want %q", got, tt.deny)
				}
				if strings.Contains(string(b), planted) {
					t.Errorf("the refusal echoes the secret: %s", b)
				}
			}
			got := h.up.requests()
			if (len(got) == 1) != tt.forwarded {
				t.Fatalf("upstream got %d requests, want forwarded=%v", len(got), tt.forwarded)
			}
			if !tt.forwarded {
				return
			}
			u := got[0]
			if u.Header.Get("x-api-key") != realKey || u.Header.Get("authorization") != "" || strings.Contains(u.Body, placeholder) {
				t.Errorf("upstream auth: x-api-key %q, authorization %q", u.Header.Get("x-api-key"), u.Header.Get("authorization"))
			}
			wantPath := strings.SplitN(tt.path, "?", 2)[0]
			if wantPath == "/v1/models/claude-sonnet-4-5" {
				wantPath = "/v1/models/claude-sonnet-4-5"
			}
			if u.Path != wantPath {
				t.Errorf("upstream path %q, want %q", u.Path, wantPath)
			}
			if q, _ := url.ParseQuery(u.Query); q.Has("x") || q.Has("evil") {
				t.Errorf("upstream query %q carries unlisted parameters", u.Query)
			}
			if u.Header.Get("anthropic-version") != "2023-06-01" {
				t.Errorf("anthropic-version not forwarded")
			}
			if resp.Header.Get("request-id") != "req_test" || resp.Header.Get("anthropic-ratelimit-tokens-remaining") != "1000" || resp.Header.Get("x-internal") != "" {
				t.Errorf("response headers not by the allowlist: %v", resp.Header)
			}
			if tt.name == "stream" && string(b) != sseStream {
				t.Errorf("stream changed:\n%s", b)
			}
		})
	}
}

func TestAudit(t *testing.T) {
	h := newHarness(t, llmPolicy(t))
	h.post(t, "/v1/messages", req(`,"stream":true,"tools":`+testTools))
	h.post(t, "/v1/messages", strings.Replace(req(""), "hello", planted, 1))
	lines := h.auditLines(t)
	if len(lines) != 2 {
		t.Fatalf("%d audit lines, want 2", len(lines))
	}
	pick := func(m map[string]any) map[string]any {
		out := map[string]any{}
		for _, k := range []string{"model", "stream", "status", "reason", "input_tokens", "cache_read_tokens", "output_tokens", "tools", "filter_hits", "filter_where"} {
			out[k] = m[k]
		}
		return out
	}
	want := []map[string]any{
		{"model": model, "stream": true, "status": 200.0, "reason": "", "input_tokens": 25.0, "cache_read_tokens": 5.0, "output_tokens": 15.0, "tools": []any{"read_file"}, "filter_hits": nil, "filter_where": nil},
		{"model": model, "stream": false, "status": 400.0, "reason": "secret", "input_tokens": 0.0, "cache_read_tokens": 0.0, "output_tokens": 0.0, "tools": nil, "filter_hits": []any{"planted"}, "filter_where": []any{"messages[0]"}},
	}
	if diff := cmp.Diff(want, []map[string]any{pick(lines[0]), pick(lines[1])}); diff != "" {
		t.Errorf("audit (-want +got):\n%s", diff)
	}
	if l := h.logs.String(); strings.Contains(l, planted) || strings.Contains(l, realKey) || strings.Contains(l, "hello") {
		t.Errorf("the log holds content or the key:\n%s", l)
	}
}

func TestKeyIsFiltered(t *testing.T) {
	h := newHarness(t, llmPolicy(t))
	if resp, b := h.post(t, "/v1/messages", req("")); resp.StatusCode != 200 {
		t.Fatalf("first request: %d %s", resp.StatusCode, b)
	}
	// The agent somehow learnt the key and tries to hand it to the model.
	resp, b := h.post(t, "/v1/messages", strings.Replace(req(""), "hello", "the key is "+realKey, 1))
	if resp.StatusCode != 400 || !strings.Contains(b, "harness-secret") || strings.Contains(b, realKey) {
		t.Fatalf("key in a message: %d %s", resp.StatusCode, b)
	}
	if n := len(h.up.requests()); n != 1 {
		t.Errorf("upstream got %d requests, want 1", n)
	}
}

func TestRedact(t *testing.T) {
	p := llmPolicy(t)
	p.OnSecret = "redact"
	h := newHarness(t, p)
	resp, b := h.post(t, "/v1/messages", strings.Replace(req(""), "hello", "token "+planted+" <ok>", 1))
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	got := h.up.requests()[0].Body
	if strings.Contains(got, planted) || !strings.Contains(got, "token [REDACTED] <ok>") {
		t.Errorf("upstream body %s", got)
	}
	if l := h.auditLines(t)[0]; l["redacted"] != true {
		t.Errorf("audit: %v", l)
	}
}

func TestKMSDownFailsClosedAndRecovers(t *testing.T) {
	h := newHarness(t, llmPolicy(t))
	h.kms.down = true
	resp, b := h.post(t, "/v1/messages", req(""))
	want := string(messages.ErrorBody("api_error", "llm: the API key is unavailable (kms: connection refused)"+
		"; if kms was restarted, the person must seal the key to it again (sharness-ai kms bundle, then secret seal: docs/operator.md)"))
	if resp.StatusCode != 503 || b != want {
		t.Fatalf("kms down: %d %s, want 503 %s", resp.StatusCode, b, want)
	}
	if n := len(h.up.requests()); n != 0 {
		t.Fatalf("upstream called %d times without a key", n)
	}
	h.kms.mu.Lock()
	h.kms.down = false
	h.kms.mu.Unlock()
	if resp, b := h.post(t, "/v1/messages", req("")); resp.StatusCode != 200 {
		t.Fatalf("kms back: %d %s", resp.StatusCode, b)
	}
}

func TestKeyCache(t *testing.T) {
	for _, tt := range []struct {
		name  string
		cache *int
		calls int
	}{{"per request", nil, 3}, {"zero", ptr(0), 3}, {"cached", ptr(60), 1}} {
		t.Run(tt.name, func(t *testing.T) {
			p := llmPolicy(t)
			p.KeyCacheSeconds = tt.cache
			h := newHarness(t, p)
			for range 3 {
				h.post(t, "/v1/messages/count_tokens", `{"model":"claude-sonnet-4-5","messages":[]}`)
			}
			if h.kms.calls != tt.calls {
				t.Errorf("kms called %d times, want %d", h.kms.calls, tt.calls)
			}
		})
	}
	// Expiry: the cached key is dropped (and scrubbed) after ttl.
	now := time.Unix(0, 0)
	src := &fakeKMS{}
	k := &keys{src: src, name: "anthropic-api-key", ttl: time.Second, now: func() time.Time { return now }, seen: map[[32]byte]bool{}, learn: func([]byte) {}}
	for _, step := range []time.Duration{0, 500 * time.Millisecond, time.Second} {
		now = now.Add(step)
		key, err := k.get(context.Background())
		if err != nil || string(key) != realKey {
			t.Fatalf("get: %q %v", key, err)
		}
	}
	if src.calls != 2 {
		t.Errorf("kms calls %d, want 2 (one refresh after the ttl)", src.calls)
	}
}

type badKMS struct{ key string }

func (b badKMS) Unwrap(context.Context, string) ([]byte, error) { return []byte(b.key), nil }

func TestKeyShape(t *testing.T) {
	for _, key := range []string{"", "  \n", "a\r\nX-Evil: 1", "a b"} {
		k := &keys{src: badKMS{key}, name: "k", now: time.Now, seen: map[[32]byte]bool{}, learn: func([]byte) {}}
		if _, err := k.get(context.Background()); err == nil {
			t.Errorf("key %q: accepted", key)
		}
	}
}

func TestBudget(t *testing.T) {
	p := llmPolicy(t)
	p.Budget = ptr(40) // each plain answer costs 10+2+20 = 32 tokens
	h := newHarness(t, p)
	for i, want := range []int{200, 200, 400} {
		resp, b := h.post(t, "/v1/messages", req(""))
		if resp.StatusCode != want {
			t.Fatalf("request %d: %d %s, want %d", i, resp.StatusCode, b, want)
		}
		if want == 400 && (resp.Header.Get("x-sharness-deny") != string(messages.ReasonBudget) || !strings.Contains(b, "64 of 40 tokens")) {
			t.Errorf("budget refusal: %s", b)
		}
	}
	// Counting tokens costs nothing and still works.
	if resp, b := h.post(t, "/v1/messages/count_tokens", `{"model":"claude-sonnet-4-5","messages":[]}`); resp.StatusCode != 200 {
		t.Errorf("count_tokens after the budget: %d %s", resp.StatusCode, b)
	}
	if got := h.s.spent.Load(); got != 64 {
		t.Errorf("spent %d, want 64", got)
	}
}

// TestCancellation: the agent going away cancels the upstream request, and an upstream that
// goes away mid-stream cuts the agent's stream instead of ending it cleanly.
func TestCancellation(t *testing.T) {
	upDone := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("content-type", "text/event-stream")
		io.WriteString(w, "event: ping\ndata: {\"type\":\"ping\"}\n\n")
		w.(http.Flusher).Flush()
		if r.URL.Query().Get("beta") == "true" { // the "upstream dies" case
			panic(http.ErrAbortHandler)
		}
		<-r.Context().Done()
		close(upDone)
	}))
	defer up.Close()
	rules, _ := messages.Compile(llmPolicy(t))
	base, _ := url.Parse(up.URL)
	s := newServer(rules, &fakeFilter{}, &fakeKMS{}, to{base}, discard())
	srv := httptest.NewServer(s)
	defer srv.Close()

	ctx, cancel := context.WithCancel(context.Background())
	r, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/messages", strings.NewReader(req(`,"stream":true`)))
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	if n, _ := resp.Body.Read(buf); !strings.HasPrefix(string(buf[:n]), "event: ping") {
		t.Fatalf("first event %q", buf[:n])
	}
	cancel()
	select {
	case <-upDone:
	case <-time.After(5 * time.Second):
		t.Fatal("the upstream request outlived the agent's")
	}

	r, _ = http.NewRequest(http.MethodPost, srv.URL+"/v1/messages?beta=true", strings.NewReader(req(`,"stream":true`)))
	resp, err = http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.ReadAll(resp.Body)
	if err == nil {
		t.Error("a stream the upstream cut ended cleanly for the agent")
	}
}

func TestPeerOfKind(t *testing.T) {
	m := &pbp.Manifest{Components: []*pbp.Component{{Name: "llm", Kind: pbp.KindLLM}, {Name: "egress", Kind: pbp.KindNet}, {Name: "kms", Kind: pbp.KindKMS}},
		Edges: []pbp.Edge{{From: "llm", To: "egress"}, {From: "llm", To: "kms"}}}
	if got, err := peerOfKind(m, "llm", pbp.KindNet); err != nil || got != "egress" {
		t.Errorf("net: %q %v", got, err)
	}
	if _, err := peerOfKind(m, "kms", pbp.KindNet); err == nil {
		t.Error("no edge: accepted")
	}
}

// TestRealFilter runs llm with internal/secretfilter: the curated rules, a policy rule, and the
// key itself once kms has handed it out.
func TestRealFilter(t *testing.T) {
	p := llmPolicy(t)
	p.FilterRules = []pbp.FilterRule{{Name: "project-token", Regex: `PRJ-[0-9]{8}`}}
	f, err := newFilter(p.FilterRules)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarnessFilter(t, p, f)
	tests := []struct{ text, rule string }{
		{"hello", ""},
		{"my token ghp_aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5", "github-token"},
		{"id PRJ-12345678", "project-token"},
		{"the key: " + realKey, "harness-secret"}, // learnt from the first request
	}
	for _, tt := range tests {
		resp, b := h.post(t, "/v1/messages", strings.Replace(req(""), "hello", tt.text, 1))
		if tt.rule == "" {
			if resp.StatusCode != 200 {
				t.Errorf("%q: %d %s", tt.text, resp.StatusCode, b)
			}
			continue
		}
		if resp.StatusCode != 400 || !strings.Contains(b, "["+tt.rule+"]") || strings.Contains(b, tt.text) {
			t.Errorf("%q: %d %s, want a 400 naming %s", tt.text, resp.StatusCode, b, tt.rule)
		}
	}
	if n := len(h.up.requests()); n != 1 {
		t.Errorf("upstream got %d requests, want 1", n)
	}
	if _, err := newFilter([]pbp.FilterRule{{Name: "bad", Regex: "("}}); err == nil {
		t.Error("a policy rule that does not compile: accepted")
	}
}

// TestKeyKnownBeforeFirstFilter: llm gets the key before it filters, so even the session's first
// request cannot carry the key to the model in an encoding only the exact-match layer knows (the
// e2e suite found the hex form passing when the filter learnt the key after forwarding).
func TestKeyKnownBeforeFirstFilter(t *testing.T) {
	for _, enc := range []struct{ name, text string }{
		{"hex", hex.EncodeToString([]byte(realKey))},
		{"json-escaped", strings.ReplaceAll(realKey, "-", `\\u002d`)},
	} {
		t.Run(enc.name, func(t *testing.T) {
			p := llmPolicy(t)
			f, err := newFilter(nil)
			if err != nil {
				t.Fatal(err)
			}
			h := newHarnessFilter(t, p, f)
			resp, b := h.post(t, "/v1/messages", strings.Replace(req(""), "hello", "found: "+enc.text, 1))
			if resp.StatusCode != 400 || !strings.Contains(b, "harness-secret") {
				t.Fatalf("the key (%s) in the first request: %d %s, want a 400 naming harness-secret", enc.name, resp.StatusCode, b)
			}
			if n := len(h.up.requests()); n != 0 {
				t.Errorf("upstream got %d requests, want none", n)
			}
		})
	}
}
