//go:build e2e

package e2e

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sharness-ai/sharness/internal/throwawayca"
	"github.com/sharness-ai/sharness/policies/keys"
	"github.com/sharness-ai/sharness/policies/pbp"
)

// stack runs docker compose on the offline world's compiled stack (compose/world/docker-compose.yml,
// from policies/world) and the world's overlay (compose/world.yml), as hack/up.sh does, with the
// environment the person would supply.
type stack struct {
	t     *testing.T
	root  string
	env   []string
	files []string
	// keepSession: compose runs with the session already recorded, not one recorded from env
	// (a test of what the shim does when compose is given other values than the session's).
	keepSession bool
}

func newStack(t *testing.T, env ...string) *stack {
	t.Helper()
	return newStackAt(t, repoRoot(t), env...)
}

// newStackAt runs the compose files of the tree at root (a copy of the repository's, for tests
// that change the policy folder).
func newStackAt(t *testing.T, root string, env ...string) *stack {
	t.Helper()
	requireEngine(t)
	s := &stack{t: t, root: root, files: worldFiles(root)}
	for _, kv := range os.Environ() { // the test decides what the person supplies
		if !strings.HasPrefix(kv, "SHARNESS_AI_") && !strings.HasPrefix(kv, "SHARNESS_PROBE_") && !strings.HasPrefix(kv, "SHARNESS_WORLD_") {
			s.env = append(s.env, kv)
		}
	}
	// sharness-ai run by the test (s.cli) reads the world's manifest, the policy the stack runs;
	// a test's own env may name another (the last value of a key wins).
	s.env = append(s.env, "SHARNESS_AI_MANIFEST="+filepath.Join(root, "policies", "world", "manifest.yaml"))
	s.env = append(s.env, worldTLS(t)...)
	if !slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "SHARNESS_AI_WORKSPACE=") }) {
		s.env = append(s.env, "SHARNESS_AI_WORKSPACE="+newWorkspace(t, root))
	}
	s.env = append(s.env, env...)
	s.down()
	t.Cleanup(s.down)
	return s
}

// worldFiles are the compose files of the offline world's stack in the tree at root.
func worldFiles(root string) []string {
	return []string{filepath.Join(root, "compose", "world", "docker-compose.yml"), filepath.Join(root, "compose", "world.yml")}
}

// worldTLS is what testkit/worldca hands the offline world: a throwaway leaf for the test hosts and
// api.anthropic.com, and its CA.
func worldTLS(t *testing.T) []string {
	t.Helper()
	p, err := throwawayca.IssuePEM("e2e offline world CA", []string{"allowed.sharness.test", "denied.sharness.test", "api.anthropic.com"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return []string{"SHARNESS_WORLD_CA_PEM=" + p.CA, "SHARNESS_WORLD_TLS_CERT=" + p.Chain, "SHARNESS_WORLD_TLS_KEY=" + p.Key}
}

// workspaceUID is the uid the agent, bash and fs run as in the default policy (L2-workspace).
const workspaceUID = 65532

// newWorkspace makes a throwaway workspace as a person's would be: owned by the uid the agent, bash
// and fs run as, its protected paths made by `sharness-ai workspace init`, and a symlink out of the
// workspace planted in .claude/ (a repository may carry one), for fs's symlink door.
func newWorkspace(t *testing.T, root string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "workspace")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, workspaceUID, workspaceUID); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(sharnessAI(t), "workspace", "init", "--dir", dir, "-f", filepath.Join(root, "policies", "world", "manifest.yaml"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("sharness-ai workspace init: %v\n%s", err, out)
	}
	escape := filepath.Join(dir, ".claude", "escape")
	if err := os.Symlink("/etc", escape); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(escape, workspaceUID, workspaceUID); err != nil {
		t.Fatal(err)
	}
	return dir
}

func (s *stack) compose(ctx context.Context, args ...string) ([]byte, error) {
	return s.composeEnv(ctx, s.env, args...)
}

func (s *stack) composeEnv(ctx context.Context, env []string, args ...string) ([]byte, error) {
	if len(args) > 0 && args[0] != "down" { // the shim refuses every component of a project without a session
		if err := s.session(ctx); err != nil {
			return nil, err
		}
	}
	all := []string{"compose", "--ansi", "never", "-p", project}
	for _, f := range s.files {
		all = append(all, "-f", f)
	}
	cmd := exec.CommandContext(ctx, "docker", append(all, args...)...)
	cmd.Env = env
	return cmd.CombinedOutput()
}

func (s *stack) down() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// The file refuses to load without a hash, even to tear down: give a placeholder, which the
	// test's own environment overrides when it has one (the last value of a key wins).
	env := append([]string{"SHARNESS_AI_POLICY_HASH=sha256:" + strings.Repeat("0", 64)}, s.env...)
	if out, err := s.composeEnv(ctx, env, "down", "-v", "--remove-orphans", "--timeout", "5"); err != nil {
		s.t.Errorf("docker compose down: %v\n%s", err, out)
	}
}

