package main

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
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

	"golang.org/x/time/rate"

	"github.com/sharness-ai/sharness/images/net/relay"
	"github.com/sharness-ai/sharness/internal/gate"
	"github.com/sharness-ai/sharness/internal/mtls"
	"github.com/sharness-ai/sharness/policies/pbp"
)

func TestConnectEndToEnd(t *testing.T) {
	h := newHarness(t)
	h.start(t, nil, nil)
	client := h.client()
	resp, err := client.Get(fmt.Sprintf("https://allowed.test:%d/", h.tlsPort))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := fmt.Sprintf("hello allowed.test:%d", h.tlsPort); resp.StatusCode != 200 || string(body) != want {
		t.Fatalf("got %s %q; want 200 %q", resp.Status, body, want)
	}
	client.Transport.(*http.Transport).CloseIdleConnections()
	d := h.log.waitDecision(t, "hosts")
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range d {
			if !yield(k) {
				return
			}
		}
	})
	if !slices.Equal(keys, logKeys) {
		t.Errorf("log keys %v; want %v", keys, logKeys)
	}
	if d["allow"] != true || d["caller"] != "agent" || d["host"] != "allowed.test" || d["port"] != float64(h.tlsPort) {
		t.Errorf("decision line %v", d)
	}
	// The client verifies the certificate: a name it does not cover fails there, not in net.
	if _, err := client.Get(fmt.Sprintf("https://uncovered.wild.test:%d/", h.tlsPort)); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("uncovered name: %v", err)
	}
}

func TestConnectBytesLogged(t *testing.T) {
	h := newHarness(t)
	h.start(t, nil, nil)
	tc, err := h.connectTLS(t, fmt.Sprintf("allowed.test:%d", h.tlsPort), "allowed.test")
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(tc, "GET / HTTP/1.1\r\nHost: allowed.test\r\nConnection: close\r\n\r\n")
	io.ReadAll(tc)
	tc.Close()
	d := h.log.waitDecision(t, "hosts")
	if d["bytes_in"].(float64) <= 0 || d["bytes_out"].(float64) <= 0 {
		t.Errorf("bytes not counted: %v", d)
	}
}

