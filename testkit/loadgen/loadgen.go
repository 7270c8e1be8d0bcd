// Package loadgen is the soak's load generator (e2e TestSoak and TestFaults, hack/soak.sh): from
// the agent's seat it holds tunnels through net to the offline world (new connections,
// keep-alive connections, bulk downloads, and tunnels to a host the policy refuses), streams long
// answers from the offline model through llm, runs bash tool calls with large outputs, and writes
// protected paths through fs, for a bounded time, and counts every outcome by kind.
//
// Each outcome is one of: ok; refused by policy (net's 403 with X-Sharness-Deny, llm's 400 or
// 403 with x-sharness-deny, a tool error of bash or fs naming a rule); refused at a cap (net's 503
// conn-limit or tunnel-limit); throttled (net's 429 rate-limit); failed (anything else: an error,
// a timeout, a wrong or short answer); or open (a request the policy refuses that went through:
// a fail-open, which must never be counted). A refused tunnel to an allowed host is a failure, and
// so is a 200 for the refused host.
//
// It measures from the client's side only: what the agent sees, and how long it waited. What
// the components themselves hold (memory, descriptors, threads) the e2e suite reads on the host.
package loadgen

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Config is one load run. Zero counts turn a kind off.
type Config struct {
	Duration time.Duration `json:"duration"`
	// Tunnels are the concurrent tunnel workers through net: of every ten, five open a new
	// tunnel per request, two keep one open for many requests, two download BulkBytes, one asks
	// for the refused host.
	Tunnels     int `json:"tunnels"`
	Streams     int `json:"streams"`      // concurrent llm streams
	Shell       int `json:"shell"`        // concurrent bash tool calls
	FSWriters   int `json:"fs_writers"`   // fs writes in a loop, each writer its own file
	BulkBytes   int `json:"bulk_bytes"`   // a bulk download's size
	StreamWords int `json:"stream_words"` // the offline model's answer, in words
	StreamPace  int `json:"stream_pace"`  // ms between the words of a stream
	ShellBytes  int `json:"shell_bytes"`  // a tool call's output
	// Backoff is how long a worker waits after a refusal at net's caps or its brake ("retry
	// later"), with up to as much again of jitter.
	Backoff time.Duration `json:"backoff"`
	// OpTimeout bounds every request; one that takes longer is a failure ("timeout"), which is
	// how a hang shows.
	OpTimeout time.Duration `json:"op_timeout"`

	Proxy   string `json:"proxy"`    // net's plain listener (http://net:3128)
	LLM     string `json:"llm"`      // llm's Messages API (http://llm:8080)
	BashMCP string `json:"bash_mcp"` // bash's MCP endpoint
	FSURL   string `json:"fs_url"`   // fs's JSON API
	CAPEM   string `json:"-"`        // the offline world's CA
}

// Outcome classes.
const (
	OK        = "ok"
	Policy    = "policy"
	Cap       = "cap"
	Throttled = "throttled"
	Failed    = "failed"
	Open      = "open"
	// Shed: net closed the connection before answering its CONNECT. net does so, by design, to
	// a connection over its caps while it is already answering its most refusals at once
	// (images/net, refuseConn), and logs it all the same: the e2e suite holds the count to net's
	// record of conn-limit refusals.
	Shed = "shed"
)

// Stat is the count of one kind's outcomes and its latencies.
type Stat struct {
	Ops      int64            `json:"ops"`
	Outcomes map[string]int64 `json:"outcomes"`
	Rules    map[string]int64 `json:"rules,omitempty"`  // refusals by the rule named
	Errors   []string         `json:"errors,omitempty"` // the first distinct failures
	P50MS    float64          `json:"p50_ms"`
	P99MS    float64          `json:"p99_ms"`
	MaxMS    float64          `json:"max_ms"`
	Bytes    int64            `json:"bytes"`
	Connects int64            `json:"connects,omitempty"` // CONNECTs sent to net (each one decision)
	// Samples are the latencies in ms, kept only in a shard's report (Merge reads them).
	Samples []float64 `json:"samples,omitempty"`
}

