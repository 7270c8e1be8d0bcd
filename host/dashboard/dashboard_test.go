package dashboard

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sharness-ai/sharness/internal/audit"
	"github.com/sharness-ai/sharness/internal/gate"
	"github.com/sharness-ai/sharness/testkit/mtlstest"
)

var testPolicy = "sha256:" + strings.Repeat("ab", 32)

// hostile is text an agent could get into a log (a host it asked for): markup and a
// bidirectional override. The page must show it as text, quoted.
const hostile = "<img src=x onerror=alert(1)><b>bold</b>\u202etxt.exe"

// fixture is a dashboard over a session's logs in a temporary folder (net stopped, fs still
// running) and fs's gate directory, as a component makes it.
type fixture struct {
	srv     *httptest.Server
	d       *Dashboard
	mu      sync.Mutex
	logs    []Log
	gateDir string
	gate    *gate.Gate
	key     ed25519.PrivateKey
	fsLog   *audit.Writer // fs's log, still open: a test may add decisions
}

func newFixture(t *testing.T, edit func(*Config)) *fixture {
	t.Helper()
	ca := mtlstest.NewCA(t, "sharness.test")
	dir := t.TempDir()
	f := &fixture{gateDir: t.TempDir()}
	for _, comp := range []string{"fs", "net"} {
		file := filepath.Join(dir, comp+".jsonl")
		w, err := audit.Open(file, audit.Config{Component: comp, Policy: testPolicy, SessionCA: audit.CAHash(ca.Cert()), SVID: ca.SVID(t, comp), Every: 100, Interval: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		events := []audit.Event{{Action: "fs.write", Decision: "allow", Reason: "approved", Fields: map[string]string{"path": ".git/hooks/pre-commit"}}}
		if comp == "net" {
			events = []audit.Event{
				{Action: "egress", Decision: "allow", Reason: "rule allows", Caller: "agent", Destination: "allowed.example:443"},
				{Action: "egress", Decision: "deny", Reason: "no egress rule names this host", Caller: "agent", Destination: "evil.example:443", Fields: map[string]string{"rule": "host-not-allowed"}},
				{Action: "egress", Decision: "deny", Reason: "no egress rule names this host", Caller: "agent", Destination: hostile},
			}
		}
		for _, e := range events {
			if err := w.Log(e); err != nil {
				t.Fatal(err)
			}
		}
		if comp == "net" {
			w.Close() // net stopped; fs runs on, its lines unsigned
		} else {
			f.fsLog = w
			t.Cleanup(func() { w.Close() })
		}
		f.logs = append(f.logs, Log{File: file, Component: comp})
	}
	_, f.key, _ = ed25519.GenerateKey(nil)
	g, err := gate.Open(gate.Config{Dir: f.gateDir, Component: "fs", Policy: testPolicy, Operator: f.key.Public().(ed25519.PublicKey),
		Tiers: map[string]gate.Tier{"fs.write": gate.Every, "kms.seal_to": gate.Once}, Poll: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	f.gate = g
	other := t.TempDir() // another component's gate directory, with nothing pending
	os.Mkdir(filepath.Join(other, "pending"), 0o755)
	cfg := Config{
		Logs: func() ([]Log, error) { f.mu.Lock(); defer f.mu.Unlock(); return slices.Clone(f.logs), nil },
		Trust: func([]Log) (audit.Trust, string, error) {
			return audit.Trust{CA: ca.Cert(), Policy: testPolicy}, "the test CA", nil
		},
		GateDirs: func() ([]string, error) { return []string{other, f.gateDir}, nil },
		Key:      f.key,
		Policy:   Policy{Hash: testPolicy, Source: "the test", Components: []string{"fs", "net"}},
	}
	if edit != nil {
		edit(&cfg)
	}
	f.srv = httptest.NewUnstartedServer(nil)
	f.d, err = New(cfg, f.srv.Listener.Addr())
	if err != nil {
		t.Fatal(err)
	}
	f.srv.Config.Handler = f.d
	f.srv.Start()
	t.Cleanup(f.srv.Close)
	return f
}

// ask makes the component ask the operator, as fs does for a write to an ask path; the verdict
// arrives on the channel once a decision passed the gate's Check, or the request timed out.
func (f *fixture) ask(t *testing.T, action, summary string) (id string, verdict <-chan gate.Verdict) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	ch := make(chan gate.Verdict, 1)
	go func() {
		v, _ := f.gate.Ask(ctx, action, []byte(summary), summary)
		ch <- v
	}()
	for range 500 {
		if reqs, _ := gate.List(f.gateDir); len(reqs) == 1 {
			return reqs[0].ID, ch
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the request was never pending")
	return "", nil
}

// client is a browser that opened the printed URL: it holds the cookie.
func (f *fixture) client(t *testing.T) *http.Client {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	resp, err := c.Get(f.d.URL())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Request.URL.RawQuery != "" {
		t.Fatalf("opening the URL: %s at %s, want 200 at / without the token", resp.Status, resp.Request.URL)
	}
	return c
}

func (f *fixture) state(t *testing.T, c *http.Client) state {
	t.Helper()
	resp, err := c.Get(f.srv.URL + "/api/state")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var s state
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /api/state: %s, %v", resp.Status, err)
	}
	return s
}

func (f *fixture) decide(t *testing.T, c *http.Client, body string) (int, map[string]string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, f.srv.URL+"/api/decide", strings.NewReader(body))
	req.Header.Set("Origin", f.srv.URL)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]string
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func TestListenOnlyLoopback(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0", "192.0.2.1:80", "localhost:0", "example.com:80", "127.0.0.1", "10.213.0.1:0"} {
		ln, err := Listen(addr)
		if err == nil {
			ln.Close()
			t.Errorf("Listen(%q) succeeded", addr)
		} else if !strings.Contains(err.Error(), "loopback only") {
			t.Errorf("Listen(%q): %v, want a refusal saying loopback only", addr, err)
		}
	}
	ln, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatalf("Listen(127.0.0.1:0): %v", err)
	}
	ln.Close()
	if ln, err := Listen("[::1]:0"); err == nil {
		ln.Close()
	} else if strings.Contains(err.Error(), "loopback only") {
		t.Errorf("Listen([::1]:0) refused: %v", err)
	}
	if _, err := New(Config{}, &net.TCPAddr{IP: net.IPv4zero, Port: 80}); err == nil {
		t.Error("New accepted 0.0.0.0")
	}
}

// TestSecurity: every request is checked for its Host, its token and, for a change, its
// Origin, and every answer, a refusal too, carries the headers that keep it out of frames,
// caches and foreign scripts.
func TestSecurity(t *testing.T) {
	f := newFixture(t, nil)
	good := f.client(t)
	cookie := good.Jar.Cookies(&url.URL{Scheme: "http", Host: f.srv.Listener.Addr().String()})
	if len(cookie) != 1 {
		t.Fatalf("cookies %v, want the token's", cookie)
	}
	host := f.srv.Listener.Addr().String()
	withCookie := func(r *http.Request) { r.AddCookie(cookie[0]) }
	cases := []struct {
		name   string
		method string
		path   string
		edit   func(*http.Request)
		want   int
	}{
		{"page without token", "GET", "/", nil, http.StatusUnauthorized},
		{"state without token", "GET", "/api/state", nil, http.StatusUnauthorized},
		{"script without token", "GET", "/static/app.js", nil, http.StatusUnauthorized},
		{"wrong token", "GET", "/?token=AAAAAAAAAAAAAAAAAAAAAAAAAA", nil, http.StatusUnauthorized},
		{"token elsewhere than the page", "GET", "/api/state?token=" + f.d.token, nil, http.StatusUnauthorized},
		{"wrong cookie", "GET", "/api/state", func(r *http.Request) { r.AddCookie(&http.Cookie{Name: f.d.cookie, Value: "x"}) }, http.StatusUnauthorized},
		{"cookie", "GET", "/api/state", withCookie, http.StatusOK},
		{"script with cookie", "GET", "/static/app.js", withCookie, http.StatusOK},
		{"DNS rebinding", "GET", "/api/state", func(r *http.Request) {
			withCookie(r)
			r.Host = "evil.example:" + f.srv.URL[strings.LastIndex(f.srv.URL, ":")+1:]
		}, http.StatusMisdirectedRequest},
		{"localhost by name", "GET", "/api/state", func(r *http.Request) { withCookie(r); r.Host = strings.Replace(host, "127.0.0.1", "localhost", 1) }, http.StatusMisdirectedRequest},
		{"rebinding with the token", "GET", "/?token=" + f.d.token, func(r *http.Request) { r.Host = "evil.example" }, http.StatusMisdirectedRequest},
		{"POST without Origin", "POST", "/api/decide", withCookie, http.StatusForbidden},
		{"POST from another origin", "POST", "/api/decide", func(r *http.Request) { withCookie(r); r.Header.Set("Origin", "http://evil.example") }, http.StatusForbidden},
		{"POST from an opaque origin", "POST", "/api/decide", func(r *http.Request) { withCookie(r); r.Header.Set("Origin", "null") }, http.StatusForbidden},
		{"POST from another port", "POST", "/api/decide", func(r *http.Request) { withCookie(r); r.Header.Set("Origin", "http://127.0.0.1:1") }, http.StatusForbidden},
		{"POST without cookie", "POST", "/api/decide", func(r *http.Request) { r.Header.Set("Origin", f.srv.URL) }, http.StatusUnauthorized},
		{"POST the token", "POST", "/?token=" + f.d.token, func(r *http.Request) { r.Header.Set("Origin", f.srv.URL) }, http.StatusUnauthorized},
		{"GET a change", "GET", "/api/decide", withCookie, http.StatusMethodNotAllowed},
		{"PUT", "PUT", "/api/decide", func(r *http.Request) { withCookie(r); r.Header.Set("Origin", f.srv.URL) }, http.StatusMethodNotAllowed},
		{"form post", "POST", "/api/decide", func(r *http.Request) {
			withCookie(r)
			r.Header.Set("Origin", f.srv.URL)
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}, http.StatusUnsupportedMediaType},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(tc.method, "http://"+host+tc.path, strings.NewReader(`{}`))
			if tc.edit != nil {
				tc.edit(req)
			}
			w := httptest.NewRecorder()
			f.d.ServeHTTP(w, req)
			if w.Code != tc.want {
				t.Errorf("%s %s: %d, want %d: %s", tc.method, tc.path, w.Code, tc.want, w.Body)
			}
			for h, want := range map[string]string{
				"Content-Security-Policy": csp, "X-Frame-Options": "DENY", "Cache-Control": "no-store",
				"X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer",
			} {
				if got := w.Header().Get(h); got != want {
					t.Errorf("%s: %q, want %q", h, got, want)
				}
			}
			if strings.Contains(w.Body.String(), f.d.token) {
				t.Errorf("the answer holds the token: %s", w.Body)
			}
		})
	}

	t.Run("cookie", func(t *testing.T) {
		req := httptest.NewRequest("GET", "http://"+host+"/?token="+f.d.token, nil)
		w := httptest.NewRecorder()
		f.d.ServeHTTP(w, req)
		c := w.Result().Cookies()
		if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/" || len(c) != 1 {
			t.Fatalf("the token URL: %d to %q with %v, want 303 to / with one cookie", w.Code, w.Header().Get("Location"), c)
		}
		if !c[0].HttpOnly || c[0].SameSite != http.SameSiteStrictMode || c[0].Path != "/" || c[0].Value != f.d.token {
			t.Errorf("cookie %+v: want HttpOnly, SameSite=Strict, Path=/, the token", c[0])
		}
	})
	t.Run("csp", func(t *testing.T) {
		for _, want := range []string{"default-src 'none'", "script-src 'self'", "frame-ancestors 'none'", "form-action 'none'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("CSP %q lacks %q", csp, want)
			}
		}
		if strings.Contains(csp, "unsafe") {
			t.Errorf("CSP %q allows something unsafe", csp)
		}
	})
	t.Run("a fresh token per run", func(t *testing.T) {
		other, err := New(Config{}, f.srv.Listener.Addr())
		if err != nil || other.token == f.d.token || len(other.token) < 26 {
			t.Errorf("two dashboards' tokens: %q and %q (%v)", f.d.token, other.token, err)
		}
	})
}