func (s *stack) logs(service string) string {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := s.compose(ctx, "logs", "--no-log-prefix", service)
	if err != nil {
		s.t.Fatalf("docker compose logs %s: %v\n%s", service, err, out)
	}
	return string(out)
}

// requiredDoors are the side doors the probe must report, each refused for its expected reason,
// and the allowed paths, each working (docs/architecture.md, "The wall"). The probe may report more; those must
// pass too.
var requiredDoors = []string{
	"direct-tcp", "direct-udp", "dns-lookup", "dns-tunnel",
	"ip-literal", "special-range", "host-service", "icmp", "raw-socket", "ipv6",
	"sni-mismatch", "sni-missing", "disallowed-port", "redirect", "denied-host",
	"other-components", "docker-socket", "rootfs-write", "proc-sys-write", "sys-write",
	"other-identity", "ptrace", "mount", "unshare", "setns", "keyctl", "bpf", "io_uring", "userfaultfd",
	"memfd-exec", "tmp-exec", "fork-bomb", "memory-exhaustion", "landlock",
	"allowed-curl", "allowed-git",
}

// TestWall brings up the default stack around the offline world, seals a key to kms, and runs
// the agent (its self-report and its conversation with the model through llm) and the side-door
// probe inside the agent container. Every door must be refused for its reason,
// every allowed path must work, and no DNS query of the agent may reach a resolver outside it —
// not the world's, and not a resolver on the host's loopback, which is the CVE-2024-29018
// condition on Engine 20.10.
func TestWall(t *testing.T) {
	hostDNS := startDNSLogger(t, "127.0.0.1:53")
	hostDNS.selfTest(t, "127.0.0.1:53")
	port := startHostService(t)
	controlCVECondition(t, hostDNS)
	controlHostService(t, port)

	root := repoRoot(t)
	s, _ := withKey(t,
		"SHARNESS_AI_POLICY_HASH="+policyHash(t, root),
		"SHARNESS_PROBE_HOST_ADDRS="+hostAddrs(t, port, "10.213.0.1", "10.214.0.1"))
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	upOut, upErr := s.compose(ctx, "up", "--pull", "never", "--abort-on-container-exit", "--exit-code-from", "agent", "agent")
	t.Logf("docker compose up:\n%s", upOut)
	out := s.logs("agent")
	r, err := parseReport([]byte(out))
	if err != nil {
		t.Fatalf("parse the agent's report: %v\nagent output:\n%s", err, out)
	}
	recordReport(t, r)
	checkAgent(t, r)
	checkDoors(t, r)
	if upErr != nil {
		t.Errorf("docker compose up: %v (the agent's exit code is the report's verdict)", upErr)
	}

	// What the agent asked for must never have reached a resolver: the probe's names all end
	// in sharness.test.
	if leaked := hostDNS.seen("sharness.test"); len(leaked) > 0 {
		t.Errorf("the host's loopback resolver saw the agent's queries (DNS leak): %v", leaked)
	}
	world := s.logs("world")
	for _, line := range strings.Split(world, "\n") {
		if strings.Contains(line, `"dns_query"`) && !strings.Contains(line, `"from":"10.214.`) {
			t.Errorf("the world's resolver was asked by something other than net on the egress network: %s", line)
		}
		if strings.Contains(line, `"dns_query"`) && strings.Contains(line, ".t.sharness.test") {
			t.Errorf("a DNS tunnel query reached the world's resolver: %s", line)
		}
	}
	if !strings.Contains(world, "allowed.sharness.test") {
		t.Errorf("the world's resolver never saw net resolve allowed.sharness.test: the allowed path did not go through net\n%s", world)
	}
	// Under the shim, Landlock refuses a TCP port off the agent's edges before the network is
	// asked: the direct dials prove the Landlock layer here, and the pass below the network.
	for _, d := range r.doors {
		if d.Door == "direct-tcp/world" && d.Got != "EACCES" {
			t.Errorf("door %s got %q under the shim, want EACCES from Landlock", d.Door, d.Got)
		}
	}

	// The same probe with the agent under plain runc: the network alone must hold every TCP door
	// (no EACCES: nothing but the wall answers), and exactly the Landlock doors must open, which
	// proves it was Landlock that closed them above.
	t.Run("without-landlock", func(t *testing.T) {
		f := filepath.Join(t.TempDir(), "runc.yml")
		if err := os.WriteFile(f, []byte("services:\n  agent:\n    runtime: runc\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		o := *s
		o.files = append(slices.Clone(s.files), f)
		out, _ := o.run(ctx, "", "agent")
		r, err := parseReport(out)
		if err != nil {
			t.Fatalf("parse the report under runc: %v\n%s", err, out)
		}
		recordReport(t, r)
		// The workspace too: a compose bind cannot say noexec, so without the shim (its Landlock
		// domain, and the noexec it adds to the bind) a program the agent wrote there runs, also
		// through the dynamic loader.
		opened := map[string]string{"landlock/exec-unlisted": "executed", "landlock/exec-workspace": "executed",
			"landlock/connect-unlisted-port": "ECONNREFUSED", "shim/loader-workspace": "executed"}
		for _, d := range r.doors {
			want, isLandlock := opened[d.Door]
			switch {
			case isLandlock && d.Got != want:
				t.Errorf("door %s under runc: got %q, want %q (what Landlock alone refuses)", d.Door, d.Got, want)
			case isLandlock:
			case !d.OK:
				t.Errorf("door %s under runc: expected %q, got %q: %s", d.Door, d.Expected, d.Got, d.Reason)
			case d.Got == "EACCES" && (strings.HasPrefix(d.Door, "direct-tcp") || strings.HasPrefix(d.Door, "host-service")):
				t.Errorf("door %s under runc got EACCES: only the network may answer here", d.Door)
			}
		}
	})

	t.Run("record", func(t *testing.T) { checkRecord(t, s, ctx) })
}

func checkAgent(t *testing.T, r report) {
	t.Helper()
	seen := map[string]bool{}
	for _, c := range r.checks {
		seen[c.Check] = true
		if !c.OK || c.Skipped {
			t.Errorf("agent check %q: ok=%v skipped=%v, expected %q, got %q: %s", c.Check, c.OK, c.Skipped, c.Expected, c.Got, c.Reason)
		}
	}
	for _, name := range agentChecks {
		if !seen[name] {
			t.Errorf("agent check %q missing from the report", name)
		}
	}
}

func checkDoors(t *testing.T, r report) {
	t.Helper()
	seen := map[string]int{}
	for _, d := range r.doors {
		seen[doorFamily(d.Door)]++
		if !d.OK {
			t.Errorf("door %q: expected %q, got %q: %s", d.Door, d.Expected, d.Got, d.Reason)
		}
	}
	for _, name := range requiredDoors {
		if seen[name] == 0 {
			t.Errorf("door %q missing from the probe's report", name)
		}
	}
	if len(r.summaries) != 2 {
		t.Errorf("%d summaries, want the agent's and the probe's", len(r.summaries))
	}
	for _, s := range r.summaries {
		if s.Failed != 0 || s.Skipped != 0 {
			t.Errorf("summary %+v: want no failure and no skip", s)
		}
	}
}

// doorFamily is a door's name without its variant: "ip-literal/decimal" → "ip-literal".
func doorFamily(name string) string {
	family, _, _ := strings.Cut(name, "/")
	return family
}

// controlCVECondition proves the DNS detector works on this engine: a container on an internal
// network whose resolver is the host's loopback (the CVE-2024-29018 condition) gets its query
// forwarded there on Engine 20.10. Where the engine does not leak, the control says so.
func controlCVECondition(t *testing.T, hostDNS *dnsLogger) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	docker := func(args ...string) ([]byte, error) {
		return exec.CommandContext(ctx, "docker", args...).CombinedOutput()
	}
	const netName = "sharness-e2e-cve-control"
	docker("network", "rm", netName)
	if out, err := docker("network", "create", "--internal", netName); err != nil {
		t.Fatalf("create the control network: %v\n%s", err, out)
	}
	defer docker("network", "rm", netName)
	name := fmt.Sprintf("cve-control-%d.example", time.Now().UnixNano())
	docker("run", "--rm", "--network", netName, "--dns", "127.0.0.1", "--entrypoint", "/bin/busybox", plainImage(t), "nslookup", name)
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) && len(hostDNS.seen(name)) == 0 {
		time.Sleep(100 * time.Millisecond)
	}
	if len(hostDNS.seen(name)) > 0 {
		t.Logf("control: this engine forwards an internal network's DNS to the host's loopback (CVE-2024-29018 condition); the detector sees leaks")
	} else {
		t.Logf("control: this engine did not forward the control query; the stack's check below still holds")
	}
}

