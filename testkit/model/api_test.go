package main

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
	"github.com/google/go-cmp/cmp"
)

const testKey = "sk-ant-test-key"

// newServer serves the API (with a record) over plain HTTP for the SDK to call.
func newServer(t *testing.T, keyHash []byte) (*httptest.Server, *recorder) {
	t.Helper()
	rec := newRecorder(256, 32<<20)
	srv := httptest.NewServer(&api{keyHash: keyHash, rec: rec, log: slog.New(slog.DiscardHandler)})
	t.Cleanup(srv.Close)
	return srv, rec
}

// client is the real SDK pointed at srv, with no retries unless opts say otherwise.
func client(srv *httptest.Server, opts ...option.RequestOption) anthropic.Client {
	base := []option.RequestOption{option.WithBaseURL(srv.URL), option.WithAPIKey(testKey), option.WithMaxRetries(0)}
	return anthropic.NewClient(append(base, opts...)...)
}

func user(text string) anthropic.MessageParam {
	return anthropic.NewUserMessage(anthropic.NewTextBlock(text))
}

var tools = []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{Name: "get_time",
	InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{}}}}}

// got is what a test compares of a reply: each block as "type:text-or-name", and the rest.
type got struct {
	Blocks   []string
	Stop     string
	In, Out  int64
	ToolJSON string
}

func summary(m *anthropic.Message) got {
	g := got{Stop: string(m.StopReason), In: m.Usage.InputTokens, Out: m.Usage.OutputTokens}
	for _, b := range m.Content {
		switch b.Type {
		case "text":
			g.Blocks = append(g.Blocks, "text:"+b.Text)
		case "tool_use":
			g.Blocks = append(g.Blocks, "tool_use:"+b.Name)
			g.ToolJSON = string(b.Input)
		}
	}
	return g
}