// TestState: the JSON the page renders holds each log's decisions, newest first, its chain
// status, the requests pending in every gate directory and the policy; text a component
// logged is quoted when it could mislead.
func TestState(t *testing.T) {
	f := newFixture(t, nil)
	id, _ := f.ask(t, "fs.write", "write .git/hooks/pre-commit (12 bytes)")
	s := f.state(t, f.client(t))
	if len(s.Logs) != 2 || s.Logs[0].Component != "fs" || s.Logs[1].Component != "net" {
		t.Fatalf("logs %+v, want fs then net", s.Logs)
	}
	fs, nt := s.Logs[0], s.Logs[1]
	if nt.Status != "ok" || !strings.Contains(nt.Detail, "ends with its shutdown checkpoint") || len(nt.Events) != 3 {
		t.Errorf("net: %s %q, %d events", nt.Status, nt.Detail, len(nt.Events))
	}
	if e := nt.Events[1]; e.Decision != "deny" || e.Reason != "no egress rule names this host" || e.Destination != "evil.example:443" || e.Caller != "agent" || e.Fields["rule"] != "host-not-allowed" || !e.Signed {
		t.Errorf("net's denial: %+v", e)
	}
	if e := nt.Events[0]; e.Destination != `"<img src=x onerror=alert(1)><b>bold</b>\u202etxt.exe"` {
		t.Errorf("a destination with a bidi override: %q, want it quoted", e.Destination)
	}
	if fs.Status != "ok" || !strings.Contains(fs.Detail, "running, signed through line 0") || len(fs.Events) != 1 || fs.Events[0].Signed {
		t.Errorf("fs (running, nothing signed yet): %+v", fs)
	}
	if len(s.Pending) != 1 || s.Pending[0].ID != id || s.Pending[0].Component != "fs" || s.Pending[0].Session {
		t.Errorf("pending %+v, want %s, tier every (no session approval)", s.Pending, id)
	}
	if s.Policy.Hash != testPolicy || s.ReadOnly != "" || len(s.Problems) != 0 || s.SessionCA == "" {
		t.Errorf("policy %+v, read-only %q, problems %v, session CA %q", s.Policy, s.ReadOnly, s.Problems, s.SessionCA)
	}
}