// controlHostService proves the host service answers from a container that is allowed to reach
// it, so the probe's failures to reach it mean something.
func controlHostService(t *testing.T, port int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "docker", "run", "--rm", "--entrypoint", "/bin/busybox", plainImage(t), "nc",
		"-w", "3", "172.17.0.1", fmt.Sprint(port)).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "host service") {
		t.Fatalf("control: a container on the default bridge cannot reach the host service at 172.17.0.1:%d (%v: %s); the probe's refusals would prove nothing", port, err, out)
	}
}

// TestLauncherRefuses: with another hash than the manifest's, or with neither a hash nor a
// pinned key, the launcher refuses, docker compose shows why, and nothing else starts.
func TestLauncherRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  []string
		want []string // in compose's or the launcher's output
	}{
		// The runtime shim refuses first: the session records the manifest's hash (TestCheckSession);
		// under runc the launcher refuses itself (internal/session's TestLoad).
		{"wrong hash", []string{"SHARNESS_AI_POLICY_HASH=sha256:" + strings.Repeat("0", 64)},
			[]string{"sharness-runtime: refused launcher", "process.env[SHARNESS_AI_POLICY_HASH]", "(the session's)"}},
		{"no hash, no key", nil, []string{"no policy hash supplied", "SHARNESS_AI_POLICY_KEY"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStack(t, tc.env...)
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			out, err := s.compose(ctx, "up", "--pull", "never", "-d", "--wait")
			if err == nil {
				t.Fatalf("docker compose up succeeded:\n%s", out)
			}
			launcher := string(out) + s.logs("launcher")
			for _, w := range tc.want {
				if !strings.Contains(launcher, w) {
					t.Errorf("compose's and the launcher's output lack %q:\n%s", w, launcher)
				}
			}
			s.requireOnlyStarted(ctx, "launcher", "world", "model")
		})
	}
}

