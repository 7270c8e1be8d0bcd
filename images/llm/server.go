package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/sharness-ai/sharness/images/llm/messages"
	"github.com/sharness-ai/sharness/internal/audit"
)

const (
	maxBody     = 32 << 20 // request bodies: long agent sessions carry whole files
	maxResponse = 64 << 20 // non-streaming responses, read whole for their usage
	// bodyBudget bounds the request bodies llm holds at once, in bytes declared: twelve bodies
	// of 32 MiB sent at once (all but their last byte, then held) took llm past its memory
	// limit (256 MiB) and the kernel killed it for the session (issue 22's attack on the
	// running stack). A body and what checking it costs fit several times in the limit.
	bodyBudget = 48 << 20
	// bodyWait is how long a request waits for room in the budget before llm answers 503
	// overloaded_error (a 5xx, which the SDKs and Claude Code retry by themselves).
	bodyWait = 10 * time.Second
	// bodyDeadline bounds the reading of one body: a caller that sends slowly holds its part
	// of the budget no longer than this.
	bodyDeadline = time.Minute
)

// KeySource opens the API key by its secret name; *kms.Client is one.
type KeySource interface {
	Unwrap(ctx context.Context, name string) ([]byte, error)
}

// secretFilter is the secret filter llm holds: *secretfilter.Filter, which is safe for
// concurrent use, AddSecret included.
type secretFilter interface {
	messages.Scanner
	AddSecret(name string, secret []byte)
}

// server is llm's HTTP handler for the agent edge.
type server struct {
	rules    *messages.Rules
	filter   secretFilter
	keys     *keys
	upstream *url.URL
	client   *http.Client
	log      *slog.Logger
	audit    *audit.Writer       // the record; nil in tests that do not read it
	caller   string              // the components on llm's edges: the network is the identity
	spent    atomic.Int64        // session tokens used so far
	bodies   *semaphore.Weighted // bodyBudget: the request bodies held at once
	bodyWait time.Duration       // bodyWait; shorter in tests
	bodyRead time.Duration       // bodyDeadline; shorter in tests
}

