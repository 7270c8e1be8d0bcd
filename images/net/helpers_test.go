package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sharness-ai/sharness/images/net/egress"
	"github.com/sharness-ai/sharness/internal/gate"
	"github.com/sharness-ai/sharness/policies/pbp"
)

// testCA is a throwaway certificate authority, one per test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newCA(t testing.TB) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool}
}

// issue makes a leaf for DNS names, IP addresses and URIs ("spiffe://..."), for both ends.
func (ca *testCA) issue(t testing.TB, names ...string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()),
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	for _, n := range names {
		if u, err := url.Parse(n); err == nil && u.Scheme != "" {
			tmpl.URIs = append(tmpl.URIs, u)
		} else if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// logBuf collects the JSON log lines of a server.
type logBuf struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuf) decisions() []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(l.buf.String()), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == "decision" {
			out = append(out, m)
		}
	}
	return out
}

// waitDecision waits for a decision line with rule and returns it.
func (l *logBuf) waitDecision(t *testing.T, rule string) map[string]any {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		for _, d := range l.decisions() {
			if d["rule"] == rule {
				return d
			}
		}
	}
	t.Fatalf("no decision with rule %s in the log:\n%s", rule, l.buf.String())
	return nil
}

var logKeys = []string{"allow", "bytes_in", "bytes_out", "caller", "duration_ms", "error", "host", "level", "msg", "port", "reason", "rule", "time"}

// harness is a proxy with its fake outside world: an HTTPS server with a certificate for
// allowed.test and other.test, a plain HTTP server, and a fixed DNS.
type harness struct {
	ca                           *testCA
	s                            *server
	addr, mtlsAddr               string
	log                          *logBuf
	tlsUp, plainUp               *httptest.Server
	tlsPort, plainPort, deadPort int
	hits                         sync.Map                // path → *int counters of plainUp, by path
	names                        map[string][]netip.Addr // the fake DNS
	cancel                       context.CancelFunc
	done                         chan struct{}
	gate                         *gate.Gate // withGate's
}

type option func(h *harness, lim *limits)

func withLimits(f func(*limits)) option { return func(_ *harness, l *limits) { f(l) } }

func lo() netip.Addr { return netip.MustParseAddr("127.0.0.1") }

func newHarness(t testing.TB, opts ...option) *harness {
	t.Helper()
	h := &harness{ca: newCA(t), log: &logBuf{}, done: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		v, _ := h.hits.LoadOrStore(r.URL.Path, new(int))
		*v.(*int)++
		fmt.Fprintf(w, "hello %s", r.Host)
	})
	mux.HandleFunc("/headers", func(w http.ResponseWriter, r *http.Request) {
		keys := slices.Sorted(func(yield func(string) bool) {
			for k := range r.Header {
				if !yield(k) {
					return
				}
			}
		})
		fmt.Fprintf(w, "host=%s\n%s\n", r.Host, strings.Join(keys, "\n"))
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, fmt.Sprintf("http://denied.test:%d/", h.plainPort), http.StatusFound)
	})
	mux.HandleFunc("/upload", func(w http.ResponseWriter, r *http.Request) {
		n, err := io.Copy(io.Discard, r.Body)
		fmt.Fprintf(w, "%d %v", n, err)
	})
	mux.HandleFunc("/stream", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("part one;"))
		w.(http.Flusher).Flush()
		w.Write([]byte("part two"))
	})
	h.tlsUp = httptest.NewUnstartedServer(mux)
	h.tlsUp.Config.ErrorLog = log.New(io.Discard, "", 0) // refused handshakes are the point
	h.tlsUp.TLS = &tls.Config{Certificates: []tls.Certificate{h.ca.issue(t, "allowed.test", "other.test", "a.wild.test", "ask.test")}}
	h.tlsUp.StartTLS()
	t.Cleanup(h.tlsUp.Close)
	h.plainUp = httptest.NewServer(mux)
	t.Cleanup(h.plainUp.Close)
	h.tlsPort, h.plainPort = port(t, h.tlsUp.Listener.Addr()), port(t, h.plainUp.Listener.Addr())
	dead, _ := net.Listen("tcp", "127.0.0.1:0")
	h.deadPort = port(t, dead.Addr())
	dead.Close()

	h.names = map[string][]netip.Addr{
		"allowed.test": {lo()}, "other.test": {lo()}, "a.wild.test": {lo()}, "denied.test": {lo()}, "uncovered.wild.test": {lo()},
		"blocked.test": {lo()}, "dead.test": {lo()}, "ask.test": {lo()},
		"askprivate.test": {netip.MustParseAddr("10.0.0.1")},
		"private.test":    {netip.MustParseAddr("10.0.0.1")},
		"meta.test":       {netip.MustParseAddr("169.254.169.254")},
		"mixed.test":      {lo(), netip.MustParseAddr("192.168.1.1")},
		"mapped.test":     {netip.MustParseAddr("::ffff:10.1.1.1")},
		"nat64.test":      {netip.MustParseAddr("64:ff9b::a00:1")},
	}
	lookup := func(_ context.Context, host string) ([]netip.Addr, error) {
		if a, ok := h.names[host]; ok {
			return a, nil
		}
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	ports := []int{h.tlsPort, h.plainPort, h.deadPort}
	rules, err := egress.Compile(&pbp.NetRules{
		Callers: &[]pbp.CallerRule{{Caller: "agent", Ports: ports, Hosts: []string{
			"allowed.test", "other.test", "*.wild.test", "blocked.test", "dead.test", "nxdomain.test",
			"private.test", "meta.test", "mixed.test", "mapped.test", "nat64.test"},
			Ask: []string{"ask.test", "askprivate.test", "blocked.test"}}}, // blocked: deny wins over ask
		DenyHosts: []string{"blocked.test"},
	})
	if err != nil {
		t.Fatal(err)
	}
	lim := defaultLimits
	lim.grace = time.Second
	for _, o := range opts {
		o(h, &lim)
	}
	edge := func(netip.Addr) (string, bool) { return "agent", true }
	h.s = newServer(rules, []string{"agent"}, edge, lookup, nil, lim, slog.New(slog.NewJSONHandler(h.log, nil)))
	h.s.unsafeAllowLoopbackForTests = true
	return h
}