// Report is a run's result: its configuration and a Stat per kind.
type Report struct {
	Config  Config           `json:"config"`
	Elapsed float64          `json:"elapsed_s"`
	Kinds   map[string]*Stat `json:"kinds"`
}

// Kinds of operations.
const (
	KindNew       = "tunnel-new"
	KindKeepAlive = "tunnel-keepalive"
	KindBulk      = "tunnel-bulk"
	KindRefused   = "tunnel-refused"
	KindStream    = "llm-stream"
	KindShell     = "bash-call"
	KindFS        = "fs-write"
)

// serverNameForTests is the TLS name the tunnels verify: the allowed host's, but for the
// package's own tests (an httptest certificate).
var serverNameForTests = "allowed.sharness.test"

const (
	allowedHost = "allowed.sharness.test:443"
	refusedHost = "denied.sharness.test:443"
	maxErrors   = 8
	// keepAliveRequests is how many requests a keep-alive tunnel carries before it is closed.
	keepAliveRequests = 20
	maxSamples        = 1 << 20
)

type recorder struct {
	mu    sync.Mutex
	kinds map[string]*Stat
}

func (r *recorder) add(kind, outcome, rule string, d time.Duration, bytes int64, why string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.stat(kind)
	s.Ops++
	s.Outcomes[outcome]++
	if rule != "" {
		s.Rules[rule]++
	}
	s.Bytes += bytes
	if len(s.Samples) < maxSamples {
		s.Samples = append(s.Samples, float64(d.Microseconds())/1000)
	}
	if (outcome == Failed || outcome == Open) && len(s.Errors) < maxErrors && !slices.Contains(s.Errors, why) {
		s.Errors = append(s.Errors, why)
	}
}

// stat is kind's Stat, made on first use; r.mu is held.
func (r *recorder) stat(kind string) *Stat {
	s := r.kinds[kind]
	if s == nil {
		s = &Stat{Outcomes: map[string]int64{}, Rules: map[string]int64{}}
		r.kinds[kind] = s
	}
	return s
}

func (r *recorder) connect(kind string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.stat(kind)
	s.Connects++
}

// Run generates the load cfg describes until its duration is over or ctx ends, and reports.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if cfg.Duration <= 0 {
		return nil, errors.New("loadgen: duration must be positive")
	}
	cfg.OpTimeout = cmpDur(cfg.OpTimeout, 60*time.Second)
	cfg.Backoff = cmpDur(cfg.Backoff, time.Second)
	var roots *x509.CertPool
	if cfg.Tunnels > 0 {
		roots = x509.NewCertPool()
		if !roots.AppendCertsFromPEM([]byte(cfg.CAPEM)) {
			return nil, errors.New("loadgen: no CA certificate for the offline world")
		}
	}
	proxy, err := url.Parse(cfg.Proxy)
	if cfg.Tunnels > 0 && (err != nil || proxy.Host == "") {
		return nil, fmt.Errorf("loadgen: proxy %q: not a URL", cfg.Proxy)
	}
	rec := &recorder{kinds: map[string]*Stat{}}
	ctx, cancel := context.WithTimeout(ctx, cfg.Duration)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	spawn := func(n int, f func(ctx context.Context, i int)) {
		for i := range n {
			wg.Add(1)
			go func() { defer wg.Done(); f(ctx, i) }()
		}
	}
	t := tunneler{cfg: cfg, proxy: proxy.Host, roots: roots, rec: rec}
	spawn(cfg.Tunnels, t.work)
	l := streamer{cfg: cfg, rec: rec, client: &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: max(cfg.Streams, 2)}}}
	spawn(cfg.Streams, l.work)
	sh := sheller{cfg: cfg, rec: rec}
	spawn(cfg.Shell, sh.work)
	w := writer{cfg: cfg, rec: rec, client: &http.Client{Transport: &http.Transport{Proxy: nil}}}
	spawn(cfg.FSWriters, w.work)
	wg.Wait()
	return &Report{Config: cfg, Elapsed: time.Since(start).Seconds(), Kinds: rec.kinds}, nil
}