func newServer(rules *messages.Rules, f secretFilter, src KeySource, rt http.RoundTripper, log *slog.Logger) *server {
	s := &server{rules: rules, filter: f, upstream: rules.Upstream(), log: log, bodies: semaphore.NewWeighted(bodyBudget), bodyWait: bodyWait, bodyRead: bodyDeadline,
		// No client timeout: a stream lasts as long as the model writes; the agent's
		// cancellation (the request context) ends it.
		client: &http.Client{Transport: rt, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	s.keys = &keys{src: src, name: rules.KeySecret(), ttl: rules.KeyCache(), now: time.Now, seen: map[[32]byte]bool{},
		learn: func(k []byte) { s.filter.AddSecret("llm-api-key", k) }}
	return s
}

// Request headers passed to the upstream, and response headers passed back; every other
// header (the agent's x-api-key and Authorization first) is dropped.
var (
	requestHeaders  = []string{"anthropic-version", "anthropic-beta", "accept"}
	responseHeaders = []string{"content-type", "request-id", "retry-after", "retry-after-ms", "x-should-retry"}
	modelID         = regexp.MustCompile(`^[A-Za-z0-9._:@-]{1,128}$`)
)

// record is the one audit line of a request; it never holds content or keys.
type record struct {
	method, path, model, reason, requestID string
	stream, redacted, denied               bool
	status                                 int
	usage                                  messages.Usage
	tools, hits, where                     []string
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rec := &record{method: r.Method, path: r.URL.Path}
	defer func() {
		s.log.Info("llm request", "method", rec.method, "path", rec.path, "model", rec.model,
			"stream", rec.stream, "status", rec.status, "reason", rec.reason,
			"input_tokens", rec.usage.Input, "cache_creation_tokens", rec.usage.CacheCreation,
			"cache_read_tokens", rec.usage.CacheRead, "output_tokens", rec.usage.Output,
			"tools", rec.tools, "filter_hits", rec.hits, "filter_where", rec.where, "redacted", rec.redacted,
			"request_id", rec.requestID, "spent", s.spent.Load(), "duration_ms", time.Since(start).Milliseconds())
		s.audit.Record(s.log, rec.event(s.caller, s.spent.Load()))
	}()
	p := r.URL.Path
	if err := s.audit.Err(); err != nil { // no decision that cannot be recorded (issue 22)
		s.log.Error("llm: refusing: the audit log takes no more lines", "error", err.Error())
		s.refuse(w, rec, messages.ReasonAudit, "")
		return
	}
	switch {
	case r.Method == http.MethodPost && p == "/v1/messages":
		s.messages(w, r, rec, messages.Create)
	case r.Method == http.MethodPost && p == "/v1/messages/count_tokens":
		s.messages(w, r, rec, messages.CountTokens)
	case r.Method == http.MethodGet && (p == "/v1/models" || strings.HasPrefix(p, "/v1/models/") && modelID.MatchString(p[len("/v1/models/"):])):
		q := url.Values{}
		for _, k := range []string{"limit", "after_id", "before_id"} {
			if v := r.URL.Query().Get(k); v != "" {
				q.Set(k, v)
			}
		}
		if ref := messages.CheckBetas(s.rules, r.Header.Values("anthropic-beta")); ref != nil {
			s.deny(w, rec, ref)
			return
		}
		if key, ok := s.key(w, r, rec); ok {
			s.forward(w, r, rec, key, p, q, nil, false)
		}
	default:
		s.refuse(w, rec, messages.ReasonNotFound, "")
	}
}

func (s *server) messages(w http.ResponseWriter, r *http.Request, rec *record, ep messages.Endpoint) {
	// Room for the body before a byte of it is read: its declared length, or the most a body
	// may be when it declares none (chunked).
	weight := int64(maxBody)
	if n := r.ContentLength; n >= 0 && n < maxBody {
		weight = n
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.bodyWait)
	err := s.bodies.Acquire(ctx, weight)
	cancel()
	if err != nil {
		s.refuse(w, rec, messages.ReasonBusy, "")
		return
	}
	defer s.bodies.Release(weight)
	// The deadline is the body's alone: cleared once it is read, so that nothing of it is left
	// on the connection while a long answer streams.
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Now().Add(s.bodyRead))
	body, buf, err := readBody(w, r)
	rc.SetReadDeadline(time.Time{})
	up := &upBody{}
	defer func() {
		// The buffer is reused only once the transport has closed the body it sent from it
		// (it may do so after Do returns); otherwise it is left to the collector.
		if buf != nil && (up.sent == nil || up.closed.Load() && !up.replayed.Load()) && cap(*buf) <= maxPooled {
			bodies.Put(buf)
		}
	}()
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			s.refuse(w, rec, messages.ReasonTooLarge, "the request body is larger than "+strconv.Itoa(maxBody>>20)+" MiB")
			return
		}
		s.refuse(w, rec, messages.ReasonBadJSON, "could not read the request body")
		return
	}
	req, ref := messages.Parse(body)
	if ref == nil {
		rec.model, rec.stream, rec.tools = req.Model, req.Stream && ep == messages.Create, req.Tools
		ref = messages.Check(s.rules, req, ep, r.Header.Values("anthropic-beta"))
	}
	// The budget is checked before the call and charged after it, so requests in flight
	// together can overshoot it by their own size; a spent budget refuses everything after.
	if spent := s.spent.Load(); ref == nil && ep == messages.Create && spent >= s.rules.Budget() {
		ref = messages.Refuse(messages.ReasonBudget, "the session token budget is spent ("+strconv.FormatInt(spent, 10)+" of "+
			strconv.FormatInt(s.rules.Budget(), 10)+" tokens, business.llm.session_token_budget); start a new session")
	}
	if ref != nil {
		s.deny(w, rec, ref)
		return
	}
	// The key comes before the filter: the filter learns each key it is given (AddSecret), so
	// the key itself, in any encoding the filter knows, is refused from the first request on.
	key, ok := s.key(w, r, rec)
	if !ok {
		return
	}
	var f messages.Findings
	f, ref = messages.Secrets(s.filter, req, s.rules.Redact())
	rec.hits, rec.where, rec.redacted = f.Rules, f.Where, req.Redacted()
	if ref != nil {
		clear(key)
		s.deny(w, rec, ref)
		return
	}
	if body, err = req.Body(); err != nil {
		clear(key)
		s.refuse(w, rec, messages.ReasonBadJSON, "could not re-encode the request")
		return
	}
	q := url.Values{}
	if r.URL.Query().Get("beta") == "true" { // the SDK's beta client adds it
		q.Set("beta", "true")
	}
	up.sent = body
	up.Reset(body)
	s.forward(w, r, rec, key, r.URL.Path, q, up, ep == messages.Create)
}

