package main

import (
	"bytes"
	"crypto/ed25519"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sharness-ai/sharness/images/net/approval"
	"github.com/sharness-ai/sharness/internal/gate"
)

// operatorKey is the test's operator key: the test plays the person on the host.
var operatorKey = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{9}, 32))

// withGate opens an approval gate in a fresh folder, stored in *dir, pinning operatorKey, as
// main does; a request waits timeout.
func withGate(t *testing.T, timeout string, dir *string) option {
	return func(h *harness, _ *limits) {
		*dir = t.TempDir()
		s := gate.Settings{Dir: *dir, Timeout: timeout, Operator: gate.FormatPublicKey(operatorKey.Public().(ed25519.PublicKey))}
		g, err := s.Open(gate.Config{Component: "net", Policy: "sha256:" + strings.Repeat("b", 64), Tiers: approval.Tiers, Poll: 10 * time.Millisecond}, "x")
		if err != nil || g == nil {
			t.Fatalf("open the gate: %v", err)
		}
		h.gate = g
	}
}

// operate plays the person on the host: it waits for the next request in dir and decides it.
func operate(dir string, d gate.Decision, scope gate.Scope) <-chan gate.Request {
	ch := make(chan gate.Request, 1)
	go func() {
		defer close(ch)
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if reqs, err := gate.List(dir); err == nil && len(reqs) > 0 {
				if _, err := gate.Decide(dir, reqs[0].ID, d, operatorKey, scope, 0); err == nil {
					ch <- reqs[0]
				}
				return
			}
		}
	}()
	return ch
}

func gateHarness(t *testing.T, timeout string) (*harness, string) {
	t.Helper()
	var dir string
	h := newHarness(t, withGate(t, timeout, &dir))
	h.s.ask = approval.New(h.gate, h.s.conns.Stop)
	h.start(t, nil, nil)
	return h, dir
}

func (h *harness) get(t *testing.T, url string) (int, string, string) {
	t.Helper()
	c := h.client()
	defer c.Transport.(*http.Transport).CloseIdleConnections()
	resp, err := c.Get(url)
	if err != nil && strings.Contains(err.Error(), "Forbidden") { // a refused CONNECT
		return http.StatusForbidden, "", err.Error()
	} else if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("X-Sharness-Deny"), string(body)
}

// connectStatus sends CONNECT authority and returns the status and X-Sharness-Deny.
func (h *harness) connectStatus(t *testing.T, authority string) (int, string) {
	t.Helper()
	resp, _, _ := h.raw(t, fmt.Sprintf("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", authority, authority))
	return resp.StatusCode, resp.Header.Get("X-Sharness-Deny")
}

// TestAskApprovedOnce: a request to an ask host waits; the person sees who asks for what and
// approves it; it goes through, once. The identical request again waits for a new decision,
// and none comes: 403 approval_timeout.
func TestAskApprovedOnce(t *testing.T) {
	h, dir := gateHarness(t, "3s")
	op := operate(dir, gate.Approve, gate.ScopeOnce)
	status, rule, body := h.get(t, fmt.Sprintf("https://ask.test:%d/", h.tlsPort))
	req := <-op
	if status != 200 || body != fmt.Sprintf("hello ask.test:%d", h.tlsPort) {
		t.Fatalf("the approved request: %d %s %q", status, rule, body)
	}
	if req.Action != "net.connect" || req.Component != "net" || req.Tier != gate.Once ||
		req.Summary != fmt.Sprintf("agent connects to ask.test port %d", h.tlsPort) {
		t.Errorf("the person saw %+v", req)
	}
	if d := h.log.waitDecision(t, "ask"); d["allow"] != true || !strings.Contains(d["reason"].(string), req.ID) {
		t.Errorf("decision line %v, want an allow naming request %s", d, req.ID)
	}
	if status, rule := h.connectStatus(t, fmt.Sprintf("ask.test:%d", h.tlsPort)); status != 403 || rule != "approval_timeout" {
		t.Errorf("the same request again: %d %s, want 403 approval_timeout", status, rule)
	}
}