// fixture is the shared policy with every component kind (trust domain sharness.test).
func fixture(t *testing.T) *pbp.Manifest {
	t.Helper()
	m, err := pbp.Load(os.DirFS("../../policies/testdata/full"), "manifest.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// start serves the plain listener (and the mTLS one when tlsConf is set).
func (h *harness) start(t testing.TB, tlsConf *tls.Config, callerOf callerFunc) {
	t.Helper()
	plain, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h.addr = plain.Addr().String()
	var secure net.Listener
	if tlsConf != nil {
		secure, _ = net.Listen("tcp", "127.0.0.1:0")
		h.mtlsAddr = secure.Addr().String()
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() {
		h.s.run(ctx, plain, secure, tlsConf, callerOf)
		close(h.done)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-h.done:
		case <-time.After(20 * time.Second):
			t.Error("the proxy did not shut down")
		}
	})
}

func port(t testing.TB, a net.Addr) int {
	t.Helper()
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		t.Fatal(err)
	}
	return int(ap.Port())
}

// client is an HTTP client using the proxy that verifies servers against the test CA and
// never follows redirects.
func (h *harness) client() *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			Proxy:           http.ProxyURL(&url.URL{Scheme: "http", Host: h.addr}),
			TLSClientConfig: &tls.Config{RootCAs: h.ca.pool},
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Timeout:       10 * time.Second,
	}
}

// raw sends request text on a new connection and reads one response.
func (h *harness) raw(t *testing.T, request string) (*http.Response, string, net.Conn) {
	t.Helper()
	c, err := net.Dial("tcp", h.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	go io.WriteString(c, request)
	return readResponse(t, c, strings.HasPrefix(request, "CONNECT"))
}

func readResponse(t *testing.T, c net.Conn, connect bool) (*http.Response, string, net.Conn) {
	t.Helper()
	req := &http.Request{Method: http.MethodGet}
	if connect {
		req.Method = http.MethodConnect
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), req)
	if err != nil {
		t.Fatalf("read response: %v", err)
	}
	if connect && resp.StatusCode == http.StatusOK {
		return resp, "", c // the tunnel follows
	}
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body), c
}

// connectTLS opens a tunnel to authority and runs a TLS handshake in it for serverName.
func (h *harness) connectTLS(t *testing.T, authority, serverName string) (*tls.Conn, error) {
	t.Helper()
	resp, _, c := h.raw(t, fmt.Sprintf("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", authority, authority))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("CONNECT %s: %s", authority, resp.Status)
	}
	tc := tls.Client(c, &tls.Config{ServerName: serverName, RootCAs: h.ca.pool, InsecureSkipVerify: serverName == ""})
	return tc, tc.Handshake()
}