// upBody is a request body sent upstream; closed records that the transport is done with it:
// a RoundTripper closes every request body it is given, sometimes after Do has returned.
// replayed records that the transport asked for the body again (GetBody, to retry on a new
// connection), in a reader no one tracks.
type upBody struct {
	bytes.Reader
	sent             []byte
	closed, replayed atomic.Bool
}

func (b *upBody) Close() error { b.closed.Store(true); return nil }

// getBody is the request's GetBody, as NewRequest gives a *bytes.Reader: a transport may retry
// a request whose body it had begun to send (HTTP/2 after GOAWAY).
func (b *upBody) getBody() (io.ReadCloser, error) {
	b.replayed.Store(true)
	return io.NopCloser(bytes.NewReader(b.sent)), nil
}

// key is the real key from kms (or the cache), or a refusal already written: without it llm
// fails closed.
func (s *server) key(w http.ResponseWriter, r *http.Request, rec *record) ([]byte, bool) {
	key, err := s.keys.get(r.Context())
	if err != nil {
		s.log.Warn("llm: kms did not give the key", "error", err.Error())
		s.refuse(w, rec, messages.ReasonKey, "the API key is unavailable ("+truncate(err.Error(), 200)+")")
		return nil, false
	}
	return key, true
}

// forward sends one checked request upstream with the real key (which it scrubs) and relays the answer; with
// charge, its usage counts against the session budget.
func (s *server) forward(w http.ResponseWriter, r *http.Request, rec *record, key []byte, path string, q url.Values, body *upBody, charge bool) {
	u := *s.upstream
	u.Path, u.RawQuery = path, q.Encode()
	method, rd := http.MethodGet, io.Reader(nil)
	if body != nil {
		method, rd = http.MethodPost, body
	}
	up, err := http.NewRequestWithContext(r.Context(), method, u.String(), rd)
	if err != nil {
		clear(key)
		s.refuse(w, rec, messages.ReasonUpstream, "could not build the upstream request")
		return
	}
	if body != nil { // NewRequest knows only *bytes.Reader's length and how to read it again
		up.ContentLength, up.GetBody = int64(body.Len()), body.getBody
	}
	for _, h := range requestHeaders {
		for _, v := range r.Header.Values(h) {
			up.Header.Add(h, v)
		}
	}
	if body != nil {
		up.Header.Set("content-type", "application/json")
	}
	up.Header.Set("accept-encoding", "identity") // relay and count what we read, uncompressed
	up.Header.Set("user-agent", "sharness-llm")
	// Go strings cannot be scrubbed: this copy of the key lives until the collector takes it.
	up.Header.Set("x-api-key", string(key))
	clear(key)
	resp, err := s.client.Do(up)
	if err != nil {
		s.log.Warn("llm: upstream request failed", "error", err.Error())
		s.refuse(w, rec, messages.ReasonUpstream, "")
		return
	}
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		if lk := strings.ToLower(k); slices.Contains(responseHeaders, lk) || strings.HasPrefix(lk, "anthropic-ratelimit-") {
			w.Header()[k] = vs
		}
	}
	rec.status, rec.requestID = resp.StatusCode, resp.Header.Get("request-id")
	w.WriteHeader(resp.StatusCode)
	var usage messages.Usage
	if strings.HasPrefix(resp.Header.Get("content-type"), "text/event-stream") {
		rc := http.NewResponseController(w)
		usage, err = messages.Relay(w, func() { _ = rc.Flush() }, resp.Body)
	} else {
		var b []byte
		b, rerr := io.ReadAll(io.LimitReader(resp.Body, maxResponse+1))
		switch {
		case rerr != nil:
			err = rerr
		case len(b) > maxResponse:
			err = errors.New("response larger than the limit")
		default:
			usage = messages.UsageOf(b)
			_, err = w.Write(b)
		}
	}
	rec.usage = usage
	if charge {
		s.spent.Add(usage.Total())
	}
	if err != nil {
		// Headers are gone: abort the connection so the agent sees a cut stream, not an end.
		rec.reason = "relay: " + truncate(err.Error(), 200)
		panic(http.ErrAbortHandler)
	}
}