// TestChainStatus: a log changed on disk fails with its line; logs without trust are shown
// unverified with why; a missing log, a second log of one component, and failing sources are
// named.
func TestChainStatus(t *testing.T) {
	f := newFixture(t, nil)
	c := f.client(t)
	data, _ := os.ReadFile(f.logs[1].File)
	os.WriteFile(f.logs[1].File, []byte(strings.Replace(string(data), `"decision":"deny"`, `"decision":"allow"`, 1)), 0o600)
	s := f.state(t, c)
	if nt := s.Logs[1]; nt.Status != "failed" || !strings.HasPrefix(nt.Detail, "line 4: ") {
		t.Errorf("a changed line: %s %q, want failed at line 4", nt.Status, nt.Detail)
	}

	f.mu.Lock()
	f.logs = append(f.logs, Log{File: f.logs[1].File + ".gone", Component: "kms"}, Log{File: f.logs[0].File, Component: "fs"})
	f.mu.Unlock()
	s = f.state(t, c)
	if kms := s.Logs[2]; kms.Status != "failed" || !strings.Contains(kms.Detail, "no log") {
		t.Errorf("a missing log: %s %q", kms.Status, kms.Detail)
	}
	if dup := s.Logs[3]; dup.Status != "failed" || !strings.Contains(dup.Detail, "a second log of component fs") {
		t.Errorf("a second fs log: %s %q", dup.Status, dup.Detail)
	}

	g := newFixture(t, func(c *Config) {
		c.Trust = func([]Log) (audit.Trust, string, error) { return audit.Trust{}, "", errors.New("no session record") }
		c.GateDirs = func() ([]string, error) { return nil, errors.New("no gate directory") }
	})
	s = g.state(t, g.client(t))
	if s.Logs[1].Status != "unverified" || len(s.Logs[1].Events) != 3 || s.Logs[1].Events[0].Signed {
		t.Errorf("without trust: %+v", s.Logs[1])
	}
	if strings.Join(s.Problems, "\n") != "audit logs shown unverified: no session record\npending approvals: no gate directory" {
		t.Errorf("problems %q", s.Problems)
	}
}