// TestMessages runs each case both ways, JSON and streamed (accumulated by the SDK): both must
// give the same message.
func TestMessages(t *testing.T) {
	srv, _ := newServer(t, nil)
	c := client(srv)
	long := strings.Repeat("é", 150) // 300 bytes: cut at a rune boundary, 200 bytes
	tests := []struct {
		name   string
		params anthropic.MessageNewParams
		want   got
	}{
		{"plain", anthropic.MessageNewParams{Messages: []anthropic.MessageParam{user("hello there")}},
			got{Blocks: []string{"text:offline model: 1 messages, last user text: hello there"}, Stop: "end_turn", In: 10, Out: 14}},
		{"long text is cut at 200 bytes", anthropic.MessageNewParams{Messages: []anthropic.MessageParam{user(long)}},
			got{Blocks: []string{"text:offline model: 1 messages, last user text: " + long[:200]}, Stop: "end_turn", In: 82, Out: 61}},
		{"max_tokens cuts the reply", anthropic.MessageNewParams{MaxTokens: 3, Messages: []anthropic.MessageParam{user("hello there")}},
			got{Blocks: []string{"text:offline "}, Stop: "max_tokens", In: 10, Out: 3}},
		{"tool use", anthropic.MessageNewParams{Tools: tools, Messages: []anthropic.MessageParam{user("please use tool get_time.")}},
			got{Blocks: []string{"text:offline model: calling tool get_time", "tool_use:get_time"}, Stop: "tool_use", In: 16, Out: 19, ToolJSON: "{}"}},
		{"undeclared tool", anthropic.MessageNewParams{Tools: tools, Messages: []anthropic.MessageParam{user("use tool rm_rf")}},
			got{Blocks: []string{`text:offline model: no tool named "rm_rf" in this request`}, Stop: "end_turn", In: 13, Out: 14}},
		{"tool use needs tools", anthropic.MessageNewParams{Messages: []anthropic.MessageParam{user("use tool get_time")}},
			got{Blocks: []string{"text:offline model: 1 messages, last user text: use tool get_time"}, Stop: "end_turn", In: 12, Out: 16}},
		{"tool result", anthropic.MessageNewParams{Tools: tools, Messages: []anthropic.MessageParam{
			user("use tool get_time"),
			anthropic.NewAssistantMessage(anthropic.NewToolUseBlock("toolu_1", map[string]any{}, "get_time")),
			anthropic.NewUserMessage(anthropic.NewToolResultBlock("toolu_1", "12:00:00", false)),
		}}, got{Blocks: []string{"text:offline model: tool result of 8 bytes received: 12:00:00"}, Stop: "end_turn", In: 58, Out: 15}},
		{"tool use with an input", anthropic.MessageNewParams{Tools: tools, Messages: []anthropic.MessageParam{user(`use tool get_time {"zone":"UTC"}`)}},
			got{Blocks: []string{"text:offline model: calling tool get_time", "tool_use:get_time"}, Stop: "tool_use", In: 18, Out: 22, ToolJSON: `{"zone":"UTC"}`}},
		{"an input that is not a JSON object is {}", anthropic.MessageNewParams{Tools: tools, Messages: []anthropic.MessageParam{user(`use tool get_time ["UTC"]`)}},
			got{Blocks: []string{"text:offline model: calling tool get_time", "tool_use:get_time"}, Stop: "tool_use", In: 16, Out: 19, ToolJSON: "{}"}},
		{"system reminders are not the user's text", anthropic.MessageNewParams{Messages: []anthropic.MessageParam{anthropic.NewUserMessage(
			anthropic.NewTextBlock("<system-reminder>\nClaude Code's context\n</system-reminder>"), anthropic.NewTextBlock("hello there"))}},
			got{Blocks: []string{"text:offline model: 1 messages, last user text: hello there"}, Stop: "end_turn", In: 37, Out: 14}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.params
			p.Model = "claude-sonnet-4-5"
			if p.MaxTokens == 0 {
				p.MaxTokens = 1024
			}
			m, err := c.Messages.New(context.Background(), p)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, summary(m)); diff != "" {
				t.Errorf("message (-want +got):\n%s", diff)
			}
			if m.Model != "claude-sonnet-4-5" || m.Role != "assistant" || !strings.HasPrefix(m.ID, "msg_offline_") {
				t.Errorf("message header: model %q role %q id %q", m.Model, m.Role, m.ID)
			}
			s := c.Messages.NewStreaming(context.Background(), p)
			var acc anthropic.Message
			for s.Next() {
				if err := acc.Accumulate(s.Current()); err != nil {
					t.Fatalf("accumulate: %v", err)
				}
			}
			if err := s.Err(); err != nil {
				t.Fatalf("stream: %v", err)
			}
			if diff := cmp.Diff(tt.want, summary(&acc)); diff != "" {
				t.Errorf("streamed message (-want +got):\n%s", diff)
			}
			n, err := c.Messages.CountTokens(context.Background(), anthropic.MessageCountTokensParams{Model: p.Model, Messages: p.Messages,
				Tools: countTools(p.Tools)})
			if err != nil || n.InputTokens != tt.want.In {
				t.Errorf("count_tokens = %v, %v; want %d, as the message's usage", n, err, tt.want.In)
			}
		})
	}
}

func countTools(ts []anthropic.ToolUnionParam) []anthropic.MessageCountTokensToolUnionParam {
	var out []anthropic.MessageCountTokensToolUnionParam
	for _, t := range ts {
		out = append(out, anthropic.MessageCountTokensToolUnionParam{OfTool: t.OfTool})
	}
	return out
}

// TestStreamEvents reads the raw stream: the real API's event sequence, with cumulative usage.
func TestStreamEvents(t *testing.T) {
	srv, _ := newServer(t, nil)
	body := `{"model":"m","max_tokens":100,"stream":true,"messages":[{"role":"user","content":"a b"}]}`
	req, _ := http.NewRequest("POST", srv.URL+"/v1/messages", strings.NewReader(body))
	req.Header.Set("x-api-key", testKey)
	req.Header.Set("anthropic-version", "2023-06-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var events []string
	var lastData string
	for _, line := range strings.Split(string(raw), "\n") {
		if ev, ok := strings.CutPrefix(line, "event: "); ok {
			events = append(events, ev)
		} else if d, ok := strings.CutPrefix(line, "data: "); ok {
			if events[len(events)-1] == "message_delta" {
				lastData = d
			}
		}
	}
	want := []string{"message_start", "content_block_start", "ping"}
	for range strings.SplitAfter("offline model: 1 messages, last user text: a b", " ") {
		want = append(want, "content_block_delta")
	}
	want = append(want, "content_block_stop", "message_delta", "message_stop")
	if diff := cmp.Diff(want, events); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type = %q", ct)
	}
	if wantDelta := `{"delta":{"stop_reason":"end_turn","stop_sequence":null},"type":"message_delta","usage":{"input_tokens":2,"output_tokens":12}}`; lastData != wantDelta {
		t.Errorf("message_delta = %s, want %s", lastData, wantDelta)
	}
}