// refuse answers a refusal of reason; detail is what the agent is told, "" the reason's own text
// (messages.Refuse).
func (s *server) refuse(w http.ResponseWriter, rec *record, reason messages.Reason, detail string) {
	s.deny(w, rec, messages.Refuse(reason, detail))
}

// deny answers ref: its status, x-sharness-deny naming its reason, and the Anthropic error JSON.
func (s *server) deny(w http.ResponseWriter, rec *record, ref *messages.Refusal) {
	rec.status, rec.reason, rec.denied = ref.Status, string(ref.Reason), true
	w.Header().Set("content-type", "application/json")
	w.Header().Set("x-sharness-deny", string(ref.Reason))
	w.WriteHeader(ref.Status)
	_, _ = w.Write(messages.ErrorBody(ref.Type, ref.Message))
}

// event is the request's audit line: the verdict and why, the model, what the filter found (rule
// names) and the tokens used. Never content, and never a key.
func (r *record) event(caller string, spent int64) audit.Event {
	e := audit.Event{Action: "request", Decision: "allow", Reason: r.reason, Caller: caller, Destination: r.method + " " + r.path,
		Fields: map[string]string{"model": r.model, "stream": strconv.FormatBool(r.stream), "status": strconv.Itoa(r.status),
			"input_tokens": strconv.FormatInt(r.usage.Input, 10), "output_tokens": strconv.FormatInt(r.usage.Output, 10),
			"cache_creation_tokens": strconv.FormatInt(r.usage.CacheCreation, 10), "cache_read_tokens": strconv.FormatInt(r.usage.CacheRead, 10),
			"spent_tokens": strconv.FormatInt(spent, 10), "tools": strings.Join(r.tools, ","), "filter_hits": strings.Join(r.hits, ","), "filter_where": strings.Join(r.where, ","),
			"redacted": strconv.FormatBool(r.redacted), "request_id": r.requestID}}
	if r.denied {
		e.Decision = "deny"
	}
	return e
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// bodies holds request body buffers for reuse: a 256 KiB tool result would otherwise cost an
// allocation of its size, and the collector's work, on every request (issue 21).
var bodies = sync.Pool{New: func() any { return new([]byte) }}

const maxPooled = 4 << 20 // larger buffers go back to the collector, not the pool

// readBody reads the request body up to maxBody, into one buffer of the declared length when
// there is one (io.ReadAll would grow and copy a large tool result several times), taken
// from bodies: buf is that buffer, for the caller to put back once nothing reads the body; nil
// when the body was read another way. ReadFull writes every byte of the body it returns, so
// nothing of an earlier request shows through.
func readBody(w http.ResponseWriter, r *http.Request) (body []byte, buf *[]byte, err error) {
	rd := http.MaxBytesReader(w, r.Body, maxBody)
	if n := r.ContentLength; n > 0 && n <= maxBody {
		buf = bodies.Get().(*[]byte)
		if int64(cap(*buf)) < n {
			*buf = make([]byte, n)
		}
		body = (*buf)[:n]
		if _, err := io.ReadFull(rd, body); err != nil {
			return nil, buf, err
		}
		return body, buf, nil
	}
	body, err = io.ReadAll(rd)
	return body, nil, err
}