func TestConnectRefusals(t *testing.T) {
	h := newHarness(t)
	h.start(t, nil, nil)
	for _, tc := range []struct {
		name, authority string
		status          int
		header, value   string
	}{
		{"host not allowed", "denied.test:%d", 403, "X-Sharness-Deny", "host-not-allowed"},
		{"deny host wins", "blocked.test:%d", 403, "X-Sharness-Deny", "deny-host"},
		{"port not allowed", "allowed.test:1", 403, "X-Sharness-Deny", "port-not-allowed"},
		{"dotted quad", "127.0.0.1:%d", 403, "X-Sharness-Deny", "ip-literal"},
		{"decimal", "2130706433:%d", 403, "X-Sharness-Deny", "ip-literal"},
		{"octal", "0177.0.0.1:%d", 403, "X-Sharness-Deny", "ip-literal"},
		{"hex short", "0x7f.1:%d", 403, "X-Sharness-Deny", "ip-literal"},
		{"short", "127.1:%d", 403, "X-Sharness-Deny", "ip-literal"},
		{"bracketed v6", "[::1]:%d", 403, "X-Sharness-Deny", "ip-literal"},
		{"v4-mapped v6", "[::ffff:169.254.169.254]:%d", 403, "X-Sharness-Deny", "ip-literal"},
		{"numeric tld", "foo.123:%d", 403, "X-Sharness-Deny", "numeric-host"},
		{"private address", "private.test:%d", 403, "X-Sharness-Deny", "special-range:private-use"},
		{"metadata address", "meta.test:%d", 403, "X-Sharness-Deny", "special-range:cloud-metadata"},
		{"one address of many", "mixed.test:%d", 403, "X-Sharness-Deny", "special-range:private-use"},
		{"mapped answer", "mapped.test:%d", 403, "X-Sharness-Deny", "special-range:private-use"},
		{"nat64 answer", "nat64.test:%d", 403, "X-Sharness-Deny", "special-range:nat64"},
		{"no port", "allowed.test", 400, "X-Sharness-Deny", "bad-authority"},
		{"leading zero port", "allowed.test:0%d", 400, "X-Sharness-Deny", "bad-authority"},
		{"bad host", "a_b.test:%d", 400, "X-Sharness-Deny", "invalid-host"},
		{"no such host", "nxdomain.test:%d", 502, "X-Sharness-Error", "dns"},
		{"nothing listening", "dead.test:%d", 502, "X-Sharness-Error", "dial"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := h.tlsPort
			if tc.name == "nothing listening" {
				p = h.deadPort
			}
			authority := tc.authority
			if strings.Contains(authority, "%d") {
				authority = fmt.Sprintf(authority, p)
			}
			resp, body, _ := h.raw(t, fmt.Sprintf("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", authority, authority))
			if resp.StatusCode != tc.status || resp.Header.Get(tc.header) != tc.value {
				t.Fatalf("CONNECT %s: %s %s=%q; want %d %s", authority, resp.Status, tc.header, resp.Header.Get(tc.header), tc.status, tc.value)
			}
			if !strings.Contains(body, tc.value) || strings.Count(body, "\n") != 1 {
				t.Fatalf("body %q does not name %s in one line", body, tc.value)
			}
			if tc.header == "X-Sharness-Deny" && resp.Header.Get("X-Sharness-Error") != "" {
				t.Fatal("a refusal also carries X-Sharness-Error")
			}
		})
	}
	for _, rule := range []string{"host-not-allowed", "ip-literal", "special-range:private-use", "bad-authority"} {
		if d := h.log.waitDecision(t, rule); d["allow"] != false {
			t.Errorf("refusal logged as allowed: %v", d)
		}
	}
	if d := h.log.waitDecision(t, "hosts"); d["error"] != "dns" && d["error"] != "dial" {
		t.Errorf("upstream failure logged without its kind: %v", d)
	}
}

func TestCallerRefusals(t *testing.T) {
	for _, tc := range []struct {
		name, caller string
		known        bool
		rule         string
	}{
		{"unknown source", "", false, "no-caller"},
		{"caller without rule", "kms", true, "no-rule-for-caller"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.s.edge = func(netip.Addr) (string, bool) { return tc.caller, tc.known }
			h.start(t, nil, nil)
			authority := fmt.Sprintf("allowed.test:%d", h.tlsPort)
			resp, _, _ := h.raw(t, "CONNECT "+authority+" HTTP/1.1\r\nHost: "+authority+"\r\n\r\n")
			if resp.StatusCode != 403 || resp.Header.Get("X-Sharness-Deny") != tc.rule {
				t.Fatalf("got %s %q; want 403 %s", resp.Status, resp.Header.Get("X-Sharness-Deny"), tc.rule)
			}
		})
	}
}

func TestSNIChecks(t *testing.T) {
	h := newHarness(t)
	h.start(t, nil, nil)
	authority := fmt.Sprintf("allowed.test:%d", h.tlsPort)
	// The upstream's certificate is valid for other.test too: only net's check stops this.
	if _, err := h.connectTLS(t, authority, "other.test"); err == nil {
		t.Fatal("domain fronting: a ClientHello for other.test went through a tunnel to allowed.test")
	}
	h.log.waitDecision(t, "sni-mismatch")
	if _, err := h.connectTLS(t, authority, ""); err == nil {
		t.Fatal("a ClientHello without SNI went through")
	}
	h.log.waitDecision(t, "sni-missing")
	if _, err := h.connectTLS(t, authority, "ALLOWED.test"); err != nil {
		t.Fatalf("SNI differing only in case was refused: %v", err)
	}
	// Not TLS at all.
	resp, _, c := h.raw(t, "CONNECT "+authority+" HTTP/1.1\r\n\r\n")
	if resp.StatusCode != 200 {
		t.Fatal(resp.Status)
	}
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n")
	if n, err := io.ReadAll(c); err != nil && !errors.Is(err, net.ErrClosed) || len(n) != 0 {
		t.Fatalf("plaintext tunnel answered %q, %v", n, err)
	}
	for _, d := range h.log.decisions() {
		if (d["rule"] == "sni-mismatch" || d["rule"] == "sni-missing") && d["bytes_in"] != float64(0) {
			t.Errorf("a refused tunnel relayed bytes from upstream: %v", d)
		}
	}
}