// TestDecide: the page's approval passes the component's Check and the component goes ahead;
// a denial is the operator's; a request that is not pending, or a malformed body, is refused.
func TestDecide(t *testing.T) {
	f := newFixture(t, nil)
	c := f.client(t)
	id, verdict := f.ask(t, "fs.write", "write .git/hooks/pre-commit (12 bytes)")
	if code, out := f.decide(t, c, `{"id":"`+id+`","decision":"approve","scope":"session"}`); code != http.StatusConflict || !strings.Contains(out["error"], "session approval is refused") {
		t.Errorf("a session approval of tier every: %d %v", code, out)
	}
	if code, out := f.decide(t, c, `{"id":"`+id+`","decision":"approve","scope":"once"}`); code != http.StatusOK || !strings.Contains(out["message"], "approve "+id) {
		t.Errorf("approve: %d %v", code, out)
	}
	if v := <-verdict; !v.Approved() || v.Reason() != gate.ReasonApproved {
		t.Errorf("the component's verdict after the page's approval: %v %s", v.Approved(), v.Reason())
	}

	id, verdict = f.ask(t, "kms.seal_to", "seal anthropic-api-key")
	if s := f.state(t, c); len(s.Pending) != 1 || !s.Pending[0].Session {
		t.Errorf("a request of tier once: %+v, want a session approval offered", s.Pending)
	}
	if code, out := f.decide(t, c, `{"id":"`+id+`","decision":"deny","scope":"once"}`); code != http.StatusOK {
		t.Errorf("deny: %d %v", code, out)
	}
	if v := <-verdict; v.Approved() || v.Reason() != gate.ReasonDenied {
		t.Errorf("the component's verdict after the page's denial: %v %s", v.Approved(), v.Reason())
	}

	for body, want := range map[string]int{
		`{"id":"` + id + `","decision":"approve","scope":"once"}`:       http.StatusNotFound, // no longer pending
		`{"id":"../used","decision":"approve","scope":"once"}`:          http.StatusNotFound,
		`{"id":"` + id + `","decision":"approve","scope":"once","x":1}`: http.StatusBadRequest,
		`{"id":` + strings.Repeat(" ", 5000) + `"x"}`:                   http.StatusBadRequest,
	} {
		if code, out := f.decide(t, c, body); code != want {
			t.Errorf("%.60s: %d %v, want %d", body, code, out, want)
		}
	}
}

