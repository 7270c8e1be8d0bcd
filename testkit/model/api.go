package main

import (
	"cmp"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// maxBody is the real API's request size limit for the Messages endpoints.
const maxBody = 32 << 20

// models is what GET /v1/models lists. The Messages endpoint answers for any model name: the
// model allowlist is llm's to enforce, and a test must be able to see what llm let through.
var models = []string{"claude-sonnet-4-5", "claude-opus-4-5", "claude-haiku-4-5"}

// api is the scripted Messages API.
type api struct {
	keyHash []byte // SHA-256 of the one key accepted; nil accepts any key
	rec     *recorder
	log     *slog.Logger
	seq     atomic.Int64
}

// ServeHTTP records the request before it answers, so the record holds what reached the model
// even when the answer is an error or the client goes away.
func (a *api) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	seq := a.seq.Add(1)
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	a.rec.add(seq, r, body, err != nil)
	status := a.serve(w, r, seq, body, err)
	a.log.Info("request", "seq", seq, "method", r.Method, "path", r.URL.Path, "status", status, "bytes", len(body))
}

// serve answers one request and returns the status it sent.
func (a *api) serve(w http.ResponseWriter, r *http.Request, seq int64, body []byte, readErr error) int {
	w.Header().Set("Request-Id", fmt.Sprintf("req_offline_%06d", seq))
	switch {
	case !a.authorized(r.Header):
		return (&apiError{status: 401, kind: "authentication_error", text: "x-api-key is missing or not the expected key"}).write(w)
	case readErr != nil: // over maxBody, or a client gone away that reads no answer
		return (&apiError{status: 413, kind: "request_too_large", text: "Request exceeds the maximum allowed number of bytes."}).write(w)
	case r.Header.Get("Anthropic-Version") == "":
		return invalid("anthropic-version: header is required").write(w)
	}
	switch r.Method + " " + r.URL.Path {
	case "POST /v1/messages", "POST /v1/messages/count_tokens":
		c, e := parse(body, r.URL.Path == "/v1/messages")
		if e != nil {
			return e.write(w)
		} else if r.URL.Path != "/v1/messages" {
			return writeJSON(w, http.StatusOK, map[string]int64{"input_tokens": c.inputTokens})
		}
		rep, e := script(c, seq)
		if e != nil && !(e.afterStart && c.stream) {
			return e.write(w)
		}
		id := fmt.Sprintf("msg_offline_%06d", seq)
		if c.stream {
			return stream(w, message(id, c.model, []any{}, nil, c.inputTokens, 1), rep, c.inputTokens, e)
		}
		content := []any{}
		for _, b := range rep.blocks {
			content = append(content, b.json())
		}
		return writeJSON(w, http.StatusOK, message(id, c.model, content, rep.stop, c.inputTokens, rep.outTokens))
	case "GET /v1/models":
		var data []any
		for _, id := range models {
			data = append(data, map[string]any{"type": "model", "id": id, "display_name": "Offline " + id, "created_at": "2025-01-01T00:00:00Z"})
		}
		return writeJSON(w, http.StatusOK, map[string]any{"data": data, "has_more": false, "first_id": models[0], "last_id": models[len(models)-1]})
	}
	return (&apiError{status: 404, kind: "not_found_error", text: "offline model: no such endpoint"}).write(w)
}

// authorized takes x-api-key or, as the SDK sends an OAuth token, Authorization: Bearer.
func (a *api) authorized(h http.Header) bool {
	key := h.Get("X-Api-Key")
	if key == "" {
		key, _ = strings.CutPrefix(h.Get("Authorization"), "Bearer ")
	}
	sum := sha256.Sum256([]byte(key))
	return key != "" && (a.keyHash == nil || subtle.ConstantTimeCompare(sum[:], a.keyHash) == 1)
}

// apiError is an error answer in the Messages API shape (the SDK reads error.type from it).
type apiError struct {
	status     int
	kind, text string
	afterStart bool // sent as an SSE error event once a stream has begun
}

func invalid(format string, a ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, kind: "invalid_request_error", text: fmt.Sprintf(format, a...)}
}

func (e *apiError) body() map[string]any {
	return map[string]any{"type": "error", "error": map[string]string{"type": e.kind, "message": e.text}}
}

// write sends the error. Retry-After: 0 lets the SDK's retries (two by default) come at once:
// the offline world has no load to wait out.
func (e *apiError) write(w http.ResponseWriter) int {
	if e.status == 529 || e.status == 429 {
		w.Header().Set("Retry-After", "0")
	}
	return writeJSON(w, e.status, e.body())
}

