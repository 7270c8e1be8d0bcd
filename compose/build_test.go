package compose

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
	"github.com/google/go-cmp/cmp"
	"github.com/sirupsen/logrus"

	"github.com/sharness-ai/sharness/policies/compile"
	"github.com/sharness-ai/sharness/policies/pbp"
)

// fullOpts renders the full fixture as if the compose file stood at the repository's root.
var fullOpts = Options{PolicyDir: "./policies/testdata/full"}

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

func loadFixture(t testing.TB, dir string) *pbp.Manifest {
	t.Helper()
	m, err := pbp.Load(os.DirFS(dir), "manifest.yaml")
	if err != nil {
		t.Fatalf("load %s: %v", dir, err)
	}
	return m
}

// TestGolden proves the full fixture compiles to exactly the committed bytes; regenerate on
// purpose with go test ./compose -update.
func TestGolden(t *testing.T) {
	files, err := Build(loadFixture(t, "../policies/testdata/full"), fullOpts)
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "golden", "full")
	if *update {
		if err := os.RemoveAll(golden); err != nil {
			t.Fatal(err)
		}
		for p, b := range files {
			f := filepath.Join(golden, filepath.FromSlash(p))
			if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(f, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	var onDisk []string
	err = filepath.WalkDir(golden, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(golden, p)
			onDisk = append(onDisk, filepath.ToSlash(rel))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(onDisk)
	if diff := cmp.Diff(files.Paths(), onDisk); diff != "" {
		t.Fatalf("golden file set differs (-compiled +golden):\n%s", diff)
	}
	for _, p := range files.Paths() {
		want, _ := os.ReadFile(filepath.Join(golden, filepath.FromSlash(p)))
		if diff := cmp.Diff(string(want), string(files[p])); diff != "" {
			t.Errorf("%s differs from golden (-golden +compiled):\n%s", p, diff)
		}
	}
}

func TestDeterministic(t *testing.T) {
	m := loadFixture(t, "../policies/testdata/full")
	a, err := Build(m, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		m2 := loadFixture(t, "../policies/testdata/full")
		b, err := Build(m2, Options{})
		if err != nil {
			t.Fatal(err)
		}
		for p := range a {
			if !bytes.Equal(a[p], b[p]) {
				t.Fatalf("run %d: %s differs between two compiles of the same manifest", i, p)
			}
		}
	}
}

// loadCompose loads a rendered compose file with compose-go's own loader, the one docker compose
// uses, and fails on any warning it logs.
func loadCompose(t *testing.T, files compile.Artefacts) *types.Project {
	t.Helper()
	dir := t.TempDir()
	for p, b := range files {
		f := filepath.Join(dir, filepath.FromSlash(p))
		os.MkdirAll(filepath.Dir(f), 0o755)
		if err := os.WriteFile(f, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var logs bytes.Buffer
	logrus.SetOutput(&logs)
	logrus.SetLevel(logrus.WarnLevel)
	t.Cleanup(func() { logrus.SetOutput(os.Stderr) })
	opts, err := cli.NewProjectOptions([]string{filepath.Join(dir, File)}, cli.WithWorkingDirectory(dir), cli.WithConsistency(true),
		cli.WithEnv([]string{"SHARNESS_AI_POLICY_HASH=sha256:0000000000000000000000000000000000000000000000000000000000000000"}))
	if err != nil {
		t.Fatal(err)
	}
	p, err := opts.LoadProject(context.Background())
	if err != nil {
		t.Fatalf("compose-go refuses the rendered file: %v", err)
	}
	if logs.Len() > 0 {
		t.Fatalf("compose-go warned while loading the rendered file:\n%s", logs.String())
	}
	return p
}

func TestComposeLoadsAndKeepsThePolicy(t *testing.T) {
	m := loadFixture(t, "../policies/testdata/full")
	opt := fullOpts
	opt.Runtime = "sharness"
	files, err := Build(m, opt)
	if err != nil {
		t.Fatal(err)
	}
	p := loadCompose(t, files)
	if got, want := len(p.Services), len(m.Components); got != want {
		t.Fatalf("services: got %d, want %d", got, want)
	}
	for _, c := range m.Components {
		s := p.Services[c.Name]
		checks := []struct {
			what string
			ok   bool
		}{
			{"read_only", s.ReadOnly},
			{"cap_drop ALL", slices.Equal(s.CapDrop, []string{"ALL"})},
			{"cap_add = policy", slices.Equal(s.CapAdd, c.Capabilities) || len(s.CapAdd)+len(c.Capabilities) == 0},
			{"no-new-privileges", slices.Contains(s.SecurityOpt, "no-new-privileges:true")},
			{"seccomp profile", slices.ContainsFunc(s.SecurityOpt, func(o string) bool {
				return strings.HasPrefix(o, "seccomp=") && strings.HasSuffix(o, c.Name+"/seccomp.json")
			})},
			{"non-root user", s.User != "" && !strings.HasPrefix(s.User, "0:") && s.User != "0"},
			{"pids limit", s.PidsLimit == c.MaxPIDs},
			{"memory limit", int64(s.MemLimit) == c.MaxMemory && s.MemSwapLimit == s.MemLimit},
			{"not privileged", !s.Privileged},
			{"no host namespaces", s.Pid == "" && s.Ipc == "" && s.NetworkMode != "host" && s.UserNSMode == ""},
			{"no devices", len(s.Devices) == 0},
			{"runtime sharness", s.Runtime == "sharness"},
			{"init process", s.Init != nil && *s.Init},
			{"labels", s.Labels[LabelComponent] == c.Name && s.Labels[LabelPolicy] == m.Hash},
			{"ping sockets closed", s.Sysctls["net.ipv4.ping_group_range"] == "1 0"},
			{"egress only for net", (s.Networks[EgressNetwork] != nil || hasKey(s.Networks, EgressNetwork)) == (c.Kind == pbp.KindNet)},
		}
		for _, ch := range checks {
			if !ch.ok {
				t.Errorf("service %s: %s does not hold", c.Name, ch.what)
			}
		}
		for _, tm := range s.Tmpfs {
			if !strings.Contains(tm, "size=") {
				t.Errorf("service %s: tmpfs %q has no size", c.Name, tm)
			}
		}
		if c.Kind != pbp.KindLauncher && p.Services[c.Name].DependsOn["launcher"].Condition != types.ServiceConditionHealthy {
			t.Errorf("service %s does not wait for a healthy launcher", c.Name)
		}
	}
	for name, n := range p.Networks {
		if name == EgressNetwork || name == "default" {
			continue
		}
		if !n.Internal || n.DriverOpts["com.docker.network.bridge.inhibit_ipv4"] != "true" {
			t.Errorf("network %s: internal=%v inhibit_ipv4=%q, want an internal network without a host-side address", name, n.Internal, n.DriverOpts["com.docker.network.bridge.inhibit_ipv4"])
		}
	}
	if got := len(p.Networks); got != len(m.Edges)+1 {
		t.Errorf("networks: got %d, want one per edge (%d) plus egress", got, len(m.Edges))
	}
	// Gate volumes: each gated kind mounts its own, with the operator's key; no other service
	// mounts any, so the agent reaches no approval (internal/gate).
	gated := map[pbp.Kind]bool{pbp.KindFS: true, pbp.KindBash: true, pbp.KindNet: true, pbp.KindKMS: true}
	for _, c := range m.Components {
		s := p.Services[c.Name]
		var gates []string
		for _, v := range s.Volumes {
			if strings.HasPrefix(v.Source, "gate-") || v.Target == compile.GateDir {
				gates = append(gates, v.Source+":"+v.Target)
			}
		}
		_, key := s.Environment["SHARNESS_AI_OPERATOR_PUBKEY"]
		if want := []string{"gate-" + c.Name + ":" + compile.GateDir}; gated[c.Kind] && (!slices.Equal(gates, want) || !key) {
			t.Errorf("service %s mounts %v (operator key %v), want %v and the key", c.Name, gates, key, want)
		} else if !gated[c.Kind] && (len(gates) > 0 || key) {
			t.Errorf("service %s mounts %v (operator key %v): only gated kinds have a gate", c.Name, gates, key)
		}
	}
	// Identity volumes: each role's own, and only the launcher mounts another's.
	for _, c := range m.Components {
		for _, v := range p.Services[c.Name].Volumes {
			if strings.HasPrefix(v.Source, "identity-") && v.Source != "identity-"+c.Name && c.Kind != pbp.KindLauncher {
				t.Errorf("service %s mounts %s, another role's identity volume", c.Name, v.Source)
			}
		}
	}
}

func hasKey[M ~map[string]V, V any](m M, k string) bool { _, ok := m[k]; return ok }

// TestDefaultStackNetworks: in the default stack the launcher has no network at all, the agent
// only its edges to net and llm, kms only its edge from llm, and net alone the egress network.
func TestDefaultStackNetworks(t *testing.T) {
	files, err := Build(loadFixture(t, "../policies/default"), Options{PolicyDir: "./policies/default"})
	if err != nil {
		t.Fatal(err)
	}
	p := loadCompose(t, files)
	if got := p.Services["launcher"].NetworkMode; got != "none" {
		t.Errorf("launcher network_mode: got %q, want none", got)
	}
	for name, svc := range p.Services {
		// Only net resolves names, and only it reaches a resolver (CVE-2024-29018).
		wantDNS := []string{NoDNS}
		if name == "net" || svc.NetworkMode == "none" {
			wantDNS = nil
		}
		if !slices.Equal([]string(svc.DNS), wantDNS) {
			t.Errorf("%s dns: got %v, want %v", name, svc.DNS, wantDNS)
		}
	}
	want := map[string][]string{
		"agent": {"edge-agent-bash", "edge-agent-fs", "edge-agent-llm", "edge-agent-net"},
		"llm":   {"edge-agent-llm", "edge-llm-kms", "edge-llm-net"},
		"kms":   {"edge-llm-kms"},
		"net":   {"edge-agent-net", "edge-bash-net", "edge-llm-net", EgressNetwork},
		"bash":  {"edge-agent-bash", "edge-bash-net"},
		"fs":    {"edge-agent-fs"},
	}
	for svc, nets := range want {
		var got []string
		for n := range p.Services[svc].Networks {
			got = append(got, n)
		}
		slices.Sort(got)
		if !slices.Equal(got, nets) {
			t.Errorf("%s networks: got %v, want %v", svc, got, nets)
		}
	}
}

// TestSuppliedTrustComesFromTheEnvironment: the hash and the pinned key reach every container
// from the person's environment, and nothing else sets them.
func TestSuppliedTrustComesFromTheEnvironment(t *testing.T) {
	files, err := Build(loadFixture(t, "../policies/testdata/full"), fullOpts)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, File), files[File], 0o644)
	opts, err := cli.NewProjectOptions([]string{filepath.Join(dir, File)}, cli.WithWorkingDirectory(dir),
		cli.WithEnv([]string{"SHARNESS_AI_POLICY_KEY=ed25519:k"}))
	if err != nil {
		t.Fatal(err)
	}
	p, err := opts.LoadProject(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for name, s := range p.Services {
		if h, k := s.Environment["SHARNESS_AI_POLICY_HASH"], s.Environment["SHARNESS_AI_POLICY_KEY"]; h == nil || *h != "" || k == nil || *k != "ed25519:k" {
			t.Errorf("%s: hash %v, key %v; want the environment's (empty hash, the pinned key)", name, h, k)
		}
	}
}

func TestWallSettings(t *testing.T) {
	m := loadFixture(t, "../policies/testdata/full")
	files, err := Build(m, fullOpts)
	if err != nil {
		t.Fatal(err)
	}
	p := loadCompose(t, files)
	for i, e := range m.Edges {
		want, _ := m.EdgeSubnet(i)
		n := p.Networks[EdgeNetwork(e)]
		if len(n.Ipam.Config) != 1 || n.Ipam.Config[0].Subnet != want.String() {
			t.Errorf("edge %s→%s: subnet %+v, want %s", e.From, e.To, n.Ipam.Config, want)
		}
	}
	for _, c := range m.Components {
		s := p.Services[c.Name]
		hasPolicy := slices.ContainsFunc(s.Volumes, func(v types.ServiceVolumeConfig) bool {
			return v.Type == "bind" && v.Target == PolicyMount && v.ReadOnly
		})
		if !hasPolicy {
			t.Errorf("%s: the policy folder is not mounted read-only at %s", c.Name, PolicyMount)
		}
		if c.Kind == pbp.KindLauncher {
			continue
		}
		v := p.Volumes[identityVolume(c.Name)]
		if v.DriverOpts["type"] != "tmpfs" || !strings.Contains(v.DriverOpts["o"], "mode=0750") {
			t.Errorf("%s: identity volume %+v, want an in-memory volume readable by the role's group alone", c.Name, v.DriverOpts)
		}
	}
	agent := p.Services["agent"]
	if got := agent.Environment["HTTPS_PROXY"]; got == nil || *got != "http://net:3128" {
		t.Errorf("agent HTTPS_PROXY = %v, want http://net:3128", got)
	}
	if got := p.Services["fs"].Environment["HTTPS_PROXY"]; got != nil {
		t.Errorf("fs has no edge to net but HTTPS_PROXY = %s", *got)
	}
}
