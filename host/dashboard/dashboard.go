// Package dashboard is the operator's web page for a running stack (issue 7): the latest
// decisions of each component's audit log, each log's chain status, the approval gate's pending
// requests with approve and deny signed by the operator key, and the policy in force.
//
// It is a host-side tool, served on the host's loopback only, and guards itself as a local web
// UI must: Listen refuses any address but a loopback IP; every request needs the per-run token
// (from the printed URL, then an HttpOnly SameSite=Strict cookie); the Host header must be the
// address it serves (DNS rebinding); a change is a POST whose Origin is the dashboard's (CSRF);
// every answer carries a strict Content-Security-Policy, X-Frame-Options DENY and no-store.
// Without an operator key it is read-only.
//
// It does not guarantee that whoever holds the token is the operator: any local process that
// reads the printed URL, or the browser profile's cookies, can approve. Cookies are not
// isolated by port, so another web server on the same loopback address that the browser
// visits receives the token. What the page shows is what the logs say: the chain status is
// audit's Scan against the trust the caller gives, and lines after a log's last checkpoint
// are shown as unsigned.
package dashboard

import (
	"cmp"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/sharness-ai/sharness/internal/audit"
	"github.com/sharness-ai/sharness/internal/gate"
)

//go:embed static
var static embed.FS

var page = template.Must(template.ParseFS(static, "static/index.html"))

// csp allows the page its own script, style and API, and nothing else: no inline script, no
// frame, no form posting elsewhere.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; " +
	"form-action 'none'; frame-ancestors 'none'; base-uri 'none'"

// Config is where the dashboard reads from and what it signs with. Sources are called on every
// refresh, so they may find what appears after the start (a volume, a log).
type Config struct {
	Logs     func() ([]Log, error)                    // the audit logs to show
	Trust    func([]Log) (audit.Trust, string, error) // what they verify against, and where the CA came from; an error shows them unverified
	GateDirs func() ([]string, error)                 // the gate directories with pending requests
	Key      ed25519.PrivateKey                       // the operator key; nil makes the page read-only
	ReadOnly string                                   // why there is no key, for the page
	TTL      time.Duration                            // how long an approval stays usable (0: gate.DefaultTTL)
	Policy   Policy                                   // the policy in force
	Events   int                                      // the latest decisions kept per log (0: 50)
	Now      func() time.Time                         // nil: time.Now
	Log      *slog.Logger                             // one line per decision signed; nil: none
}

// Policy is the policy in force as the person supplied it.
type Policy struct {
	Hash       string   `json:"hash"`
	Source     string   `json:"source"` // where the hash came from: a flag, the environment, a manifest
	Components []string `json:"components,omitempty"`
}

// Dashboard is the page and its API, an http.Handler for one listener's address.
type Dashboard struct {
	cfg    Config
	addr   string // host:port as the browser names it: the only Host and Origin accepted
	token  string
	cookie string
	mux    *http.ServeMux

	mu    sync.Mutex
	cache map[string]cached
}

// Listen binds addr, which must be a loopback IP and a port (127.0.0.1:0, [::1]:8080): the
// dashboard never serves another interface, where a stack network or another host could reach it.
func Listen(addr string) (net.Listener, error) {
	host, _, err := net.SplitHostPort(addr)
	if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("listen %q: the dashboard serves the host's loopback only: give 127.0.0.1:PORT or [::1]:PORT", addr)
	}
	return net.Listen("tcp", addr)
}

// New makes the dashboard for the listener address addr, which must be a loopback address, with
// a fresh random token.
func New(cfg Config, addr net.Addr) (*Dashboard, error) {
	tcp, ok := addr.(*net.TCPAddr)
	if !ok || !tcp.IP.IsLoopback() || tcp.Port == 0 {
		return nil, fmt.Errorf("dashboard address %v: want a loopback address with its port", addr)
	}
	if cfg.Key == nil && cfg.ReadOnly == "" {
		cfg.ReadOnly = "no operator key"
	}
	cfg.Events = cmp.Or(max(cfg.Events, 0), 50)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	d := &Dashboard{cfg: cfg, addr: tcp.String(), token: rand.Text(), cookie: "sharness_dashboard_" + strconv.Itoa(tcp.Port),
		mux: http.NewServeMux(), cache: map[string]cached{}}
	sub, _ := fs.Sub(static, "static")
	d.mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(sub)))
	d.mux.HandleFunc("GET /{$}", d.index)
	d.mux.HandleFunc("GET /api/state", func(w http.ResponseWriter, _ *http.Request) { reply(w, http.StatusOK, d.snapshot()) })
	d.mux.HandleFunc("POST /api/decide", d.decide)
	return d, nil
}