// TestErrors: every error reaches the SDK as an *anthropic.Error with the status and type.
func TestErrors(t *testing.T) {
	sum := sha256.Sum256([]byte(testKey))
	srv, rec := newServer(t, sum[:])
	tests := []struct {
		name   string
		opts   []option.RequestOption
		text   string
		stream bool
		status int
		kind   string
	}{
		{"overloaded", nil, "offline: error overloaded", false, 529, "overloaded_error"},
		{"overloaded streamed", nil, "offline: error overloaded", true, 529, "overloaded_error"},
		{"invalid request", nil, "please offline: error invalid.", false, 400, "invalid_request_error"},
		{"rate limit", nil, "offline: error rate_limit", false, 429, "rate_limit_error"},
		{"api error", nil, "offline: error api", false, 500, "api_error"},
		{"error event mid-stream", nil, "offline: error stream", true, 200, "overloaded_error"},
		{"mid-stream error without a stream", nil, "offline: error stream", false, 529, "overloaded_error"},
		{"missing key", []option.RequestOption{option.WithHeaderDel("x-api-key")}, "hi", false, 401, "authentication_error"},
		{"wrong key", []option.RequestOption{option.WithAPIKey("sk-ant-other")}, "hi", false, 401, "authentication_error"},
		{"missing anthropic-version", []option.RequestOption{option.WithHeaderDel("anthropic-version")}, "hi", false, 400, "invalid_request_error"},
		{"missing max_tokens", []option.RequestOption{option.WithJSONDel("max_tokens")}, "hi", false, 400, "invalid_request_error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := anthropic.MessageNewParams{Model: "m", MaxTokens: 10, Messages: []anthropic.MessageParam{user(tt.text)}}
			c := client(srv, tt.opts...)
			var err error
			if tt.stream {
				s, events := c.Messages.NewStreaming(context.Background(), p), 0
				for s.Next() {
					events++
				}
				if err = s.Err(); tt.status == 200 && events != 2 {
					t.Errorf("the stream failed after %d events, want 2 (message_start, content_block_start)", events)
				}
			} else {
				_, err = c.Messages.New(context.Background(), p)
			}
			var apiErr *anthropic.Error
			if !errors.As(err, &apiErr) {
				t.Fatalf("error = %v, want an *anthropic.Error", err)
			}
			if apiErr.StatusCode != tt.status || string(apiErr.Type()) != tt.kind {
				t.Errorf("error = %d %q, want %d %q", apiErr.StatusCode, apiErr.Type(), tt.status, tt.kind)
			}
		})
	}
	// The right key over Authorization: Bearer is accepted.
	bearer := client(srv, option.WithHeaderDel("x-api-key"), option.WithAuthToken(testKey))
	if _, err := bearer.Messages.New(context.Background(),
		anthropic.MessageNewParams{Model: "m", MaxTokens: 10, Messages: []anthropic.MessageParam{user("hi")}}); err != nil {
		t.Errorf("bearer token: %v", err)
	}
	// The SDK's default retries reach the model three times for one 529.
	rec.handler().ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("DELETE", "/_record", nil))
	c := client(srv, option.WithMaxRetries(2))
	c.Messages.New(context.Background(), anthropic.MessageNewParams{Model: "m", MaxTokens: 10, Messages: []anthropic.MessageParam{user("offline: error overloaded")}})
	if n := len(readRecord(t, rec).Requests); n != 3 {
		t.Errorf("one call with two retries reached the model %d times, want 3", n)
	}
}