func TestForward(t *testing.T) {
	h := newHarness(t)
	h.start(t, nil, nil)
	c := h.client()
	resp, err := c.Get(fmt.Sprintf("http://allowed.test:%d/", h.plainPort))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != fmt.Sprintf("hello allowed.test:%d", h.plainPort) {
		t.Fatalf("got %s %q", resp.Status, body)
	}
	resp, err = c.Get(fmt.Sprintf("http://allowed.test:%d/stream", h.plainPort))
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "part one;part two" || resp.ContentLength != -1 {
		t.Fatalf("chunked relay: %q, length %d", body, resp.ContentLength)
	}
	resp, err = c.Post(fmt.Sprintf("http://allowed.test:%d/upload", h.plainPort), "text/plain", strings.NewReader(strings.Repeat("x", 100)))
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "100 <nil>" {
		t.Fatalf("upload: %q", body)
	}
	if resp, err := c.Head(fmt.Sprintf("http://allowed.test:%d/", h.plainPort)); err != nil || resp.StatusCode != 200 {
		t.Fatalf("HEAD: %v %v", resp, err)
	}
}

func TestForwardDropsHopByHop(t *testing.T) {
	h := newHarness(t)
	h.start(t, nil, nil)
	resp, body, _ := h.raw(t, fmt.Sprintf("GET http://Allowed.Test:%d/headers HTTP/1.1\r\nHost: evil.example\r\n"+
		"Proxy-Authorization: Basic c2VjcmV0\r\nProxy-Connection: keep-alive\r\nConnection: X-Drop\r\nX-Drop: 1\r\n"+
		"X-Keep: 1\r\nKeep-Alive: 5\r\nUpgrade: h2c\r\nTe: trailers\r\n\r\n", h.plainPort))
	if resp.StatusCode != 200 {
		t.Fatal(resp.Status)
	}
	if !strings.Contains(body, fmt.Sprintf("host=allowed.test:%d\n", h.plainPort)) || !strings.Contains(body, "X-Keep") {
		t.Fatalf("upstream saw %q", body)
	}
	for _, k := range []string{"Proxy-Authorization", "Proxy-Connection", "X-Drop", "Keep-Alive", "Upgrade", "Te"} {
		if strings.Contains(body, "\n"+k+"\n") {
			t.Errorf("%s was forwarded: %q", k, body)
		}
	}
}

func TestForwardNeverFollowsRedirects(t *testing.T) {
	h := newHarness(t)
	h.start(t, nil, nil)
	resp, err := h.client().Get(fmt.Sprintf("http://allowed.test:%d/redirect", h.plainPort))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if want := fmt.Sprintf("http://denied.test:%d/", h.plainPort); resp.StatusCode != 302 || resp.Header.Get("Location") != want {
		t.Fatalf("got %s Location %q; want 302 %s", resp.Status, resp.Header.Get("Location"), want)
	}
	if _, followed := h.hits.Load("/"); followed {
		t.Fatal("net followed the redirect")
	}
	// A client that follows it makes a new request, which net checks and refuses.
	follow := h.client()
	follow.CheckRedirect = nil
	resp, err = follow.Get(fmt.Sprintf("http://allowed.test:%d/redirect", h.plainPort))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 403 || resp.Header.Get("X-Sharness-Deny") != "host-not-allowed" {
		t.Fatalf("followed redirect: %s %q", resp.Status, resp.Header.Get("X-Sharness-Deny"))
	}
}