// TestAskSession: `approve --session` covers identical requests (same caller, host and port)
// until it expires, asking nobody again; a request to another port is another request.
func TestAskSession(t *testing.T) {
	h, dir := gateHarness(t, "3s")
	op := operate(dir, gate.Approve, gate.ScopeSession)
	if status, _, body := h.get(t, fmt.Sprintf("http://ask.test:%d/", h.plainPort)); status != 200 || !strings.HasPrefix(body, "hello ask.test") {
		t.Fatalf("the approved request: %d %q", status, body)
	}
	<-op
	for range 3 {
		if status, _, _ := h.get(t, fmt.Sprintf("http://ask.test:%d/again", h.plainPort)); status != 200 {
			t.Fatalf("an identical request under the session: %d", status)
		}
	}
	if reqs, _ := gate.List(dir); len(reqs) != 0 {
		t.Errorf("the session asked again: %+v", reqs)
	}
	if status, rule := h.connectStatus(t, fmt.Sprintf("ask.test:%d", h.tlsPort)); status != 403 || rule != "approval_timeout" {
		t.Errorf("another port: %d %s, want a new request that times out", status, rule)
	}
}

// TestAskDenied: a denied request never reaches the host.
func TestAskDenied(t *testing.T) {
	h, dir := gateHarness(t, "5s")
	op := operate(dir, gate.Deny, gate.ScopeOnce)
	resp, body, _ := h.raw(t, fmt.Sprintf("GET http://ask.test:%d/denied HTTP/1.1\r\nHost: ask.test\r\n\r\n", h.plainPort))
	<-op
	if resp.StatusCode != 403 || resp.Header.Get("X-Sharness-Deny") != "approval_denied" || !strings.Contains(body, "the operator denied it") {
		t.Errorf("the denied request: %s %q %q", resp.Status, resp.Header.Get("X-Sharness-Deny"), body)
	}
	if _, hit := h.hits.Load("/denied"); hit {
		t.Error("the denied request reached the host")
	}
	h.log.waitDecision(t, "approval_denied")
}

// TestAskTimeout: nobody decides; the request is refused when it expires (the gate counts
// from the whole second it was made in: a 2 s request waits more than 1 s).
func TestAskTimeout(t *testing.T) {
	h, _ := gateHarness(t, "2s")
	start := time.Now()
	if status, rule := h.connectStatus(t, fmt.Sprintf("ask.test:%d", h.tlsPort)); status != 403 || rule != "approval_timeout" {
		t.Errorf("nobody decided: %d %s, want 403 approval_timeout", status, rule)
	}
	if d := time.Since(start); d < time.Second {
		t.Errorf("refused after %v, before the request expired", d)
	}
}

// TestAskWithoutGate: without a gate (no operator key or folder) ask hosts are refused with
// approval_unavailable; allowed hosts work as ever.
func TestAskWithoutGate(t *testing.T) {
	h := newHarness(t)
	h.start(t, nil, nil)
	if status, rule := h.connectStatus(t, fmt.Sprintf("ask.test:%d", h.tlsPort)); status != 403 || rule != "approval_unavailable" {
		t.Errorf("ask host without a gate: %d %s", status, rule)
	}
	if status, _, _ := h.get(t, fmt.Sprintf("https://allowed.test:%d/", h.tlsPort)); status != 200 {
		t.Errorf("an allowed host: %d", status)
	}
}

// TestAskKeepsEveryOtherCheck: deny_hosts wins before anyone is asked; an approved host that
// resolves to a special-purpose range, or a tunnel whose TLS server name is another host, is
// still refused; allowed hosts never touch the gate.
func TestAskKeepsEveryOtherCheck(t *testing.T) {
	h, dir := gateHarness(t, "5s")
	if status, rule := h.connectStatus(t, fmt.Sprintf("blocked.test:%d", h.tlsPort)); status != 403 || rule != "deny-host" {
		t.Errorf("a denied ask host: %d %s", status, rule)
	}
	if status, rule := h.connectStatus(t, "ask.test:1"); status != 403 || rule != "port-not-allowed" {
		t.Errorf("an ask host on another port: %d %s", status, rule)
	}
	if status, _, _ := h.get(t, fmt.Sprintf("https://allowed.test:%d/", h.tlsPort)); status != 200 {
		t.Errorf("an allowed host: %d", status)
	}
	if ents, _ := os.ReadDir(filepath.Join(dir, "pending")); len(ents) != 0 {
		t.Errorf("requests reached the gate: %v", ents)
	}

	op := operate(dir, gate.Approve, gate.ScopeOnce)
	if status, rule := h.connectStatus(t, fmt.Sprintf("askprivate.test:%d", h.tlsPort)); status != 403 || !strings.HasPrefix(rule, "special-range") {
		t.Errorf("an approved host in a private range: %d %s", status, rule)
	}
	<-op
	op = operate(dir, gate.Approve, gate.ScopeOnce)
	if _, err := h.connectTLS(t, fmt.Sprintf("ask.test:%d", h.tlsPort), "allowed.test"); err == nil {
		t.Error("an approved tunnel carried a handshake for another host")
	}
	<-op
	h.log.waitDecision(t, "sni-mismatch")
}