func writeJSON(w http.ResponseWriter, status int, v any) int {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
	return status
}

// conversation is what the script reads from a Messages (or count_tokens) request body.
type conversation struct {
	model, lastUser, result string // lastUser: the last user message's text blocks, joined by newlines
	stream                  bool
	messages, toolResult    int // toolResult: bytes of text in the last user message's tool_result blocks (result); -1: none
	tools                   []string
	maxTokens, inputTokens  int64
}

// parse reads a request body with encoding/json. It is lenient where the script does not look
// (llm, not this fixture, is where requests are parsed strictly) and refuses what the real API
// would refuse for a missing field. needMax is false for count_tokens, which has no max_tokens.
func parse(body []byte, needMax bool) (conversation, *apiError) {
	var req struct {
		Model     string `json:"model"`
		MaxTokens int64  `json:"max_tokens"`
		Messages  []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		System json.RawMessage  `json:"system"`
		Tools  []map[string]any `json:"tools"`
		Stream bool             `json:"stream"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return conversation{}, invalid("request body is not valid JSON: %v", err)
	}
	c := conversation{model: req.Model, stream: req.Stream, messages: len(req.Messages), toolResult: -1, maxTokens: req.MaxTokens}
	switch {
	case req.Model == "":
		return c, invalid("model: Field required")
	case needMax && req.MaxTokens < 1:
		return c, invalid("max_tokens: Field required (at least 1)")
	case len(req.Messages) == 0:
		return c, invalid("messages: at least one message is required")
	}
	size := len(req.System)
	for i, m := range req.Messages {
		size += len(m.Content)
		if m.Role != "user" && m.Role != "assistant" {
			return c, invalid("messages.%d.role: Input should be 'user' or 'assistant'", i)
		}
		text, results, result, err := texts(m.Content)
		if err != nil {
			return c, invalid("messages.%d.content: %v", i, err)
		}
		if m.Role == "user" {
			c.lastUser, c.toolResult, c.result = text, results, result
		}
	}
	for _, t := range req.Tools {
		name, _ := t["name"].(string)
		c.tools, size = append(c.tools, name), size+len(name)
	}
	c.inputTokens = 1 + int64(size)/4 // deterministic, roughly the real tokenizer's ratio
	return c, nil
}

// texts reads a message's content (a string or blocks): its text, and the bytes (-1 if it has
// none) and the text of its tool_result blocks. Text blocks that are a <system-reminder> (the
// context Claude Code adds to a person's message) are left out: the script answers what the
// person wrote.
func texts(raw json.RawMessage) (string, int, string, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, -1, "", nil
	}
	var blocks []struct {
		Type    string          `json:"type"`
		Text    string          `json:"text"`
		Content json.RawMessage `json:"content"` // of a tool_result: a string or blocks
	}
	if err := json.Unmarshal(raw, &blocks); err != nil || blocks == nil {
		return "", -1, "", errors.New("input should be a string or a list of content blocks")
	}
	var text []string
	results, result := -1, ""
	for _, b := range blocks {
		switch {
		case b.Type == "text" && !strings.HasPrefix(b.Text, "<system-reminder>"):
			text = append(text, b.Text)
		case b.Type == "tool_result": // content the script cannot read counts as empty
			inner, _, _, _ := texts(b.Content)
			results, result = max(results, 0)+len(inner), result+inner
		}
	}
	return strings.Join(text, "\n"), results, result, nil
}

// magic maps the word after "offline: error " in the last user text to the error it asks for.
var magic = map[string]apiError{
	"overloaded": {status: 529, kind: "overloaded_error", text: "Overloaded"},
	"invalid":    {status: 400, kind: "invalid_request_error", text: "offline model: scripted invalid request"},
	"rate_limit": {status: 429, kind: "rate_limit_error", text: "offline model: scripted rate limit"},
	"api":        {status: 500, kind: "api_error", text: "Internal server error"},
	"stream":     {status: 529, kind: "overloaded_error", text: "Overloaded", afterStart: true},
}

// block is one content block of a reply: text, or a tool_use with its input (JSON; "" is {}).
type block struct{ kind, text, id, name, input string }

type reply struct {
	blocks    []block
	stop      string
	outTokens int64
	pace      time.Duration // between the text deltas of a stream ("offline: pace")
}

// Bounds of the load scripts ("offline: long N", "offline: pace D"): a soak's long answer, not a
// way to hold the model's memory or a connection for ever.
const (
	maxLongWords = 20000
	maxPace      = 100 * time.Millisecond
)

// longText is n words of filler, numbered so that a cut or a reordering shows; a stream sends
// one word per delta.
func longText(n int) string {
	words := make([]string, n)
	for i := range words {
		words[i] = "w" + strconv.Itoa(i)
	}
	return strings.Join(words, " ")
}

// script decides the reply to c; seq makes the tool_use id unique and deterministic.
func script(c conversation, seq int64) (reply, *apiError) {
	var fail *apiError
	if word, ok := wordAfter(c.lastUser, "offline: error "); ok {
		if e, ok := magic[word]; ok && !e.afterStart {
			return reply{}, &e
		} else if ok {
			fail = &e // the stream starts with the reply below, then fails
		}
	}
	var r reply
	name, asked := wordAfter(c.lastUser, "use tool ")
	switch {
	case c.toolResult >= 0:
		r.blocks = []block{{kind: "text", text: fmt.Sprintf("offline model: tool result of %d bytes received: %s", c.toolResult, truncate(c.result, 200))}}
	case asked && name != "" && slices.Contains(c.tools, name):
		_, in, _ := strings.Cut(c.lastUser, "use tool "+name+" ") // the input: a JSON object after the name, or {}
		if in = strings.TrimSpace(in); !strings.HasPrefix(in, "{") || !json.Valid([]byte(in)) {
			in = "{}"
		}
		r = reply{stop: "tool_use", blocks: []block{{kind: "text", text: "offline model: calling tool " + name},
			{kind: "tool_use", id: fmt.Sprintf("toolu_offline_%06d", seq), name: name, input: in}}}
	case asked && len(c.tools) > 0:
		r.blocks = []block{{kind: "text", text: fmt.Sprintf("offline model: no tool named %q in this request", name)}}
	case strings.Contains(c.lastUser, "offline: long "):
		w, _ := wordAfter(c.lastUser, "offline: long ")
		n, _ := strconv.Atoi(w)
		r.blocks = []block{{kind: "text", text: longText(min(max(n, 1), maxLongWords))}}
	default:
		r.blocks = []block{{kind: "text", text: fmt.Sprintf("offline model: %d messages, last user text: %s", c.messages, truncate(c.lastUser, 200))}}
	}
	r.stop = cmp.Or(r.stop, "end_turn")
	if w, ok := wordAfter(c.lastUser, "offline: pace "); ok {
		ms, _ := strconv.Atoi(strings.TrimSuffix(w, "ms"))
		r.pace = min(max(time.Duration(ms)*time.Millisecond, 0), maxPace)
	}
	for _, b := range r.blocks {
		r.outTokens += 1 + int64(len(b.text)+len(b.input))/4 + int64(len(b.name))
	}
	if r.outTokens > c.maxTokens { // stopped mid-way, as the real model is: in the first block
		r.blocks = []block{{kind: "text", text: truncate(r.blocks[0].text, int(c.maxTokens-1)*4)}}
		r.stop, r.outTokens = "max_tokens", c.maxTokens
	}
	return r, fail
}

// truncate keeps at most n bytes of s, less a rune cut in two. s is valid UTF-8, as every
// string encoding/json decodes is.
func truncate(s string, n int) string {
	return strings.ToValidUTF8(s[:min(max(n, 0), len(s))], "")
}

// wordAfter is the word that follows the first prefix in s, without trailing punctuation.
func wordAfter(s, prefix string) (string, bool) {
	_, rest, ok := strings.Cut(s, prefix)
	if f := strings.Fields(rest); ok && len(f) > 0 {
		return strings.TrimRight(f[0], ".,;:!?"), true
	}
	return "", ok
}

func message(id, model string, content []any, stop any, in, out int64) map[string]any {
	return map[string]any{"id": id, "type": "message", "role": "assistant", "model": model, "content": content,
		"stop_reason": stop, "stop_sequence": nil, "usage": map[string]int64{"input_tokens": in,
			"cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "output_tokens": out}}
}

// json is the block as a reply carries it.
func (b block) json() map[string]any {
	if b.kind == "tool_use" {
		return map[string]any{"type": "tool_use", "id": b.id, "name": b.name, "input": json.RawMessage(cmp.Or(b.input, "{}"))}
	}
	return map[string]any{"type": "text", "text": b.text}
}

// stream sends the reply as the real API's event sequence (message_start, content_block_start,
// ping, content_block_delta..., content_block_stop, message_delta, message_stop), one word per
// text delta and a flush after every event. The usage in message_delta is cumulative, as the
// real API's is (docs/pitfalls.md). With fail set, an error event follows the first ping.
func stream(w http.ResponseWriter, start map[string]any, rep reply, in int64, fail *apiError) int {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	send(w, "message_start", map[string]any{"type": "message_start", "message": start})
	for i, b := range rep.blocks {
		opened := block{kind: b.kind, id: b.id, name: b.name}.json() // deltas carry the text and the input
		send(w, "content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": opened})
		if i == 0 {
			send(w, "ping", map[string]any{"type": "ping"})
		}
		if fail != nil {
			send(w, "error", fail.body())
			return http.StatusOK
		}
		for _, word := range strings.SplitAfter(b.text, " ") { // a tool_use has no text: one delta
			d := map[string]any{"type": "text_delta", "text": word}
			if b.kind == "tool_use" {
				d = map[string]any{"type": "input_json_delta", "partial_json": cmp.Or(b.input, "{}")}
			}
			send(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": d})
			if rep.pace > 0 {
				time.Sleep(rep.pace)
			}
		}
		send(w, "content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
	}
	send(w, "message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": rep.stop, "stop_sequence": nil},
		"usage": map[string]int64{"input_tokens": in, "output_tokens": rep.outTokens}})
	send(w, "message_stop", map[string]any{"type": "message_stop"})
	return http.StatusOK
}

// send writes one SSE event and flushes it; a client gone away only loses the rest.
func send(w http.ResponseWriter, event string, data any) {
	b, _ := json.Marshal(data)
	fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b)
	http.NewResponseController(w).Flush()
}

// entry is one request as it reached the model. Key headers hold "sha256:<hex>" of the key
// (of the token, for Bearer), the form of MODEL_EXPECT_KEY_SHA256: a test can tell which key
// arrived without the record holding it.
type entry struct {
	Seq       int64               `json:"seq"`
	Time      time.Time           `json:"time"`
	Method    string              `json:"method"`
	Host      string              `json:"host"`
	Path      string              `json:"path"`
	Query     string              `json:"query,omitempty"`
	Header    map[string][]string `json:"header"`
	Body      string              `json:"body"`
	Truncated bool                `json:"body_truncated,omitempty"` // not read whole: over maxBody, or cut off
}

// recorder keeps the latest requests within a count and a budget of body bytes. dropped counts
// what it let go since the last clear: a test that proves something did not reach the model
// must see zero there.
type recorder struct {
	mu                 sync.Mutex
	entries            []*entry
	bytes, dropped     int
	maxEntries, maxLen int
}

// add keeps one request (seq numbers it, as in its Request-Id), dropping the oldest to stay
// within bounds.
func (rc *recorder) add(seq int64, r *http.Request, body []byte, truncated bool) {
	h := r.Header.Clone()
	for _, k := range []string{"X-Api-Key", "Authorization", "Proxy-Authorization"} {
		for i, v := range h[k] {
			if k != "X-Api-Key" {
				v = strings.TrimPrefix(v, "Bearer ")
			}
			sum := sha256.Sum256([]byte(v))
			h[k][i] = "sha256:" + hex.EncodeToString(sum[:])
		}
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	e := &entry{Seq: seq, Time: time.Now().UTC(), Method: r.Method, Host: r.Host, Path: r.URL.Path, Query: r.URL.RawQuery,
		Header: h, Body: string(body), Truncated: truncated}
	rc.entries, rc.bytes = append(rc.entries, e), rc.bytes+len(body)
	for len(rc.entries) > rc.maxEntries || rc.bytes > rc.maxLen && len(rc.entries) > 1 {
		rc.bytes -= len(rc.entries[0].Body)
		rc.entries, rc.dropped = slices.Delete(rc.entries, 0, 1), rc.dropped+1
	}
}

// handler serves GET /_record ({"requests": [oldest first], "dropped": n}) and DELETE /_record
// (clear). It is for the plain-HTTP listener a test reads, never the API's.
func (rc *recorder) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /_record", func(w http.ResponseWriter, r *http.Request) {
		rc.mu.Lock()
		b, _ := json.Marshal(map[string]any{"requests": rc.entries, "dropped": rc.dropped}) // cannot fail
		rc.mu.Unlock()
		writeJSON(w, http.StatusOK, json.RawMessage(b))
	})
	mux.HandleFunc("DELETE /_record", func(w http.ResponseWriter, r *http.Request) {
		rc.mu.Lock()
		rc.entries, rc.bytes, rc.dropped = []*entry{}, 0, 0
		rc.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})
	return mux
}