// Finish computes each kind's quantiles from its samples and drops the samples.
func (r *Report) Finish() {
	for _, s := range r.Kinds {
		slices.Sort(s.Samples)
		s.P50MS, s.P99MS = quantile(s.Samples, 0.50), quantile(s.Samples, 0.99)
		if n := len(s.Samples); n > 0 {
			s.MaxMS = s.Samples[n-1]
		}
		s.Samples = nil
		if len(s.Rules) == 0 {
			s.Rules = nil
		}
	}
}

// Merge adds the shards' counts and samples into r (a run split over processes, each with its own
// file limit).
func (r *Report) Merge(shards ...*Report) {
	if r.Kinds == nil {
		r.Kinds = map[string]*Stat{}
	}
	for _, sh := range shards {
		r.Elapsed = max(r.Elapsed, sh.Elapsed)
		for k, s := range sh.Kinds {
			t := r.Kinds[k]
			if t == nil {
				t = &Stat{Outcomes: map[string]int64{}, Rules: map[string]int64{}}
				r.Kinds[k] = t
			}
			t.Ops += s.Ops
			t.Bytes += s.Bytes
			t.Connects += s.Connects
			for o, n := range s.Outcomes {
				t.Outcomes[o] += n
			}
			for o, n := range s.Rules {
				t.Rules[o] += n
			}
			for _, e := range s.Errors {
				if len(t.Errors) < maxErrors && !slices.Contains(t.Errors, e) {
					t.Errors = append(t.Errors, e)
				}
			}
			t.Samples = append(t.Samples, s.Samples...)
		}
	}
}

func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(int(q*float64(len(sorted))), len(sorted)-1)]
}

func cmpDur(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// pause waits the backoff and its jitter, or until ctx ends.
func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d + rand.N(d+1))
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// done is true once the run is over: what fails after it is the run's end, not the stack's. The
// deadline is compared too: a dial cut by the run's deadline returns at it, a moment before the
// context says it is done.
func done(ctx context.Context) bool {
	d, ok := ctx.Deadline()
	return ctx.Err() != nil || ok && !time.Now().Before(d)
}

// tunneler is the tunnel workers.
type tunneler struct {
	cfg   Config
	proxy string
	roots *x509.CertPool
	rec   *recorder
}

func (t tunneler) work(ctx context.Context, i int) {
	kind := [...]string{KindNew, KindNew, KindNew, KindNew, KindNew, KindKeepAlive, KindKeepAlive, KindBulk, KindBulk, KindRefused}[i%10]
	for !done(ctx) {
		var outcome string
		switch kind {
		case KindKeepAlive:
			outcome = t.keepAlive(ctx)
		default:
			outcome = t.once(ctx, kind)
		}
		if outcome == Cap || outcome == Shed || outcome == Throttled || outcome == Failed {
			pause(ctx, t.cfg.Backoff)
		}
	}
}

// connect sends CONNECT for host and reads net's answer: the tunnel on 200, else the outcome and
// the rule net named.
func (t tunneler) connect(ctx context.Context, kind, host string) (net.Conn, *bufio.Reader, string, string, string) {
	d := net.Dialer{Timeout: 10 * time.Second}
	c, err := d.DialContext(ctx, "tcp", t.proxy)
	if err != nil {
		return nil, nil, Failed, "", "dial net: " + kindOf(err)
	}
	t.rec.connect(kind)
	c.SetDeadline(time.Now().Add(t.cfg.OpTimeout))
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Now()) })
	defer stop()
	if _, err := fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", host, host); err != nil {
		c.Close()
		return nil, nil, Failed, "", "write CONNECT to net: " + kindOf(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		c.Close()
		if k := kindOf(err); k == "closed (EOF)" || k == "connection reset" {
			return nil, nil, Shed, "", ""
		}
		return nil, nil, Failed, "", "read net's answer: " + kindOf(err)
	}
	resp.Body.Close()
	rule := resp.Header.Get("X-Sharness-Deny")
	var outcome, why string
	switch {
	case resp.StatusCode == http.StatusOK:
		return c, br, OK, "", ""
	case resp.StatusCode == http.StatusServiceUnavailable && (rule == "conn-limit" || rule == "tunnel-limit"):
		outcome = Cap
	case resp.StatusCode == http.StatusTooManyRequests && rule == "rate-limit":
		outcome = Throttled
	case resp.StatusCode == http.StatusForbidden && rule != "":
		outcome = Policy
	default:
		outcome, why = Failed, fmt.Sprintf("net answered %s (deny %q, error %q)", resp.Status, rule, resp.Header.Get("X-Sharness-Error"))
	}
	c.Close()
	return nil, nil, outcome, rule, why
}