// URL is the address to open, with the token: it is the secret that lets a browser in.
func (d *Dashboard) URL() string { return "http://" + d.addr + "/?token=" + d.token }

// ServeHTTP checks every request before the page sees it: its Host, its token, and for a change
// its Origin.
func (d *Dashboard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", csp)
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	if r.Host != d.addr { // a name that resolves to loopback (DNS rebinding) is not this page
		http.Error(w, "this dashboard answers only at "+d.addr, http.StatusMisdirectedRequest)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead && r.Header.Get("Origin") != "http://"+d.addr {
		http.Error(w, "a change must come from the dashboard's own page (Origin)", http.StatusForbidden)
		return
	}
	if q := r.URL.Query(); r.URL.Path == "/" && q.Has("token") && r.Method == http.MethodGet {
		if !d.tokenOK(q.Get("token")) {
			http.Error(w, "wrong token: open the URL `sharness-ai dashboard` printed", http.StatusUnauthorized)
			return
		}
		// The token moves to a cookie scripts cannot read, and leaves the address bar.
		http.SetCookie(w, &http.Cookie{Name: d.cookie, Value: d.token, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	if c, err := r.Cookie(d.cookie); err != nil || !d.tokenOK(c.Value) {
		http.Error(w, "no token: open the URL `sharness-ai dashboard` printed", http.StatusUnauthorized)
		return
	}
	d.mux.ServeHTTP(w, r)
}

func (d *Dashboard) tokenOK(s string) bool {
	return subtle.ConstantTimeCompare([]byte(s), []byte(d.token)) == 1
}

func (d *Dashboard) index(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	page.Execute(w, map[string]any{"Policy": d.cfg.Policy, "ReadOnly": d.cfg.ReadOnly, "Operator": d.operator()})
}

func (d *Dashboard) operator() string {
	if d.cfg.Key == nil {
		return ""
	}
	return gate.FormatPublicKey(d.cfg.Key.Public().(ed25519.PublicKey))
}

// decideRequest is the body of POST /api/decide.
type decideRequest struct {
	ID       string        `json:"id"`
	Decision gate.Decision `json:"decision"`
	Scope    gate.Scope    `json:"scope"`
}

// decide signs the operator's decision on a pending request, in whichever gate directory holds it.
func (d *Dashboard) decide(w http.ResponseWriter, r *http.Request) {
	var in decideRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096))
	dec.DisallowUnknownFields()
	if d.cfg.Key == nil {
		reply(w, http.StatusForbidden, map[string]string{"error": "read-only: " + d.cfg.ReadOnly})
		return
	} else if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		reply(w, http.StatusUnsupportedMediaType, map[string]string{"error": "want application/json"})
		return
	} else if err := dec.Decode(&in); err != nil {
		reply(w, http.StatusBadRequest, map[string]string{"error": "bad request: " + err.Error()})
		return
	}
	dirs, err := d.cfg.GateDirs()
	if err != nil {
		reply(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
		return
	}
	for _, dir := range dirs {
		req, err := gate.Decide(dir, in.ID, in.Decision, d.cfg.Key, in.Scope, d.cfg.TTL)
		if errors.Is(err, gate.ErrUnknown) || errors.Is(err, fs.ErrNotExist) {
			continue // another component's directory
		}
		if d.cfg.Log != nil {
			attrs := []any{"id", in.ID, "component", req.Component, "action", req.Action, "decision", in.Decision, "scope", in.Scope, "dir", dir, "ok", err == nil}
			if err != nil {
				attrs = append(attrs, "error", err.Error())
			}
			d.cfg.Log.Info("dashboard decision", attrs...)
		}
		if err != nil {
			reply(w, http.StatusConflict, map[string]string{"error": err.Error()})
			return
		}
		reply(w, http.StatusOK, map[string]string{"message": fmt.Sprintf("%s %s: %s %s", in.Decision, req.ID, req.Action, req.Summary)})
		return
	}
	reply(w, http.StatusNotFound, map[string]string{"error": fmt.Sprintf("no pending request %q (decided, timed out, or never made)", in.ID)})
}

func reply(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}