func TestForwardRefusals(t *testing.T) {
	h := newHarness(t, withLimits(func(l *limits) { l.maxBody = 1024 }))
	h.start(t, nil, nil)
	big := strings.Repeat("x", 2048)
	for _, tc := range []struct {
		name, request string
		status        int
		rule          string
	}{
		{"ip literal", "GET http://127.0.0.1:%d/ HTTP/1.1\r\nHost: a\r\n\r\n", 403, "ip-literal"},
		{"decimal literal", "GET http://2130706433:%d/ HTTP/1.1\r\nHost: a\r\n\r\n", 403, "ip-literal"},
		{"v6 literal", "GET http://[::1]:%d/ HTTP/1.1\r\nHost: a\r\n\r\n", 403, "ip-literal"},
		{"default port not allowed", "GET http://allowed.test/ HTTP/1.1\r\nHost: a\r\n\r\n", 403, "port-not-allowed"},
		{"host not allowed", "GET http://denied.test:%d/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n", 403, "host-not-allowed"},
		{"metadata", "GET http://meta.test:%d/latest/meta-data/ HTTP/1.1\r\nHost: a\r\n\r\n", 403, "special-range:cloud-metadata"},
		{"https absolute", "GET https://allowed.test:%d/ HTTP/1.1\r\nHost: a\r\n\r\n", 400, "scheme-not-supported"},
		{"origin form", "GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n", 400, "not-proxy-request"},
		{"metrics on the plain listener", "GET /metrics HTTP/1.1\r\nHost: net\r\n\r\n", 400, "not-proxy-request"},
		{"garbage", "HELLO\r\n\r\n", 400, "malformed-request"},
		{"cl te conflict", "POST http://allowed.test:%d/upload HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400, "cl-te-conflict"},
		{"two lengths", "POST http://allowed.test:%d/upload HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nxx", 400, "malformed-request"},
		{"header too large", "GET http://allowed.test:%d/ HTTP/1.1\r\nX-Big: " + strings.Repeat("a", 20<<10) + "\r\n\r\n", 431, "header-too-large"},
		{"body too large", "POST http://allowed.test:%d/upload HTTP/1.1\r\nHost: a\r\nContent-Length: 2048\r\n\r\n" + big, 413, "body-too-large"},
		{"chunked body too large", "POST http://allowed.test:%d/upload HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n800\r\n" + big + "\r\n0\r\n\r\n", 413, "body-too-large"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := tc.request
			if strings.Contains(req, "%d") {
				req = fmt.Sprintf(req, h.plainPort)
			}
			resp, body, _ := h.raw(t, req)
			if resp.StatusCode != tc.status || resp.Header.Get("X-Sharness-Deny") != tc.rule {
				t.Fatalf("got %s %q (%q); want %d %s", resp.Status, resp.Header.Get("X-Sharness-Deny"), body, tc.status, tc.rule)
			}
			h.log.waitDecision(t, tc.rule)
		})
	}
}

func TestExpectContinue(t *testing.T) {
	h := newHarness(t)
	h.start(t, nil, nil)
	c, err := net.Dial("tcp", h.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "POST http://allowed.test:%d/upload HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n", h.plainPort)
	br := bufio.NewReader(c)
	line, _ := br.ReadString('\n')
	if !strings.HasPrefix(line, "HTTP/1.1 100") {
		t.Fatalf("got %q; want 100 Continue", line)
	}
	br.ReadString('\n')
	io.WriteString(c, "hello")
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if string(body) != "5 <nil>" {
		t.Fatalf("upload after 100-continue: %q", body)
	}
}