// once is one tunnel for one request: a GET of / (new), of /bulk/N (bulk), or the refused host.
func (t tunneler) once(ctx context.Context, kind string) string {
	start := time.Now()
	host := allowedHost
	if kind == KindRefused {
		host = refusedHost
	}
	c, br, outcome, rule, why := t.connect(ctx, kind, host)
	switch {
	case c == nil && kind == KindRefused && outcome == Policy:
		t.rec.add(kind, Policy, rule, time.Since(start), 0, "")
		return Policy
	case c == nil && outcome == Policy: // the allowed host refused
		outcome, why = Failed, "the allowed host refused: rule "+rule
	case c == nil:
	case kind == KindRefused:
		c.Close()
		outcome, why = Open, "net opened a tunnel to the refused host"
	default:
		defer c.Close()
		_ = br // nothing may follow a CONNECT's answer before our ClientHello
		path, want := "/", int64(-1)
		if kind == KindBulk {
			path, want = fmt.Sprintf("/bulk/%d", t.cfg.BulkBytes), int64(t.cfg.BulkBytes)
		}
		tc := tls.Client(c, &tls.Config{ServerName: serverNameForTests, RootCAs: t.roots})
		n, err := get(ctx, tc, bufio.NewReader(tc), path, want)
		if err != nil {
			outcome, why = Failed, err.Error()
			if done(ctx) {
				return outcome // cut by the run's end
			}
		}
		t.rec.add(kind, outcome, "", time.Since(start), n, why)
		return outcome
	}
	if done(ctx) && outcome == Failed {
		return outcome
	}
	t.rec.add(kind, outcome, rule, time.Since(start), 0, why)
	return outcome
}

// keepAlive opens one tunnel and sends GET / on it, keepAliveRequests times or until the run
// ends or the tunnel breaks; every GET is one operation. The tunnel is then closed: a worker
// that held its tunnel for the whole run would hold a share of the caller's cap for ever.
func (t tunneler) keepAlive(ctx context.Context) string {
	start := time.Now()
	c, _, outcome, rule, why := t.connect(ctx, KindKeepAlive, allowedHost)
	if c == nil {
		if outcome == Policy {
			outcome, why = Failed, "the allowed host refused: rule "+rule
		}
		if !(done(ctx) && outcome == Failed) {
			t.rec.add(KindKeepAlive, outcome, rule, time.Since(start), 0, why)
		}
		return outcome
	}
	defer c.Close()
	tc := tls.Client(c, &tls.Config{ServerName: serverNameForTests, RootCAs: t.roots})
	br := bufio.NewReader(tc)
	for range keepAliveRequests {
		if done(ctx) {
			break
		}
		c.SetDeadline(time.Now().Add(t.cfg.OpTimeout))
		n, err := get(ctx, tc, br, "/", -1)
		if err != nil {
			if !done(ctx) {
				t.rec.add(KindKeepAlive, Failed, "", time.Since(start), n, err.Error())
			}
			return Failed
		}
		t.rec.add(KindKeepAlive, OK, "", time.Since(start), n, "")
		start = time.Now()
		pause(ctx, 50*time.Millisecond)
	}
	return OK
}

