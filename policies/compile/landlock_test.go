package compile

import (
	"os"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/sharness-ai/sharness/policies/landlock"
	"github.com/sharness-ai/sharness/policies/pbp"
)

// TestLandlockDomains: each component of the default stack gets the domain its policy and edges
// say, in the annotation the runtime shim reads.
func TestLandlockDomains(t *testing.T) {
	m, err := pbp.Load(os.DirFS("../default"), "manifest.yaml")
	if err != nil {
		t.Fatal(err)
	}
	domain := func(name string) landlock.Domain {
		t.Helper()
		s, err := Spec(m, m.Component(name), &specs.LinuxSeccomp{DefaultAction: specs.ActErrno})
		if err != nil {
			t.Fatal(err)
		}
		d, err := landlock.Parse(s.Annotations[landlock.Annotation])
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return d
	}
	agent := domain("agent")
	if !slices.Contains(agent.Exec, "/sharness-agent") || slices.ContainsFunc(agent.Exec, func(x string) bool { return x == "/tmp" || x == "/workspace" }) {
		t.Errorf("agent exec = %v", agent.Exec)
	}
	if want := []string{"/dev/shm", "/home/claude", "/tmp", "/workspace", "/workspace/.git"}; !cmp.Equal(agent.Write, want) {
		t.Errorf("agent write = %v, want its writable mounts %v", agent.Write, want)
	}
	// The agent dials net, llm, bash and fs, and DNS; it listens on nothing.
	if want := []uint16{53, ProxyPort, MTLSProxyPort, LLMPort, BashPort, FSPort}; !cmp.Equal(agent.Connect, want) || len(agent.Bind) != 0 || agent.AnyConnect {
		t.Errorf("agent connect %v bind %v any %v; want connect %v", agent.Connect, agent.Bind, agent.AnyConnect, want)
	}
	llm := domain("llm")
	if want := []uint16{53, ProxyPort, MTLSProxyPort, LLMPort, KMSPort}; !cmp.Equal(llm.Connect, want) || !cmp.Equal(llm.Bind, []uint16{LLMPort}) {
		t.Errorf("llm connect %v bind %v", llm.Connect, llm.Bind)
	}
	if net := domain("net"); !net.AnyConnect || !cmp.Equal(net.Bind, []uint16{ProxyPort, MTLSProxyPort}) {
		t.Errorf("net: %+v; want any connect (the egress) and bind on its two ports", net)
	}
	// The gated components write their approval gate's folder (internal/gate).
	for _, name := range []string{"net", "kms"} {
		if d := domain(name); !slices.Contains(d.Write, GateDir) || !slices.Contains(d.Write, AuditDir) {
			t.Errorf("%s write = %v, want its audit and gate folders", name, d.Write)
		}
	}
	if d := domain("llm"); slices.Contains(d.Write, GateDir) {
		t.Errorf("llm write = %v: llm has no approval gate", d.Write)
	}
	if launcher := domain("launcher"); len(launcher.Write) != 8 || !slices.Contains(launcher.Write, "/run/sharness/identity/kms") ||
		!slices.Contains(launcher.Write, AuditDir) {
		t.Errorf("launcher write = %v, want every role's identity folder and its audit folder", launcher.Write)
	}
	if fs := domain("fs"); !cmp.Equal(fs.Write, []string{"/dev/shm", GateDir, AuditDir, "/workspace"}) {
		t.Errorf("fs write = %v, want its audit and gate folders and the workspace", fs.Write)
	}
	if bash := domain("bash"); bash.Mode != landlock.PerCommand || len(bash.Exec)+len(bash.Write)+len(bash.Connect) != 0 {
		t.Errorf("bash: %+v; want per_command and no rules", bash)
	}
}