func TestSlowloris(t *testing.T) {
	h := newHarness(t, withLimits(func(l *limits) { l.Header = 300 * time.Millisecond }))
	h.start(t, nil, nil)
	c, err := net.Dial("tcp", h.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	// Trickle a header that never ends: the deadline is for the whole head, not per byte.
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		io.WriteString(c, "GET http://allowed.test/ HTTP/1.1\r\n")
		for t := time.NewTicker(20 * time.Millisecond); ; {
			select {
			case <-stop:
				return
			case <-t.C:
				if _, err := io.WriteString(c, "X: y\r\n"); err != nil {
					return
				}
			}
		}
	}()
	resp, _, _ := readResponse(t, c, false)
	if resp.StatusCode != http.StatusRequestTimeout || resp.Header.Get("X-Sharness-Deny") != "header-timeout" {
		t.Fatalf("got %s %q; want 408 header-timeout", resp.Status, resp.Header.Get("X-Sharness-Deny"))
	}
	h.log.waitDecision(t, "header-timeout")
	// A client that sends nothing at all is dropped too, after keepAlive.
}

func TestTunnelLimit(t *testing.T) {
	h := newHarness(t, withLimits(func(l *limits) { l.tunnels = 1 }))
	h.start(t, nil, nil)
	authority := fmt.Sprintf("allowed.test:%d", h.tlsPort)
	first, err := h.connectTLS(t, authority, "allowed.test")
	if err != nil {
		t.Fatal(err)
	}
	resp, _, _ := h.raw(t, "CONNECT "+authority+" HTTP/1.1\r\n\r\n")
	if resp.StatusCode != 503 || resp.Header.Get("X-Sharness-Deny") != "tunnel-limit" {
		t.Fatalf("second tunnel: %s %q; want 503 tunnel-limit", resp.Status, resp.Header.Get("X-Sharness-Deny"))
	}
	first.Close()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		resp, _, _ := h.raw(t, "CONNECT "+authority+" HTTP/1.1\r\n\r\n")
		if resp.StatusCode == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the slot was not released: %s", resp.Status)
		}
	}
}

func TestTunnelIdleTimeout(t *testing.T) {
	h := newHarness(t, withLimits(func(l *limits) { l.Idle = time.Second })) // slow handshakes must not trip it
	h.start(t, nil, nil)
	tc, err := h.connectTLS(t, fmt.Sprintf("allowed.test:%d", h.tlsPort), "allowed.test")
	if err != nil {
		t.Fatal(err)
	}
	tc.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err = tc.Read(make([]byte, 1))
	if ne, ok := err.(net.Error); err == nil || ok && ne.Timeout() {
		t.Fatalf("an idle tunnel stayed open: %v", err)
	}
}

func TestRateLimit(t *testing.T) {
	h := newHarness(t, withLimits(func(l *limits) { l.brake = relay.Brake{Rate: rate.Every(time.Hour), Burst: 2} }))
	h.start(t, nil, nil)
	var statuses []int
	for range 3 {
		resp, _, _ := h.raw(t, fmt.Sprintf("GET http://allowed.test:%d/ HTTP/1.1\r\nHost: a\r\n\r\n", h.plainPort))
		statuses = append(statuses, resp.StatusCode)
	}
	if !slices.Equal(statuses, []int{200, 200, 429}) {
		t.Fatalf("statuses %v; want [200 200 429]", statuses)
	}
	h.log.waitDecision(t, "rate-limit")
}

