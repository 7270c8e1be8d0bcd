package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spiffe/go-spiffe/v2/bundle/x509bundle"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"

	"github.com/sharness-ai/sharness/images/kms/hygiene"
	"github.com/sharness-ai/sharness/internal/audit"
	"github.com/sharness-ai/sharness/internal/gate"
	"github.com/sharness-ai/sharness/internal/kms"
	"github.com/sharness-ai/sharness/internal/mtls"
	"github.com/sharness-ai/sharness/internal/seal"
	"github.com/sharness-ai/sharness/internal/session"
	"github.com/sharness-ai/sharness/policies/pbp"
	"github.com/sharness-ai/sharness/testkit/mtlstest"
)

const fixture = "../../policies/testdata/full"

type testIdentity struct {
	*x509svid.SVID
	*x509bundle.Bundle
}

func setup(t *testing.T, component string) *pbp.Manifest {
	t.Helper()
	m, err := pbp.Load(os.DirFS(fixture), "manifest.yaml")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(session.EnvPolicyHash, m.Hash)
	t.Setenv(session.EnvPolicyKey, "")
	t.Setenv(session.EnvComponent, component)
	return m
}

// TestRun starts the binary's run as in the stack: it prints the bundle line, serves an unwrap
// to llm over mTLS, and returns once llm destroys the identity.
func TestRun(t *testing.T) {
	m := setup(t, "kms")
	ca := mtlstest.NewCA(t, m.TrustDomain)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dir, auditDir := t.TempDir(), t.TempDir()
	out, stdout := io.Pipe()
	cfg := config{policyDir: fixture, secretsDir: dir, auditDir: auditDir, hygiene: hygiene.Report{"mlockall": "ok"},
		source: testIdentity{ca.SVID(t, "kms"), ca.Bundle()}, listener: ln}
	done := make(chan error, 1)
	var logs bytes.Buffer // written by run, read once it returned
	go func() { done <- run(context.Background(), cfg, slog.New(slog.NewJSONHandler(&logs, nil)), stdout) }()

	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	data, ok := strings.CutPrefix(strings.TrimSuffix(line, "\n"), seal.BundleLogPrefix)
	if !ok {
		t.Fatalf("first stdout line %q lacks %q", line, seal.BundleLogPrefix)
	}
	b, err := seal.ParseBundle([]byte(data))
	if err != nil || b.PolicyHash() != m.Hash {
		t.Fatalf("bundle line: %v", err)
	}
	s, _ := seal.Seal(b.Key(), "api-key", []byte("sk-test"), time.Now().Add(time.Hour), nil)
	os.WriteFile(filepath.Join(dir, "api-key.sealed"), s.Marshal(), 0o644)

	cc, err := mtls.ClientConfig(ca.SVID(t, "llm"), ca.Bundle(), m, "llm", "kms")
	if err != nil {
		t.Fatal(err)
	}
	c := kms.NewClient(&http.Client{Transport: &http.Transport{TLSClientConfig: cc}}, "https://"+ln.Addr().String(), m.Hash)
	if got, err := c.Unwrap(context.Background(), "api-key"); err != nil || string(got) != "sk-test" {
		t.Fatalf("Unwrap = %q, %v", got, err)
	}
	if err := c.Destroy(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run after destroy: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return after destroy")
	}
	// Without an operator key and a gate folder, kms says what it refuses (docs/gate.md, kms).
	if !strings.Contains(logs.String(), `"level":"WARN","msg":"no approval gate: every kms seal_to and operator order (sharness-ai export) is refused (approval_unavailable)"`) {
		t.Errorf("kms did not warn that it has no gate:\n%s", logs.String())
	}
	// Every call is in the audit log, which ends with its shutdown checkpoint.
	f, err := os.Open(filepath.Join(auditDir, audit.FileName))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var got []audit.Event
	if _, err := audit.Scan(f, &audit.Trust{CA: ca.Cert(), Policy: m.Hash, Component: "kms"}, func(e audit.Entry) { got = append(got, e.Event) }); err != nil {
		t.Fatal(err)
	}
	want := []audit.Event{
		{Action: "unwrap", Decision: "allow", Caller: "llm", Destination: "api-key"},
		{Action: "destroy", Decision: "allow", Caller: "llm"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("audit events (-want +got):\n%s", diff)
	}
}

func TestRunRefuses(t *testing.T) {
	for _, tc := range []struct {
		name, component string
		cfg             func(*config, *mtlstest.CA)
		want            string
	}{
		{"not kms", "net", nil, "is kind net, not kms"},
		{"no Workload API", "kms", func(c *config, _ *mtlstest.CA) { c.source = nil }, "missing SVID"},
		{"no audit folder", "kms", func(c *config, _ *mtlstest.CA) { c.auditDir = filepath.Join(c.auditDir, "missing") }, "refusing to start: no audit folder"},
		{"hygiene required", "kms", func(c *config, _ *mtlstest.CA) {
			c.requireHygiene, c.hygiene = true, hygiene.Report{"mlockall": "degraded: EPERM"}
		}, "-require-hygiene and degraded: mlockall"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := setup(t, tc.component)
			t.Setenv(mtls.EnvEndpointSocket, "")
			ca := mtlstest.NewCA(t, m.TrustDomain)
			ln, _ := net.Listen("tcp", "127.0.0.1:0")
			defer ln.Close()
			cfg := config{policyDir: fixture, secretsDir: t.TempDir(), auditDir: t.TempDir(), source: testIdentity{ca.SVID(t, "kms"), ca.Bundle()}, listener: ln}
			if tc.cfg != nil {
				tc.cfg(&cfg, ca)
			}
			err := run(context.Background(), cfg, slog.New(slog.NewJSONHandler(io.Discard, nil)), io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("run: %v, want %q", err, tc.want)
			}
		})
	}
}

