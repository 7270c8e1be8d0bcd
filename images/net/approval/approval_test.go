package approval

import (
	"bytes"
	"crypto/ed25519"
	"strings"
	"testing"
	"time"

	"github.com/sharness-ai/sharness/images/net/egress"
	"github.com/sharness-ai/sharness/internal/gate"
)

var operatorKey = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{3}, 32))

func host(t *testing.T, s string) egress.Host {
	t.Helper()
	h, err := egress.NormalizeHost(s)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func openGate(t *testing.T) (*gate.Gate, string) {
	t.Helper()
	dir := t.TempDir()
	s := gate.Settings{Dir: dir, Timeout: "1m", Operator: gate.FormatPublicKey(operatorKey.Public().(ed25519.PublicKey))}
	g, err := s.Open(gate.Config{Component: "net", Policy: "sha256:" + strings.Repeat("c", 64), Tiers: Tiers, Poll: 10 * time.Millisecond}, "")
	if err != nil || g == nil {
		t.Fatalf("open the gate: %v", err)
	}
	return g, dir
}

func TestNoGate(t *testing.T) {
	for name, a := range map[string]*Asker{"nil": nil, "no gate": New(nil, nil)} {
		if d := a.Decide("agent", host(t, "ask.test"), 443); d.Allow || d.Ask || d.Rule != "approval_unavailable" || d.Reason == "" {
			t.Errorf("%s: %+v, want approval_unavailable", name, d)
		}
	}
}

// TestApproved: an approval is an allow naming the request; the person saw who asked for what.
func TestApproved(t *testing.T) {
	g, dir := openGate(t)
	go func() {
		for range 500 {
			if reqs, _ := gate.List(dir); len(reqs) > 0 {
				gate.Decide(dir, reqs[0].ID, gate.Approve, operatorKey, gate.ScopeOnce, 0)
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	d := New(g, nil).Decide("bash", host(t, "ask.test"), 8443)
	if !d.Allow || d.Rule != egress.RuleAsk || !strings.Contains(d.Reason, "the operator approved it (approved, request ") {
		t.Errorf("Decide = %+v", d)
	}
}

// TestWaitingIsBounded: at most MaxWaiting requests wait for the operator; the next is refused
// at once; net's shutdown (stop) ends those waiting.
func TestWaitingIsBounded(t *testing.T) {
	g, dir := openGate(t)
	stop := make(chan struct{})
	a := New(g, stop)
	results := make(chan egress.Decision, MaxWaiting)
	for range MaxWaiting {
		go func() { results <- a.Decide("agent", host(t, "ask.test"), 443) }()
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if reqs, _ := gate.List(dir); len(reqs) == MaxWaiting {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the requests were not listed")
		}
	}
	if d := a.Decide("agent", host(t, "ask.test"), 443); d.Allow || d.Rule != "approval_unavailable" || !strings.Contains(d.Reason, "retry later") {
		t.Errorf("one request too many: %+v", d)
	}
	close(stop)
	for range MaxWaiting {
		select {
		case d := <-results:
			if d.Allow || d.Rule != "approval_timeout" {
				t.Errorf("a request at shutdown: %+v", d)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("shutdown did not end the waiting requests")
		}
	}
}