// TestSignedPolicy: instead of the hash, the person pins a key; a manifest signed by it starts the
// stack, and one signed by another key is refused.
func TestSignedPolicy(t *testing.T) {
	root := copyRepo(t)
	m, err := pbp.Load(os.DirFS(filepath.Join(root, "policies", "world")), "manifest.yaml")
	if err != nil {
		t.Fatal(err)
	}
	pinned, signer := newKey(t), newKey(t)
	for _, tc := range []struct {
		name   string
		signBy ed25519.PrivateKey
		starts bool
	}{{"signed by the pinned key", pinned, true}, {"signed by another key", signer, false}} {
		t.Run(tc.name, func(t *testing.T) {
			sig, err := keys.Sign(m.Hash, tc.signBy)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(root, "policies", "world", "manifest.yaml.sig"), sig, 0o644); err != nil {
				t.Fatal(err)
			}
			s := newStackAt(t, root, "SHARNESS_AI_POLICY_KEY="+keys.Pin(pinned.Public().(ed25519.PublicKey)))
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			out, err := s.compose(ctx, "up", "--pull", "never", "-d", "--wait", "launcher", "net")
			switch {
			case tc.starts && err != nil:
				t.Fatalf("the signed policy did not start: %v\n%s\n%s", err, out, s.logs("launcher"))
			case tc.starts && !strings.Contains(s.logs("net"), "sharness-net serving"):
				t.Errorf("net did not accept the signed policy:\n%s", s.logs("net"))
			case !tc.starts && err == nil:
				t.Fatalf("a policy signed by another key started:\n%s", out)
			case !tc.starts && !strings.Contains(s.logs("launcher"), "not the pinned key"):
				t.Errorf("the launcher's refusal does not say the key is wrong:\n%s", s.logs("launcher"))
			}
		})
	}
}

