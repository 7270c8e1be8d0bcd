package main

import (
	"bufio"
	"context"
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

	"github.com/sharness-ai/sharness/internal/audit"
	"github.com/sharness-ai/sharness/internal/kms"
	"github.com/sharness-ai/sharness/internal/kms/hygiene"
	"github.com/sharness-ai/sharness/internal/mtls"
	"github.com/sharness-ai/sharness/internal/mtls/mtlstest"
	"github.com/sharness-ai/sharness/internal/seal"
	"github.com/sharness-ai/sharness/internal/session"
	"github.com/sharness-ai/sharness/policies/pbp"
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
	go func() { done <- run(context.Background(), cfg, slog.New(slog.NewJSONHandler(io.Discard, nil)), stdout) }()

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
