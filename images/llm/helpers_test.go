package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/sharness-ai/sharness/images/llm/messages"
	"github.com/sharness-ai/sharness/policies/pbp"
)

const (
	realKey     = "sk-ant-api03-REAL-KEY-0123456789abcdef"
	placeholder = "sk-ant-placeholder"
	planted     = "PLANTED-SECRET-7f3a9c"
	model       = "claude-sonnet-4-5"
)

func ptr[T any](v T) *T { return &v }

// fakeFilter finds the planted secret (rule "planted") and every secret added, like
// internal/secretfilter's exact matcher would.
type fakeFilter struct {
	mu      sync.Mutex
	secrets map[string]string // secret → name
}

func (f *fakeFilter) AddSecret(name string, secret []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.secrets == nil {
		f.secrets = map[string]string{}
	}
	f.secrets[string(secret)] = name
}

func (f *fakeFilter) Scan(text []byte) []messages.Hit {
	f.mu.Lock()
	defer f.mu.Unlock()
	var hits []messages.Hit
	if i := bytes.Index(text, []byte(planted)); i >= 0 {
		hits = append(hits, messages.Hit{Rule: "planted", Start: i, End: i + len(planted)})
	}
	for s := range f.secrets {
		if i := bytes.Index(text, []byte(s)); i >= 0 {
			hits = append(hits, messages.Hit{Rule: "harness-secret", Start: i, End: i + len(s)})
		}
	}
	return hits
}

func (f *fakeFilter) Redact(text []byte) ([]byte, []messages.Hit) {
	hits := f.Scan(text)
	out := text
	for _, h := range hits {
		out = bytes.ReplaceAll(out, text[h.Start:h.End], []byte("[REDACTED]"))
	}
	return out, hits
}

// fakeKMS hands out realKey, or fails while down is set.
type fakeKMS struct {
	mu    sync.Mutex
	down  bool
	calls int
}

func (k *fakeKMS) Unwrap(_ context.Context, name string) ([]byte, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.calls++
	if k.down || name != "anthropic-api-key" {
		return nil, errors.New("connection refused")
	}
	return []byte(realKey + "\n"), nil
}

// seen is what the fake upstream received.
type seen struct {
	Method, Path, Query string
	Header              http.Header
	Body                string
}

// upstream is a fake model API.
type upstream struct {
	mu   sync.Mutex
	got  []seen
	srv  *httptest.Server
	tool bool // answer with a tool_use block
}

const sseStream = "event: message_start\n" +
	`data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,"cache_read_input_tokens":5,"output_tokens":1}}}` + "\n\n" +
	"event: content_block_start\n" + `data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}` + "\n\n" +
	"event: content_block_delta\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}` + "\n\n" +
	"event: content_block_delta\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" world"}}` + "\n\n" +
	"event: content_block_stop\n" + `data: {"type":"content_block_stop","index":0}` + "\n\n" +
	"event: message_delta\n" + `data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":15}}` + "\n\n" +
	"event: message_stop\n" + `data: {"type":"message_stop"}` + "\n\n"

func newUpstream(t testing.TB) *upstream {
	u := &upstream{}
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.got = append(u.got, seen{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Clone(), string(b)})
		tool := u.tool
		u.mu.Unlock()
		w.Header().Set("request-id", "req_test")
		w.Header().Set("anthropic-ratelimit-tokens-remaining", "1000")
		w.Header().Set("x-internal", "not for the agent")
		switch {
		case r.URL.Path == "/v1/messages/count_tokens":
			w.Header().Set("content-type", "application/json")
			io.WriteString(w, `{"input_tokens":12}`)
		case r.URL.Path == "/v1/models":
			w.Header().Set("content-type", "application/json")
			io.WriteString(w, `{"data":[{"type":"model","id":"claude-sonnet-4-5","display_name":"Claude Sonnet 4.5","created_at":"2025-09-29T00:00:00Z"}],"has_more":false,"first_id":"claude-sonnet-4-5","last_id":"claude-sonnet-4-5"}`)
		case strings.Contains(string(b), `"stream":true`):
			w.Header().Set("content-type", "text/event-stream")
			for ev := range strings.SplitAfterSeq(sseStream, "\n\n") {
				io.WriteString(w, ev)
				w.(http.Flusher).Flush()
			}
		case tool:
			w.Header().Set("content-type", "application/json")
			io.WriteString(w, `{"id":"msg_2","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"tool_use","id":"toolu_1","name":"read_file","input":{"path":"README"}}],"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":30,"output_tokens":20}}`)
		default:
			w.Header().Set("content-type", "application/json")
			io.WriteString(w, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"Hello world"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":10,"cache_creation_input_tokens":2,"output_tokens":20}}`)
		}
	}))
	t.Cleanup(u.srv.Close)
	return u
}

func (u *upstream) requests() []seen {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]seen(nil), u.got...)
}

// to sends every request to the fake upstream, whatever its URL says: the test stand-in for
// the tunnel through net.
type to struct{ base *url.URL }

func (t to) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.URL.Scheme, r.URL.Host = t.base.Scheme, t.base.Host
	return http.DefaultTransport.RoundTrip(r)
}

type harness struct {
	up   *upstream
	kms  *fakeKMS
	s    *server
	srv  *httptest.Server
	logs *bytes.Buffer
}

// testTools is a tool list the test policy pins, as the SDK encodes it.
const testTools = `[{"name":"read_file","description":"Read a file","input_schema":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}}]`

func llmPolicy(t testing.TB) *pbp.LLMRules {
	h, err := messages.ToolsHash(json.RawMessage(testTools))
	if err != nil {
		t.Fatal(err)
	}
	return &pbp.LLMRules{Upstream: "https://api.anthropic.com", Models: &[]string{model}, MaxTokens: ptr(4096),
		Budget: ptr(1000), KeySecret: "anthropic-api-key", Tools: &[]string{h}, Betas: &[]string{"token-efficient-tools-2025-02-19"}}
}

func newHarness(t testing.TB, p *pbp.LLMRules) *harness {
	t.Helper()
	return newHarnessFilter(t, p, &fakeFilter{})
}

func newHarnessFilter(t testing.TB, p *pbp.LLMRules, f secretFilter) *harness {
	t.Helper()
	rules, err := messages.Compile(p)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{up: newUpstream(t), kms: &fakeKMS{}, logs: &bytes.Buffer{}}
	base, _ := url.Parse(h.up.srv.URL)
	h.s = newServer(rules, f, h.kms, to{base}, slog.New(slog.NewJSONHandler(&syncWriter{w: h.logs}, nil)))
	h.srv = httptest.NewServer(h.s)
	t.Cleanup(h.srv.Close)
	return h
}

type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(b)
}

// post sends a raw request to llm as the agent would, with the placeholder key.
func (h *harness) post(t testing.TB, path, body string, hdr ...string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, h.srv.URL+path, strings.NewReader(body))
	req.Header.Set("x-api-key", placeholder)
	req.Header.Set("authorization", "Bearer "+placeholder)
	req.Header.Set("anthropic-version", "2023-06-01")
	req.Header.Set("content-type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// auditLines are the audit records logged so far.
func (h *harness) auditLines(t testing.TB) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range strings.Lines(h.logs.String()) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if m["msg"] == "llm request" {
			out = append(out, m)
		}
	}
	return out
}

func discard() *slog.Logger { return slog.New(slog.NewJSONHandler(io.Discard, nil)) }