// TestReadOnly: without the operator key nothing can be decided, and the page says why.
func TestReadOnly(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.Key, c.ReadOnly = nil, "started with --read-only" })
	c := f.client(t)
	id, _ := f.ask(t, "fs.write", "write .envrc (3 bytes)")
	if code, out := f.decide(t, c, `{"id":"`+id+`","decision":"approve","scope":"once"}`); code != http.StatusForbidden || out["error"] != "read-only: started with --read-only" {
		t.Errorf("approve on a read-only page: %d %v", code, out)
	}
	if _, err := os.Stat(filepath.Join(f.gateDir, "decisions", id+".json")); err == nil {
		t.Error("a read-only page wrote a decision")
	}
	resp, err := c.Get(f.srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(page), "Read-only: started with --read-only") || f.state(t, c).ReadOnly == "" {
		t.Errorf("the read-only page does not say so:\n%s", page)
	}
}

// TestPageEscapes: what the page's template shows is escaped.
func TestPageEscapes(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.Policy.Source = hostile })
	resp, err := f.client(t).Get(f.srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if strings.Contains(string(page), "<b>bold") || !strings.Contains(string(page), "&lt;b&gt;bold") {
		t.Errorf("the policy source is not escaped:\n%s", page)
	}
	if strings.Contains(string(page), "<script>") || !strings.Contains(string(page), `<script src="/static/app.js" defer></script>`) {
		t.Errorf("the page has inline script, or not its own:\n%s", page)
	}
}