// requireOnlyStarted fails unless only the named services ever ran.
func (s *stack) requireOnlyStarted(ctx context.Context, allowed ...string) {
	s.t.Helper()
	ps, _ := s.compose(ctx, "ps", "-a", "--format", "{{.Service}} {{.State}}")
	for _, line := range strings.Split(strings.TrimSpace(string(ps)), "\n") {
		svc, state, _ := strings.Cut(line, " ")
		if svc != "" && !slices.Contains(allowed, svc) && state != "created" {
			s.t.Errorf("service %s is %s: nothing may start when the launcher refuses", svc, state)
		}
	}
}

func newKey(t *testing.T) ed25519.PrivateKey {
	t.Helper()
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// copyRepo copies what the stack's compose files refer to into a fresh folder.
func copyRepo(t *testing.T) string {
	t.Helper()
	src, dst := repoRoot(t), t.TempDir()
	for _, p := range []string{"docker-compose.yml", "compiled", "policies/default", "compose/world", "compose/world.yml", "policies/world"} {
		if err := os.CopyFS(filepath.Join(dst, p), os.DirFS(filepath.Join(src, p))); err != nil {
			// os.CopyFS copies folders; a single file is copied by hand.
			data, rerr := os.ReadFile(filepath.Join(src, p))
			if rerr != nil {
				t.Fatalf("copy %s: %v", p, err)
			}
			os.MkdirAll(filepath.Dir(filepath.Join(dst, p)), 0o755)
			if err := os.WriteFile(filepath.Join(dst, p), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return dst
}

// TestNetFailsClosedWithoutSVID: net started without the launcher has no identity socket and
// stops with a clear message instead of serving without mutual TLS.
func TestNetFailsClosedWithoutSVID(t *testing.T) {
	s := newStack(t, "SHARNESS_AI_POLICY_HASH="+policyHash(t, repoRoot(t)))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := s.compose(ctx, "run", "--rm", "--no-deps", "net")
	if err == nil {
		t.Fatalf("net ran without its SVID:\n%s", out)
	}
	if !strings.Contains(string(out), "missing SVID") {
		t.Errorf("net's refusal does not say the SVID is missing:\n%s", out)
	}
}
