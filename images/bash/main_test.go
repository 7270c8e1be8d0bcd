package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sharness-ai/sharness/images/bash/sandbox"
	"github.com/sharness-ai/sharness/internal/gate"
	"github.com/sharness-ai/sharness/internal/session"
	"github.com/sharness-ai/sharness/policies/pbp"
)

// TestMain lets the test binary be its own sandbox init, as sharness-bash is.
func TestMain(m *testing.M) {
	sandbox.Init()
	os.Exit(m.Run())
}

func discard() *slog.Logger { return slog.New(slog.NewJSONHandler(io.Discard, nil)) }

func TestPolicyOf(t *testing.T) {
	both := []string{"analyse", "build"}
	bash := func(profiles *[]string, workspace string) *pbp.Component {
		return &pbp.Component{Name: "bash", Kind: pbp.KindBash, Workspace: workspace, Business: pbp.Business{Bash: &pbp.BashRules{Profiles: profiles}}}
	}
	manifest := func(c *pbp.Component, nets ...string) *pbp.Manifest {
		m := &pbp.Manifest{Components: []*pbp.Component{c, {Name: "agent", Kind: pbp.KindApp}}, Edges: []pbp.Edge{{From: "agent", To: c.Name}}}
		for _, n := range nets {
			m.Components = append(m.Components, &pbp.Component{Name: n, Kind: pbp.KindNet})
			m.Edges = append(m.Edges, pbp.Edge{From: c.Name, To: n})
		}
		return m
	}
	tests := []struct {
		name    string
		m       *pbp.Manifest
		c       *pbp.Component
		want    policy
		wantErr string
	}{
		{"default", manifest(bash(&both, "rw"), "net"), nil, policy{profiles: both, proxy: "net:3128"}, ""},
		{"net named otherwise", manifest(bash(&both, "rw"), "egress"), nil, policy{profiles: both, proxy: "egress:3128"}, ""},
		{"no net edge", manifest(bash(&both, "rw")), nil, policy{profiles: both}, ""},
		{"two nets", manifest(bash(&both, "rw"), "net", "net2"), nil, policy{}, "edges to 2 components of kind net"},
		{"not bash", manifest(&pbp.Component{Name: "llm", Kind: pbp.KindLLM, Workspace: "rw"}), nil, policy{}, "is kind llm, not bash"},
		{"no bash block", manifest(&pbp.Component{Name: "bash", Kind: pbp.KindBash, Workspace: "rw"}), nil, policy{}, "no business.bash.profiles"},
		{"no profiles", manifest(bash(nil, "rw")), nil, policy{}, "no business.bash.profiles"},
		{"empty profiles", manifest(bash(&[]string{}, "rw")), nil, policy{}, "no business.bash.profiles"},
		{"read-only workspace", manifest(bash(&both, "ro")), nil, policy{}, `files.workspace rw (build writes it), the policy says "ro"`},
		{"no workspace", manifest(bash(&both, "")), nil, policy{}, `the policy says ""`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := policyOf(tt.m, tt.m.Components[0])
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("policyOf error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(policy{})); diff != "" {
				t.Errorf("policyOf (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDefaultPolicy: the default stack's bash gets analyse, build and admin (each admin command
// waits for a person), and net's proxy.
func TestDefaultPolicy(t *testing.T) {
	m, err := pbp.Load(os.DirFS("../../policies/default"), "manifest.yaml")
	if err != nil {
		t.Fatal(err)
	}
	got, err := policyOf(m, m.Component("bash"))
	if err != nil {
		t.Fatal(err)
	}
	if want := (policy{profiles: []string{"admin", "analyse", "build"}, proxy: "net:3128"}); !cmp.Equal(want, got, cmp.AllowUnexported(policy{})) {
		t.Errorf("policyOf = %+v, want %+v", got, want)
	}
}

// TestRunRefuses: run stops, with a reason, before serving anything it cannot serve safely.
func TestRunRefuses(t *testing.T) {
	dir := "../../policies/default"
	m, err := pbp.Load(os.DirFS(dir), "manifest.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, component, hash, workspace, want string
	}{
		{"no policy hash", "bash", "", "", "no policy hash"},
		{"wrong hash", "bash", "sha256:00", "", "the supplied hash is sha256:00"},
		{"not bash", "net", m.Hash, "", "is kind net, not bash"},
		{"a workspace the sandbox would hide", "bash", m.Hash, "/tmp/ws", "which the sandbox replaces"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(session.EnvPolicyHash, tt.hash)
			t.Setenv(session.EnvPolicyKey, "")
			t.Setenv(session.EnvComponent, tt.component)
			// best effort: the refusal must come from the policy or the smoke test, not from
			// this host's kernel or uid.
			err := run(context.Background(), config{policyDir: dir, listen: "127.0.0.1:0", workspace: tt.workspace, unsafeBestEffort: true}, discard())
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("run: %v, want %q", err, tt.want)
			}
		})
	}
}

// TestRunRefusesABadGate: an operator key that does not parse, or a gate timeout that is no
// duration, stops bash at start: it never serves with a gate it cannot trust.
func TestRunRefusesABadGate(t *testing.T) {
	dir := "../../policies/default"
	m, err := pbp.Load(os.DirFS(dir), "manifest.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ws, err := os.MkdirTemp("/var/tmp", "sharness-bash-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(ws) })
	t.Setenv(session.EnvPolicyHash, m.Hash)
	t.Setenv(session.EnvPolicyKey, "")
	t.Setenv(session.EnvComponent, "bash")
	for _, s := range []gate.Settings{{Dir: t.TempDir(), Operator: "ed25519:AAAA"}, {Dir: t.TempDir(), Timeout: "soon"}} {
		err := run(context.Background(), config{policyDir: dir, listen: "127.0.0.1:0", workspace: ws, unsafeBestEffort: true, gate: s}, discard())
		if err == nil || !strings.Contains(err.Error(), "approval gate") {
			t.Errorf("run with %+v: %v, want a refusal naming the approval gate", s, err)
		}
	}
}