func TestMTLSListener(t *testing.T) {
	h := newHarness(t)
	tlsConf := &tls.Config{Certificates: []tls.Certificate{h.ca.issue(t, "127.0.0.1")},
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: h.ca.pool, MinVersion: tls.VersionTLS13}
	h.start(t, tlsConf, peerCaller(fixture(t)))
	client := func(cert tls.Certificate, proxy bool) *http.Client {
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: h.ca.pool, Certificates: []tls.Certificate{cert}}}
		if proxy {
			tr.Proxy = http.ProxyURL(&url.URL{Scheme: "https", Host: h.mtlsAddr})
		}
		return &http.Client{Transport: tr, Timeout: 10 * time.Second}
	}
	llm := h.ca.issue(t, "spiffe://sharness.test/agent")
	resp, err := client(llm, true).Get(fmt.Sprintf("https://allowed.test:%d/", h.tlsPort))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("through mTLS: %s", resp.Status)
	}
	h.log.waitDecision(t, "hosts")
	resp, err = client(llm, false).Get("https://" + h.mtlsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `sharness_net_decisions_total{allow="true",caller="agent",rule="hosts"} 1`) {
		t.Fatalf("metrics: %s\n%s", resp.Status, body)
	}
	// Certificates from the right CA that name no component name no caller.
	for _, name := range []string{"somebody.test", "spiffe://sharness.test/stranger"} {
		_, err = client(h.ca.issue(t, name), true).Get(fmt.Sprintf("https://allowed.test:%d/", h.tlsPort))
		if err == nil || !strings.Contains(err.Error(), "Forbidden") {
			t.Fatalf("caller %s: %v", name, err)
		}
	}
	h.log.waitDecision(t, "no-caller")
	// No client certificate at all: the handshake fails.
	if _, err := (&http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: h.ca.pool}}}).Get("https://" + h.mtlsAddr + "/metrics"); err == nil {
		t.Fatal("metrics served without a client certificate")
	}
	h.log.waitDecision(t, "tls-handshake")
}

func TestPeerCaller(t *testing.T) {
	ca := newCA(t)
	state := func(names ...string) *tls.ConnectionState {
		leaf, err := parseLeaf(ca.issue(t, names...))
		if err != nil {
			t.Fatal(err)
		}
		return &tls.ConnectionState{HandshakeComplete: true, PeerCertificates: leaf}
	}
	for _, tc := range []struct {
		name  string
		state *tls.ConnectionState
		want  string
	}{
		{"component", state("spiffe://sharness.test/llm"), "llm"},
		{"not a component", state("spiffe://sharness.test/stranger"), ""},
		{"wrong trust domain", state("spiffe://other.test/llm"), ""},
		{"two ids", state("spiffe://sharness.test/llm", "spiffe://sharness.test/bash"), ""},
		{"no id", state("llm.test"), ""},
		{"no peer", &tls.ConnectionState{HandshakeComplete: true}, ""},
	} {
		got, err := peerCaller(fixture(t))(tc.state)
		if got != tc.want || (err == nil) != (tc.want != "") {
			t.Errorf("%s: got %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
}

func TestUpstreamProxy(t *testing.T) {
	h := newHarness(t)
	var mu sync.Mutex
	var seen []string
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method+" "+r.RequestURI+" auth="+r.Header.Get("Proxy-Authorization"))
		mu.Unlock()
		_, p, _ := net.SplitHostPort(r.Host)
		if r.Method != http.MethodConnect {
			out, _ := http.NewRequest(r.Method, "http://127.0.0.1:"+p+r.URL.Path, nil)
			out.Host = r.Host
			resp, err := http.DefaultTransport.RoundTrip(out)
			if err != nil {
				w.WriteHeader(502)
				return
			}
			defer resp.Body.Close()
			w.WriteHeader(resp.StatusCode)
			io.Copy(w, resp.Body)
			return
		}
		up, err := net.Dial("tcp", "127.0.0.1:"+p)
		if err != nil {
			w.WriteHeader(502)
			return
		}
		c, _, _ := w.(http.Hijacker).Hijack()
		io.WriteString(c, "HTTP/1.1 200 OK\r\n\r\n")
		go func() { io.Copy(up, c); up.Close() }()
		io.Copy(c, up)
		c.Close()
	}))
	defer fake.Close()
	h.s = newServer(h.s.rules, []string{"agent"}, h.s.edge, h.s.lookup, &url.URL{Scheme: "http", Host: fake.Listener.Addr().String(), User: url.UserPassword("u", "p")}, h.s.lim, h.s.log)
	h.s.unsafeAllowLoopbackForTests = true
	h.start(t, nil, nil)
	for _, u := range []string{fmt.Sprintf("https://allowed.test:%d/", h.tlsPort), fmt.Sprintf("http://allowed.test:%d/", h.plainPort)} {
		resp, err := h.client().Get(u)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%s through the chain: %s", u, resp.Status)
		}
	}
	if _, err := h.client().Get(fmt.Sprintf("https://denied.test:%d/", h.tlsPort)); err == nil {
		t.Fatal("a refused host went through the chain")
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{
		fmt.Sprintf("CONNECT allowed.test:%d auth=Basic dTpw", h.tlsPort),
		fmt.Sprintf("GET http://allowed.test:%d/ auth=Basic dTpw", h.plainPort),
	}
	if !slices.Equal(seen, want) {
		t.Fatalf("upstream proxy saw %q; want %q", seen, want)
	}
}