// get sends GET path on an open connection and reads the answer: its body's size, which must be
// want (or, for -1, a greeting from the allowed host).
func get(ctx context.Context, c net.Conn, br *bufio.Reader, path string, want int64) (int64, error) {
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Now()) })
	defer stop()
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: allowed.sharness.test\r\n\r\n", path); err != nil {
		return 0, fmt.Errorf("GET %s: %s", path, kindOf(err))
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return 0, fmt.Errorf("GET %s: read the answer: %s", path, kindOf(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	if want < 0 {
		b, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
		if err != nil || !bytes.HasPrefix(b, []byte("hello from allowed.sharness.test")) {
			return int64(len(b)), fmt.Errorf("GET %s: answer %.40q (%v)", path, b, err)
		}
		return int64(len(b)), nil
	}
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil || n != want {
		return n, fmt.Errorf("GET %s: %d of %d bytes (%s)", path, n, want, kindOf(err))
	}
	return n, nil
}

// streamer is the llm stream workers.
type streamer struct {
	cfg    Config
	rec    *recorder
	client *http.Client
}

func (s streamer) work(ctx context.Context, _ int) {
	prompt := fmt.Sprintf("offline: long %d offline: pace %d", s.cfg.StreamWords, s.cfg.StreamPace)
	body, _ := json.Marshal(map[string]any{"model": "claude-sonnet-4-5", "max_tokens": 4096, "stream": true,
		"messages": []any{map[string]any{"role": "user", "content": prompt}}})
	for !done(ctx) {
		start := time.Now()
		outcome, rule, n, why := s.once(ctx, body)
		if done(ctx) && outcome == Failed {
			return
		}
		s.rec.add(KindStream, outcome, rule, time.Since(start), n, why)
		if outcome != OK {
			pause(ctx, s.cfg.Backoff)
		}
	}
}

func (s streamer) once(ctx context.Context, body []byte) (outcome, rule string, n int64, why string) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.OpTimeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(s.cfg.LLM, "/")+"/v1/messages", bytes.NewReader(body))
	req.Header.Set("content-type", "application/json")
	req.Header.Set("anthropic-version", "2023-06-01")
	req.Header.Set("x-api-key", "sharness-placeholder-not-a-key")
	resp, err := s.client.Do(req)
	if err != nil {
		return Failed, "", 0, "POST llm: " + kindOf(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		rule = resp.Header.Get("x-sharness-deny")
		if rule != "" && resp.StatusCode < 500 {
			return Policy, rule, 0, ""
		}
		return Failed, rule, 0, fmt.Sprintf("llm answered %s (deny %q): %.200s", resp.Status, rule, b)
	}
	words, stopped := 0, false
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		n += int64(len(line)) + 1
		switch {
		case bytes.Contains(line, []byte(`"type":"text_delta"`)):
			words++
		case bytes.HasPrefix(line, []byte("event: message_stop")):
			stopped = true
		case bytes.HasPrefix(line, []byte("event: error")):
			return Failed, "", n, "the stream ended with an error event"
		}
	}
	switch {
	case sc.Err() != nil:
		return Failed, "", n, "read the stream: " + kindOf(sc.Err())
	case !stopped || words != s.cfg.StreamWords:
		return Failed, "", n, fmt.Sprintf("the stream ended after %d of %d words (message_stop: %v)", words, s.cfg.StreamWords, stopped)
	}
	return OK, "", n, ""
}

// sheller is the bash tool-call workers: each its own MCP session, each call a command in the
// build profile that fetches the allowed host through net (bash's own share of net) and prints
// ShellBytes.
type sheller struct {
	cfg Config
	rec *recorder
}

func (s sheller) work(ctx context.Context, _ int) {
	var cs *mcp.ClientSession
	defer func() {
		if cs != nil {
			cs.Close()
		}
	}()
	cmd := fmt.Sprintf("code=$(curl -s -o /dev/null -w '%%{http_code}' --max-time 20 http://allowed.sharness.test/); printf 'net:%%s\\n' \"$code\"; head -c %d /dev/zero | tr '\\0' s", s.cfg.ShellBytes)
	for !done(ctx) {
		start := time.Now()
		if cs == nil {
			c, err := mcp.NewClient(&mcp.Implementation{Name: "sharness-loadgen", Version: "1"}, nil).
				Connect(ctx, &mcp.StreamableClientTransport{Endpoint: s.cfg.BashMCP, HTTPClient: &http.Client{Transport: &http.Transport{Proxy: nil}}}, nil)
			if err != nil {
				if !done(ctx) {
					s.rec.add(KindShell, Failed, "", time.Since(start), 0, "connect to bash: "+kindOf(err))
					pause(ctx, s.cfg.Backoff)
				}
				continue
			}
			cs = c
		}
		cctx, cancel := context.WithTimeout(ctx, s.cfg.OpTimeout)
		res, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": cmd, "profile": "build", "timeout": 60}})
		cancel()
		if done(ctx) {
			return
		}
		outcome, rule, n, why := judgeShell(res, err, s.cfg.ShellBytes)
		s.rec.add(KindShell, outcome, rule, time.Since(start), n, why)
		if err != nil { // the session may be gone with bash: a new one next time
			cs.Close()
			cs = nil
		}
		if outcome != OK {
			pause(ctx, s.cfg.Backoff)
		}
	}
}

