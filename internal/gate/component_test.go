package gate

import (
	"bytes"
	"context"
	"flag"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sharness-ai/sharness/policies/compile"
)

func TestDefaultDirIsTheCompilersGateDir(t *testing.T) {
	if DefaultDir != compile.GateDir {
		t.Errorf("gate.DefaultDir %q, compile.GateDir %q: the component would look where no volume is", DefaultDir, compile.GateDir)
	}
}

func TestSettingsFlags(t *testing.T) {
	env := map[string]string{EnvDir: "/gate", EnvOperator: "ed25519:x"}
	var s Settings
	f := flag.NewFlagSet("test", flag.ContinueOnError)
	s.Flags(f, func(k string) string { return env[k] })
	if err := f.Parse([]string{"-gate-timeout", "30s"}); err != nil {
		t.Fatal(err)
	}
	if want := (Settings{Dir: "/gate", Timeout: "30s", Operator: "ed25519:x"}); s != want {
		t.Errorf("Settings %+v, want %+v (flag over environment over default)", s, want)
	}
	s = Settings{}
	s.Flags(flag.NewFlagSet("test", flag.ContinueOnError), func(string) string { return "" })
	if s.Dir != DefaultDir || s.Timeout != DefaultWait.String() || s.Operator != "" {
		t.Errorf("defaults: %+v", s)
	}
}

// TestSettingsOpen: without a key or a folder a component has a nil Gate that refuses with
// approval_unavailable and says so at start when its policy needs one; a bad key, timeout or
// folder stops it; with both it asks the operator, and the verdict names the request.
func TestSettingsOpen(t *testing.T) {
	dir := t.TempDir()
	key := FormatPublicKey(pub(operator))
	cfg := Config{Component: "bash", Policy: hash('a'), Poll: 10 * time.Millisecond}
	for _, tc := range []struct {
		name  string
		s     Settings
		needs string
		warn  string // "" for no warning
	}{
		{"no key", Settings{Dir: dir}, "the admin profile", "no operator public key"},
		{"no folder", Settings{Dir: filepath.Join(dir, "missing"), Operator: key}, "the admin profile", "no gate folder"},
		{"nothing gated", Settings{Dir: dir}, "", ""},
	} {
		var logs bytes.Buffer
		c := cfg
		c.Log = slog.New(slog.NewJSONHandler(&logs, nil))
		g, err := tc.s.Open(c, tc.needs)
		if g != nil || err != nil {
			t.Fatalf("%s: Open = %v, %v; want no gate and no error", tc.name, g, err)
		}
		if got := logs.String(); tc.warn == "" && got != "" || tc.warn != "" && (!strings.Contains(got, tc.warn) || !strings.Contains(got, "approval_unavailable")) {
			t.Errorf("%s: start-up log %q, want a warning naming %q", tc.name, got, tc.warn)
		}
		if v, err := g.Ask(context.Background(), "bash.admin", []byte("x"), "x"); v.Approved() || v.Reason() != ReasonUnavailable || err == nil {
			t.Errorf("%s: Ask on no gate = %v %s %v, want approval_unavailable", tc.name, v.Approved(), v.Reason(), err)
		}
	}
	for _, s := range []Settings{
		{Dir: dir, Operator: "ed25519:AAAA"},
		{Dir: dir, Operator: key, Timeout: "soon"},
		{Dir: dir, Operator: key, Timeout: "-1s"},
		{Dir: writeFileIn(t, dir, "a-file"), Operator: key},
	} {
		if g, err := s.Open(cfg, "x"); err == nil {
			t.Errorf("Open(%+v) = %v, want an error", s, g)
		}
	}
	g, err := Settings{Dir: dir, Operator: key, Timeout: "5s"}.Open(cfg, "the admin profile")
	if err != nil || g == nil {
		t.Fatalf("Open: %v, %v", g, err)
	}
	op := operatorOnHost(dir, Approve, ScopeOnce)
	v, err := g.Ask(context.Background(), "bash.admin", []byte("x"), "admin: x")
	d := <-op
	if !v.Approved() || err != nil || d.err != nil || v.ID() != d.req.ID || d.req.Component != "bash" || d.req.Tier != Every {
		t.Errorf("Ask: %v %s %v, id %q; the operator saw %+v, %v", v.Approved(), v.Reason(), err, v.ID(), d.req, d.err)
	}
	if v, _ := g.Ask(quickCtx(t), "bash.admin", []byte("x"), "admin: x"); v.ID() == "" || v.Reason() != ReasonTimeout {
		t.Errorf("a timed-out Ask: id %q reason %s, want the request's id and %s", v.ID(), v.Reason(), ReasonTimeout)
	}
}

func TestReasonText(t *testing.T) {
	seen := map[string]Reason{}
	for _, r := range []Reason{ReasonDenied, ReasonTimeout, ReasonUnavailable, ReasonInvalid} {
		if prev, ok := seen[r.Text()]; ok || r.Text() == "" {
			t.Errorf("%s: text %q, shared with %q", r, r.Text(), prev)
		}
		seen[r.Text()] = r
	}
}

func writeFileIn(t *testing.T, dir, name string) string {
	t.Helper()
	if err := writeTestFile(dir, name, "x"); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, name)
}