func TestModels(t *testing.T) {
	srv, _ := newServer(t, nil)
	c := client(srv)
	page, err := c.Models.List(context.Background(), anthropic.ModelListParams{})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range page.Data {
		ids = append(ids, m.ID)
	}
	if diff := cmp.Diff(models, ids); diff != "" || page.HasMore {
		t.Errorf("models (-want +got):\n%s (has_more %v)", diff, page.HasMore)
	}
	var apiErr *anthropic.Error
	if _, err := c.Models.Get(context.Background(), "gpt-4", anthropic.ModelGetParams{}); !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
		t.Errorf("get an unknown model: %v, want 404", err)
	}
}

// TestRawErrors covers what the SDK never sends: the shapes must still be the API's.
func TestRawErrors(t *testing.T) {
	srv, _ := newServer(t, nil)
	tests := []struct {
		name, method, path, body string
		status                   int
		message                  string
	}{
		{"not JSON", "POST", "/v1/messages", "{", 400, "request body is not valid JSON: unexpected end of JSON input"},
		{"no model", "POST", "/v1/messages", `{"max_tokens":1,"messages":[{"role":"user","content":"x"}]}`, 400, "model: Field required"},
		{"no messages", "POST", "/v1/messages", `{"model":"m","max_tokens":1,"messages":[]}`, 400, "messages: at least one message is required"},
		{"bad role", "POST", "/v1/messages", `{"model":"m","max_tokens":1,"messages":[{"role":"system","content":"x"}]}`, 400, "messages.0.role: Input should be 'user' or 'assistant'"},
		{"bad content", "POST", "/v1/messages", `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":7}]}`, 400, "messages.0.content: input should be a string or a list of content blocks"},
		{"null content", "POST", "/v1/messages", `{"model":"m","max_tokens":1,"messages":[{"role":"user"}]}`, 400, "messages.0.content: input should be a string or a list of content blocks"},
		{"unknown path", "GET", "/v1/complete", "", 404, "offline model: no such endpoint"},
		{"wrong method", "GET", "/v1/messages", "", 404, "offline model: no such endpoint"},
		{"too large", "POST", "/v1/messages", strings.Repeat(" ", maxBody+1), 413, "Request exceeds the maximum allowed number of bytes."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, srv.URL+tt.path, strings.NewReader(tt.body))
			req.Header.Set("x-api-key", testKey)
			req.Header.Set("anthropic-version", "2023-06-01")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var e struct {
				Type  string `json:"type"`
				Error struct{ Type, Message string }
			}
			if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tt.status || e.Type != "error" || e.Error.Message != tt.message {
				t.Errorf("answer = %d %+v, want %d %q", resp.StatusCode, e, tt.status, tt.message)
			}
			if !strings.HasPrefix(resp.Header.Get("Request-Id"), "req_offline_") {
				t.Errorf("request-id = %q", resp.Header.Get("Request-Id"))
			}
		})
	}
}

// TestLongStream: "offline: long N" streams N numbered words, one delta each, and "offline: pace
// D" waits D ms after each (bounded), so that the soak's streams last.
func TestLongStream(t *testing.T) {
	srv, _ := newServer(t, nil)
	body := `{"model":"m","max_tokens":4096,"stream":true,"messages":[{"role":"user","content":"offline: long 40 offline: pace 5"}]}`
	req, _ := http.NewRequest("POST", srv.URL+"/v1/messages", strings.NewReader(body))
	req.Header.Set("x-api-key", testKey)
	req.Header.Set("anthropic-version", "2023-06-01")
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	took := time.Since(start)
	if n := strings.Count(string(raw), `"type":"text_delta"`); n != 40 {
		t.Errorf("%d text deltas, want 40", n)
	}
	if !strings.Contains(string(raw), `"text":"w39"`) || !strings.Contains(string(raw), "event: message_stop") {
		t.Errorf("the stream lacks its last word or its stop:\n%.400s", raw)
	}
	if took < 40*5*time.Millisecond {
		t.Errorf("the stream took %v, want at least 40 × 5 ms", took)
	}
	c, _ := parse([]byte(`{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"offline: long 99999999 offline: pace 100000"}]}`), true)
	c.maxTokens = 1 << 30
	r, _ := script(c, 1)
	if words := strings.Count(r.blocks[0].text, " ") + 1; words != maxLongWords || r.pace != maxPace {
		t.Errorf("an unbounded ask: %d words, pace %v; want %d and %v", words, r.pace, maxLongWords, maxPace)
	}
}