func judgeShell(res *mcp.CallToolResult, err error, want int) (outcome, rule string, n int64, why string) {
	if err != nil {
		return Failed, "", 0, "call bash: " + kindOf(err)
	}
	var text strings.Builder
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			text.WriteString(t.Text)
		}
	}
	if res.IsError {
		return Failed, "", 0, "bash tool error: " + clip(text.String())
	}
	var o struct {
		ExitCode        int    `json:"exit_code"`
		Signal          string `json:"signal"`
		Stdout          string `json:"stdout"`
		Stderr          string `json:"stderr"`
		StdoutBytes     int64  `json:"stdout_bytes"`
		StdoutTruncated bool   `json:"stdout_truncated"`
		TimedOut        bool   `json:"timed_out"`
	}
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &o); err != nil {
		return Failed, "", 0, "bash's structured result: " + err.Error()
	}
	head := "net:200\n"
	switch {
	case !strings.HasPrefix(o.Stdout, "net:"):
		return Failed, "", o.StdoutBytes, "no net line: " + clip(o.Stdout)
	case !strings.HasPrefix(o.Stdout, head):
		line, _, _ := strings.Cut(o.Stdout, "\n")
		return Failed, "", o.StdoutBytes, "bash's sandbox through net got " + line
	case o.ExitCode != 0 || o.StdoutBytes != int64(len(head)+want):
		return Failed, "", o.StdoutBytes, fmt.Sprintf("exit %d (signal %q, timed out %v), %d bytes of %d (truncated %v), stderr %s",
			o.ExitCode, o.Signal, o.TimedOut, o.StdoutBytes, len(head)+want, o.StdoutTruncated, clip(o.Stderr))
	}
	return OK, "", o.StdoutBytes, ""
}

// writer is the fs writers: each writes its own protected file, again and again.
type writer struct {
	cfg    Config
	rec    *recorder
	client *http.Client
}

var writes atomic.Int64

func (w writer) work(ctx context.Context, i int) {
	path := fmt.Sprintf(".claude/commands/load-%d.md", i)
	for !done(ctx) {
		start := time.Now()
		content := fmt.Sprintf("load write %d\n", writes.Add(1))
		outcome, rule, why := w.once(ctx, path, content)
		if done(ctx) && outcome == Failed {
			return
		}
		w.rec.add(KindFS, outcome, rule, time.Since(start), int64(len(content)), why)
		if outcome != OK {
			pause(ctx, w.cfg.Backoff)
		} else {
			pause(ctx, 20*time.Millisecond)
		}
	}
}