func TestShutdown(t *testing.T) {
	h := newHarness(t)
	h.start(t, nil, nil)
	tc, err := h.connectTLS(t, fmt.Sprintf("allowed.test:%d", h.tlsPort), "allowed.test")
	if err != nil {
		t.Fatal(err)
	}
	idle, err := net.Dial("tcp", h.addr) // a connection that never sends a request
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	h.cancel()
	select {
	case <-h.done:
	case <-time.After(15 * time.Second):
		t.Fatal("shutdown hangs")
	}
	tc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := tc.Read(make([]byte, 1)); err == nil {
		t.Fatal("a tunnel outlived shutdown")
	}
}

func TestEdgeCaller(t *testing.T) {
	m := fixture(t)
	caller := edgeCaller(m, "net")
	for i, e := range m.Edges {
		p, err := m.EdgeSubnet(i)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := caller(p.Addr().Next().Next())
		if e.To == "net" && (!ok || got != e.From) || e.To != "net" && ok {
			t.Errorf("edge %v: caller %q, %v", e, got, ok)
		}
	}
	for _, a := range []string{"10.214.0.2", "127.0.0.1", "172.17.0.2"} {
		if got, ok := caller(netip.MustParseAddr(a)); ok {
			t.Errorf("%s named caller %q", a, got)
		}
	}
}

func TestRun(t *testing.T) {
	dir := "../../policies/testdata/full"
	m, err := pbp.Load(os.DirFS(dir), "manifest.yaml")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("SHARNESS_AI_POLICY_HASH", m.Hash)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	cfg := config{policyDir: dir, listen: "127.0.0.1:0", mtlsListen: "127.0.0.1:0"}
	log := slog.New(slog.DiscardHandler)
	t.Setenv("SHARNESS_AI_COMPONENT", "llm")
	if err := run(ctx, cfg, log); err == nil || !strings.Contains(err.Error(), "not net") {
		t.Fatalf("run as llm: %v", err)
	}
	t.Setenv("SHARNESS_AI_COMPONENT", "net")
	t.Setenv(mtls.EnvEndpointSocket, "")
	if err := run(ctx, cfg, log); err != nil {
		t.Fatalf("run as net: %v", err)
	}
	t.Setenv(mtls.EnvEndpointSocket, "unix://"+t.TempDir()+"/missing.sock")
	if err := run(ctx, cfg, log); err == nil || !strings.Contains(err.Error(), "missing SVID") {
		t.Fatalf("run without its SVID: %v", err)
	}
	t.Setenv(mtls.EnvEndpointSocket, "")
	cfg.upstream = "https://proxy:1"
	if err := run(ctx, cfg, log); err == nil {
		t.Fatal("run accepted an https upstream proxy")
	}
	cfg.upstream = ""
	for _, brake := range []string{"0/1", "inf/1", "2000"} { // a brake can be set, never switched off
		cfg.brake = brake
		if err := run(ctx, cfg, log); err == nil || !strings.Contains(err.Error(), "refusing to start: rate per caller") {
			t.Fatalf("run with -rate-per-caller %s: %v", brake, err)
		}
	}
	cfg.brake = "5000/10000"
	if err := run(ctx, cfg, log); err != nil {
		t.Fatalf("run with -rate-per-caller 5000/10000: %v", err)
	}
	// An operator key that does not parse stops net: it never serves with a gate it cannot trust.
	cfg.gate = gate.Settings{Dir: t.TempDir(), Operator: "ed25519:AAAA"}
	if err := run(ctx, cfg, log); err == nil || !strings.Contains(err.Error(), "approval gate") {
		t.Fatalf("run with a bad operator key: %v", err)
	}
	cfg.gate = gate.Settings{Dir: t.TempDir(), Operator: gate.FormatPublicKey(operatorKey.Public().(ed25519.PublicKey))}
	if err := run(ctx, cfg, log); err != nil {
		t.Fatalf("run with a gate: %v", err)
	}
	cfg.gate = gate.Settings{}
	t.Setenv("SHARNESS_AI_POLICY_HASH", "sha256:0")
	if err := run(ctx, cfg, log); err == nil {
		t.Fatal("run started with the wrong policy hash")
	}
}