// TestRunServesOrders: with an operator key and a gate folder, kms carries out the operator's
// signed order from that folder (no endpoint), re-sealing the secrets to the recipient, and
// records it; a forged order is refused and recorded too.
func TestRunServesOrders(t *testing.T) {
	m := setup(t, "kms")
	ca := mtlstest.NewCA(t, m.TrustDomain)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, operator, _ := ed25519.GenerateKey(nil)
	_, intruder, _ := ed25519.GenerateKey(nil)
	dir, auditDir, gateDir := t.TempDir(), t.TempDir(), t.TempDir()
	out, stdout := io.Pipe()
	cfg := config{policyDir: fixture, secretsDir: dir, auditDir: auditDir, hygiene: hygiene.Report{"mlockall": "ok"},
		source: testIdentity{ca.SVID(t, "kms"), ca.Bundle()}, listener: ln,
		gate: gate.Settings{Dir: gateDir, Operator: gate.FormatPublicKey(operator.Public().(ed25519.PublicKey))}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- run(ctx, cfg, slog.New(slog.NewJSONHandler(io.Discard, nil)), stdout) }()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	data, _ := strings.CutPrefix(strings.TrimSpace(line), seal.BundleLogPrefix)
	b, err := seal.ParseBundle([]byte(data))
	if err != nil {
		t.Fatal(err)
	}
	s, _ := seal.Seal(b.Key(), "api-key", []byte("sk-test"), time.Now().Add(time.Hour), nil)
	os.WriteFile(filepath.Join(dir, "api-key.sealed"), s.Marshal(), 0o644)
	rk, _ := seal.GenerateKey()
	to, _ := seal.NewRecipient(rk.PublicKey(), time.Now())

	place := func(key ed25519.PrivateKey) gate.Result {
		t.Helper()
		var o gate.Order
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			o, err = gate.PlaceOrder(gateDir, gate.Order{Component: "kms", Op: kms.OrderSealTo, Policy: m.Hash,
				Args: kms.SealToOrder{All: true, Recipient: to}.Args()}, key, 0)
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal(err) // kms never made its orders folder
			}
		}
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			if r, err := gate.ReadResult(gateDir, o.ID); err == nil {
				return r
			} else if time.Now().After(deadline) {
				t.Fatalf("no result: %v", err)
			}
		}
	}
	r := place(operator)
	a, err := kms.ParseOrderAnswer(r.Output)
	if !r.Done() || err != nil || len(a.Sealed) != 1 {
		t.Fatalf("order: %+v, %v", r, err)
	}
	if pt, err := seal.Open(rk, a.Sealed[0]); err != nil || string(pt) != "sk-test" {
		t.Fatalf("the re-sealed secret opens to %q, %v", pt, err)
	}
	if r := place(intruder); r.Reason != string(gate.ReasonSignature) {
		t.Errorf("forged order: %+v", r)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	f, err := os.Open(filepath.Join(auditDir, audit.FileName))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var got []audit.Event
	if _, err := audit.Scan(f, &audit.Trust{CA: ca.Cert(), Policy: m.Hash, Component: "kms"}, func(e audit.Entry) { got = append(got, e.Event) }); err != nil {
		t.Fatal(err)
	}
	want := []audit.Event{
		{Action: "seal_to", Decision: "allow", Reason: "operator order", Caller: "operator", Destination: "api-key", Fields: map[string]string{"order": r.ID, "to": to.Fingerprint()}},
		{Action: "order", Decision: "allow", Caller: "operator", Destination: "seal_to", Fields: map[string]string{"order": r.ID}},
		{Action: "order", Decision: "deny", Reason: string(gate.ReasonSignature), Caller: "operator"}, // what it asks for is unread
	}
	if len(got) == 3 {
		want[2].Fields = got[2].Fields // the forged order's id is its own
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("audit events (-want +got):\n%s", diff)
	}
}