func (w writer) once(ctx context.Context, path, content string) (outcome, rule, why string) {
	ctx, cancel := context.WithTimeout(ctx, w.cfg.OpTimeout)
	defer cancel()
	b, _ := json.Marshal(map[string]string{"path": path, "content": content})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(w.cfg.FSURL, "/")+"/v1/write", bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	resp, err := w.client.Do(req)
	if err != nil {
		return Failed, "", "POST fs: " + kindOf(err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	rule = resp.Header.Get("X-Sharness-Deny")
	switch {
	case resp.StatusCode == http.StatusOK:
		return OK, "", ""
	case rule != "" && resp.StatusCode < 500:
		return Policy, rule, ""
	}
	return Failed, rule, fmt.Sprintf("fs answered %s (deny %q): %s", resp.Status, rule, clip(string(answer)))
}

func clip(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}

// kindOf names an error by what a person would look for: a timeout, a refused or reset
// connection, or its text.
func kindOf(err error) string {
	var ne net.Error
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "closed (EOF)"
	}
	s := err.Error()
	for _, k := range []string{"connection refused", "connection reset", "no such host", "broken pipe", "no route to host"} {
		if strings.Contains(s, k) {
			return k
		}
	}
	return clip(s)
}

// Result is one operation's outcome, as Once reports it.
type Result struct {
	Kind    string  `json:"kind"`
	Outcome string  `json:"outcome"`
	Rule    string  `json:"rule,omitempty"`
	Error   string  `json:"error,omitempty"`
	MS      float64 `json:"ms"`
}

// Once makes one operation of kind (a tunnel, a stream, a bash call, an fs write) and reports
// what came back and how long it took: the fault suite's probe of one path.
func Once(ctx context.Context, cfg Config, kind string) (Result, error) {
	cfg.OpTimeout = cmpDur(cfg.OpTimeout, 60*time.Second)
	rec := &recorder{kinds: map[string]*Stat{}}
	switch kind {
	case KindNew, KindBulk, KindRefused, KindKeepAlive:
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM([]byte(cfg.CAPEM)) {
			return Result{}, errors.New("loadgen: no CA certificate for the offline world")
		}
		proxy, err := url.Parse(cfg.Proxy)
		if err != nil || proxy.Host == "" {
			return Result{}, fmt.Errorf("loadgen: proxy %q: not a URL", cfg.Proxy)
		}
		if kind == KindKeepAlive {
			kind = KindNew
		}
		tunneler{cfg: cfg, proxy: proxy.Host, roots: roots, rec: rec}.once(ctx, kind)
	case KindStream:
		s := streamer{cfg: cfg, rec: rec, client: &http.Client{Transport: &http.Transport{Proxy: nil}}}
		prompt := fmt.Sprintf("offline: long %d offline: pace %d", cfg.StreamWords, cfg.StreamPace)
		body, _ := json.Marshal(map[string]any{"model": "claude-sonnet-4-5", "max_tokens": 4096, "stream": true,
			"messages": []any{map[string]any{"role": "user", "content": prompt}}})
		start := time.Now()
		outcome, rule, n, why := s.once(ctx, body)
		rec.add(kind, outcome, rule, time.Since(start), n, why)
	case KindShell:
		ctx, cancel := context.WithTimeout(ctx, cfg.OpTimeout)
		defer cancel()
		start := time.Now()
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "sharness-loadgen", Version: "1"}, nil).
			Connect(ctx, &mcp.StreamableClientTransport{Endpoint: cfg.BashMCP, HTTPClient: &http.Client{Transport: &http.Transport{Proxy: nil}}}, nil)
		if err != nil {
			rec.add(kind, Failed, "", time.Since(start), 0, "connect to bash: "+kindOf(err))
			break
		}
		defer cs.Close()
		cmd := fmt.Sprintf("code=$(curl -s -o /dev/null -w '%%{http_code}' --max-time 20 http://allowed.sharness.test/); printf 'net:%%s\\n' \"$code\"; head -c %d /dev/zero | tr '\\0' s", cfg.ShellBytes)
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": cmd, "profile": "build", "timeout": 60}})
		outcome, rule, n, why := judgeShell(res, err, cfg.ShellBytes)
		rec.add(kind, outcome, rule, time.Since(start), n, why)
	case KindFS:
		w := writer{cfg: cfg, rec: rec, client: &http.Client{Transport: &http.Transport{Proxy: nil}}}
		start := time.Now()
		outcome, rule, why := w.once(ctx, ".claude/commands/fault.md", fmt.Sprintf("fault probe %d\n", time.Now().UnixNano()))
		rec.add(kind, outcome, rule, time.Since(start), 0, why)
	default:
		return Result{}, fmt.Errorf("loadgen: no kind %q", kind)
	}
	for k, s := range rec.kinds {
		if s.Ops == 0 {
			continue
		}
		r := Result{Kind: k, Rule: firstKey(s.Rules), MS: s.Samples[0]}
		for o := range s.Outcomes {
			r.Outcome = o
		}
		if len(s.Errors) > 0 {
			r.Error = s.Errors[0]
		}
		return r, nil
	}
	return Result{Kind: kind, Outcome: Failed, Error: "no outcome (the run's context ended)"}, nil
}

func firstKey(m map[string]int64) string {
	for k := range m {
		return k
	}
	return ""
}