func parseLeaf(c tls.Certificate) ([]*x509.Certificate, error) {
	leaf, err := x509.ParseCertificate(c.Certificate[0])
	return []*x509.Certificate{leaf}, err
}

// TestUnsafeAllowAddrs: the test world's exemption lets exactly its listed addresses through
// (here two, on two loopback addresses); every other special address, loopback included, is
// still refused by its range, and so is a name with one unlisted address among listed ones.
func TestUnsafeAllowAddrs(t *testing.T) {
	h := newHarness(t)
	second, err := net.Listen("tcp", fmt.Sprintf("127.0.0.2:%d", h.tlsPort)) // the same port: the rules allow it
	if err != nil {
		t.Skipf("no second loopback address here: %v", err)
	}
	up := httptest.NewUnstartedServer(h.tlsUp.Config.Handler)
	up.Listener.Close()
	up.Listener, up.TLS = second, h.tlsUp.TLS
	up.StartTLS()
	t.Cleanup(up.Close)
	h.s.unsafeAllowLoopbackForTests = false
	h.s.unsafeAllowAddrs = map[netip.Addr]bool{lo(): true, netip.MustParseAddr("127.0.0.2"): true}
	h.names["other.test"] = []netip.Addr{netip.MustParseAddr("127.0.0.2")}
	h.names["private.test"] = []netip.Addr{netip.MustParseAddr("127.0.0.3")}                                 // loopback, not listed
	h.names["mixed.test"] = []netip.Addr{netip.MustParseAddr("127.0.0.2"), netip.MustParseAddr("127.0.0.3")} // one not listed
	h.start(t, nil, nil)
	for _, host := range []string{"allowed.test", "other.test"} {
		resp, err := h.client().Get(fmt.Sprintf("https://%s:%d/", host, h.tlsPort))
		if err != nil {
			t.Fatalf("%s (a listed address): %v", host, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(body) != fmt.Sprintf("hello %s:%d", host, h.tlsPort) {
			t.Errorf("%s (a listed address): %s %q, want 200", host, resp.Status, body)
		}
	}
	for _, host := range []string{"private.test", "meta.test", "mixed.test"} {
		if _, err := h.client().Get(fmt.Sprintf("https://%s:%d/", host, h.tlsPort)); err == nil {
			t.Errorf("%s went through: only the listed addresses may", host)
		}
	}
	for _, rule := range []string{"special-range:loopback", "special-range:cloud-metadata"} {
		h.log.waitDecision(t, rule)
	}
	var refused []string // each line is written after its answer: wait for both
	for deadline := time.Now().Add(10 * time.Second); len(refused) < 2 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		refused = nil
		for _, d := range h.log.decisions() {
			if d["rule"] == "special-range:loopback" {
				refused = append(refused, fmt.Sprint(d["host"]))
			}
		}
	}
	// In either order: each line is written after its answer, so the next request may log first.
	slices.Sort(refused)
	if want := []string{"mixed.test", "private.test"}; !slices.Equal(refused, want) {
		t.Errorf("refused as loopback: %q, want %q", refused, want)
	}
}
