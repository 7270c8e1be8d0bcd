//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// session records the stack's session (sharness-ai session record) as the person would before a
// `docker compose up` of their own: the policy of the stack's first compose file, its folders as
// the test's environment names them. The runtime shim refuses every component of a project
// without one (docs/architecture.md, "The runtime shim").
func (s *stack) session(ctx context.Context) error {
	if len(s.files) == 0 || s.keepSession {
		return nil
	}
	dir := filepath.Dir(s.files[0])
	manifest := filepath.Join(s.root, "policies", "default", "manifest.yaml")
	if filepath.Base(dir) == "world" {
		manifest = filepath.Join(s.root, "policies", "world", "manifest.yaml")
	}
	cmd := exec.CommandContext(ctx, sharnessAI(s.t), "session", "record", "-p", project, "--dir", dir, "-f", manifest)
	cmd.Env = s.env
	if out, err := cmd.CombinedOutput(); err != nil {
		return &exec.ExitError{ProcessState: cmd.ProcessState, Stderr: out}
	}
	return nil
}

// TestShimKnowsWhatRuns: the runtime shim knows a container by what it runs, where it is
// attached and which session it belongs to, not by what it claims (issue 16, parts 2, 3 and 5).
// Each attempt below, on the offline world's compiled stack under the shim, is refused with its
// reason in `docker compose` or `docker` output: the agent on the egress network, an edge made
// not internal, another image run as llm (one that holds a /sharness-llm of its own), the
// agent's image with its marker removed, a workspace other than the recorded one, a container
// that claims no component mounting a component's volume (by name or by its host path), the
// host's root in such a container, a fixture that lies, a fixture claim above the fixtures'
// ceiling (a capability, privileged, root, seccomp unconfined, the host's pid namespace, no
// masked paths, a device, a sysctl, another cgroup; the same claim without them starts), a proxy for llm, a container in a
// component's pid or network namespace, and the agent connected to egress after it started (cut at its next health check, within about a second). As compiled, the agent
// starts.
func TestShimKnowsWhatRuns(t *testing.T) {
	requireShim(t)
	root := repoRoot(t)
	s := newStack(t, "SHARNESS_AI_POLICY_HASH="+policyHash(t, root), "SHARNESS_AI_SECRETS_DIR="+t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	if err := s.session(ctx); err != nil {
		t.Fatalf("sharness-ai session record: %v", err)
	}
	overlay := func(t *testing.T, text string) *stack {
		t.Helper()
		f := filepath.Join(t.TempDir(), "override.yml")
		if err := os.WriteFile(f, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		o := *s
		o.files = append(append([]string{}, s.files...), f)
		return &o
	}
	refused := func(t *testing.T, out []byte, err error, who string, want ...string) {
		t.Helper()
		text := string(out)
		ok := err != nil && strings.Contains(text, "sharness-runtime: refused "+who)
		for _, w := range want {
			ok = ok && strings.Contains(text, w)
		}
		if !ok {
			t.Errorf("want a refusal of %s naming %q, got (%v):\n%s", who, want, err, text)
		}
		for _, line := range strings.Split(text, "\n") {
			if strings.Contains(line, "sharness-runtime: refused") {
				t.Logf("%s", strings.TrimSpace(line))
			}
		}
		if strings.Contains(text, `"check":"uid"`) {
			t.Errorf("the agent ran")
		}
	}
	t.Run("as-compiled-starts", func(t *testing.T) {
		out, _ := s.run(ctx, "", "agent")
		if strings.Contains(string(out), "sharness-runtime") || !strings.Contains(string(out), `"check":"uid"`) {
			t.Fatalf("the agent as compiled did not start under the shim:\n%s", out)
		}
	})
	t.Run("agent-on-egress", func(t *testing.T) {
		out, err := overlay(t, "services:\n  agent:\n    networks:\n      egress: {}\n").run(ctx, "", "agent")
		refused(t, out, err, "agent", "network["+project+"_egress]", "the compiled edges")
	})
	t.Run("another-image-as-llm", func(t *testing.T) {
		image := fakeLLMImage(t, ctx)
		out, err := overlay(t, "services:\n  llm:\n    image: "+image+"\n").run(ctx, "", "llm")
		refused(t, out, err, "llm", "code[/sharness-llm]", "as installed")
	})
	t.Run("the-agent-unmarked", func(t *testing.T) {
		// Without its marker the agent would be just a container, with Docker's defaults, on the
		// agent's networks.
		out, err := overlay(t, "services:\n  agent:\n    environment: !reset {}\n").run(ctx, "", "agent")
		refused(t, out, err, "container", "image", "no SHarness component's image", "no SHarness network")
	})
	t.Run("another-workspace", func(t *testing.T) {
		other := newWorkspace(t, root)
		env := append(append([]string{}, s.env...), "SHARNESS_AI_WORKSPACE="+other)
		o := *s
		o.env, o.keepSession = env, true // the person's session stays; compose is told another folder
		out, err := o.run(ctx, "", "agent")
		refused(t, out, err, "agent", "mounts[/workspace]", "(the session's)")
	})
	t.Run("a-component's-volume-in-another-container", func(t *testing.T) {
		// The agent's identity volume, as the runs above left it: compose made it, labelled.
		if out, err := exec.CommandContext(ctx, "docker", "volume", "inspect", "-f", "{{json .Labels}}", project+"_identity-agent").CombinedOutput(); err != nil ||
			!strings.Contains(string(out), "ai.sharness.policy") {
			t.Fatalf("no labelled volume %s_identity-agent to try (%v): %s", project, err, out)
		}
		out, err := exec.CommandContext(ctx, "docker", "run", "--rm", "--runtime", "sharness", "--network", "none",
			"-v", project+"_identity-agent:/x", "--entrypoint", "/sharness-world", "sharness/world:dev").CombinedOutput()
		refused(t, out, err, "container", "mounts[/x]", "no SHarness volume")
	})
	// The attack on the running stack (a helper without the tests): each of these got a container
	// that is no component llm's identity, its process or its network, before the shim refused it.
	t.Run("an-identity-volume-by-its-host-path", func(t *testing.T) {
		out, err := exec.CommandContext(ctx, "docker", "run", "--rm", "--network", "none",
			"-v", "/var/lib/docker/volumes/"+project+"_identity-agent/_data:/id:ro", plainImage(t), "/bin/busybox", "true").CombinedOutput()
		refused(t, out, err, "container", "mounts[/id]", "no SHarness volume")
	})
	t.Run("the-host's-root-in-a-container-that-is-no-component", func(t *testing.T) {
		out, err := exec.CommandContext(ctx, "docker", "run", "--rm", "--network", "none", "-v", "/:/host:ro", plainImage(t), "/bin/busybox", "true").CombinedOutput()
		refused(t, out, err, "container", "mounts[/host]", "no engine state")
	})
	t.Run("a-lying-fixture", func(t *testing.T) {
		out, err := exec.CommandContext(ctx, "docker", "run", "--rm", "--network", "none", "--label", "com.docker.compose.project="+project,
			"-e", "SHARNESS_AI_FIXTURE=world", "-e", "SHARNESS_AI_POLICY="+policyHash(t, root), "-v", "/srv:/host:ro", plainImage(t), "/bin/busybox", "true").CombinedOutput()
		refused(t, out, err, "fixture world", "mounts[/host]", "no host path in a test fixture")
	})
	// A fixture has no compiled spec; before its ceiling (shim.FixtureCeiling) a fixture claim
	// got any privilege its compose file or docker run asked for (an attack on the running stack).
	// Each run is otherwise as compose/world.yml runs the world, so the widening alone refuses it.
	asWorld := []string{"run", "--rm", "--network", "none", "--label", "com.docker.compose.project=" + project,
		"-e", "SHARNESS_AI_FIXTURE=world", "-e", "SHARNESS_AI_POLICY=" + policyHash(t, root),
		"--user", "65520:65520", "--read-only", "--cap-drop", "ALL", "--security-opt", "no-new-privileges:true"}
	allowAll := filepath.Join(t.TempDir(), "allow-all.json") // a profile that lets every call through
	if err := os.WriteFile(allowAll, []byte(`{"defaultAction":"SCMP_ACT_ALLOW"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Run("a-fixture-as-the-world-runs-starts", func(t *testing.T) {
		args := append(append([]string{}, asWorld...), plainImage(t), "/bin/busybox", "true")
		if out, err := exec.CommandContext(ctx, "docker", args...).CombinedOutput(); err != nil {
			t.Fatalf("a fixture with compose/world.yml's settings was refused (%v):\n%s", err, out)
		}
	})
	// docker exec --privileged (every capability) or -u 0 into a fixture within its ceiling: the
	// exec is held to the fixture's process ceiling too; a plain exec (as the model's health
	// check) runs.
	t.Run("an-exec-into-a-fixture-above-its-ceiling", func(t *testing.T) {
		name := project + "-fixture-exec"
		// A refused start leaves the created container behind, and the engine's state outlives
		// the run: remove it before and after.
		exec.Command("docker", "rm", "-f", name).Run()
		defer exec.Command("docker", "rm", "-f", name).Run()
		args := append(append([]string{"run", "-d", "--name", name}, asWorld[2:]...), plainImage(t), "/bin/busybox", "sleep", "120")
		if out, err := exec.CommandContext(ctx, "docker", args...).CombinedOutput(); err != nil {
			t.Fatalf("a fixture within its ceiling did not start (%v):\n%s", err, out)
		}
		if out, err := exec.CommandContext(ctx, "docker", "exec", name, "/bin/busybox", "true").CombinedOutput(); err != nil {
			t.Fatalf("a plain exec into the fixture was refused (%v):\n%s", err, out)
		}
		for _, e := range []struct{ flag, field string }{{"--privileged", "process.capabilities"}, {"-u0", "process.user"}} {
			out, err := exec.CommandContext(ctx, "docker", "exec", e.flag, name, "/bin/busybox", "true").CombinedOutput()
			refused(t, out, err, "fixture world", e.field)
		}
	})
	for _, w := range []struct {
		name, field string
		flags       []string
	}{
		{"a-fixture-with-a-capability", "process.capabilities", []string{"--cap-add", "NET_ADMIN"}},
		{"a-privileged-fixture", "process.capabilities", []string{"--privileged"}},
		{"a-fixture-as-root", "process.user", []string{"--user", "0:0"}},
		{"a-fixture-without-seccomp", "linux.seccomp", []string{"--security-opt", "seccomp=unconfined"}},
		{"a-fixture-with-a-seccomp-filter-that-allows", "linux.seccomp.defaultAction", []string{"--security-opt", "seccomp=" + allowAll}},
		{"a-fixture-in-the-host's-pid-namespace", "linux.namespaces.pid", []string{"--pid", "host"}},
		{"a-fixture-without-masked-paths", "linux.maskedPaths", []string{"--security-opt", "systempaths=unconfined"}},
		{"a-fixture-with-a-device", "linux.devices", []string{"--device", "/dev/zero:/dev/z"}},
		{"a-fixture-with-a-sysctl", "linux.sysctl", []string{"--sysctl", "net.ipv4.ip_forward=1"}},
		{"a-fixture-in-another-cgroup", "linux.cgroupsPath", []string{"--cgroup-parent", "/"}},
	} {
		t.Run(w.name, func(t *testing.T) {
			args := append(append(append([]string{}, asWorld...), w.flags...), plainImage(t), "/bin/busybox", "true")
			out, err := exec.CommandContext(ctx, "docker", args...).CombinedOutput()
			refused(t, out, err, "fixture world", w.field)
		})
	}
	t.Run("a-proxy-for-llm", func(t *testing.T) {
		out, err := overlay(t, "services:\n  llm:\n    environment:\n      HTTPS_PROXY: http://203.0.113.7:3128\n").run(ctx, "", "llm")
		refused(t, out, err, "llm", "process.env[HTTPS_PROXY]")
	})
	t.Run("an-edge-made-not-internal", func(t *testing.T) {
		o := overlay(t, "networks:\n  edge-agent-llm:\n    internal: false\n")
		o.down()
		defer s.down()
		out, err := o.run(ctx, "", "agent")
		refused(t, out, err, "agent", "network["+project+"_edge-agent-llm]", "an internal network")
	})
	t.Run("agent-connected-to-egress-after-it-started", func(t *testing.T) {
		s.down()
		if err := s.session(ctx); err != nil {
			t.Fatal(err)
		}
		out, err := s.compose(ctx, "run", "--detach", "--no-deps", "agent", "-idle")
		if err != nil {
			t.Fatalf("docker compose run -d agent: %v\n%s", err, out)
		}
		fields := strings.Fields(string(out))
		name := fields[len(fields)-1]
		if out, err := exec.CommandContext(ctx, "docker", "exec", name, "/bin/busybox", "true").CombinedOutput(); err != nil {
			t.Fatalf("an exec before the connect was refused: %v\n%s", err, out)
		}
		// Healthy first: its health check (an exec every second) passes through the shim.
		for began := time.Now(); ; time.Sleep(200 * time.Millisecond) {
			h, err := exec.CommandContext(ctx, "docker", "inspect", "-f", "{{.State.Health.Status}}", name).Output()
			if err == nil && strings.TrimSpace(string(h)) == "healthy" {
				break
			}
			if time.Since(began) > 30*time.Second {
				t.Fatalf("the agent did not become healthy under the shim (%v): %s", err, h)
			}
		}
		if out, err := exec.CommandContext(ctx, "docker", "network", "connect", project+"_egress", name).CombinedOutput(); err != nil {
			t.Fatalf("docker network connect: %v\n%s", err, out)
		}
		// No exec of ours: the agent's own health check (an exec every second) is where the shim
		// sees the new network, refuses and kills the container.
		connected := time.Now()
		for {
			state, err := exec.CommandContext(ctx, "docker", "inspect", "-f", "{{.State.Running}}", name).Output()
			if err == nil && strings.TrimSpace(string(state)) == "false" {
				break
			}
			if time.Since(connected) > 20*time.Second {
				t.Fatalf("the agent still runs 20 s after it was connected to egress (%v): %s", err, state)
			}
			time.Sleep(200 * time.Millisecond)
		}
		t.Logf("the agent was cut %.1f s after the connect", time.Since(connected).Seconds())
		// Killed (SIGKILL: 137), as the shim cuts it; the engine does not keep the refused exec's
		// error in the health log.
		code, err := exec.CommandContext(ctx, "docker", "inspect", "-f", "{{.State.ExitCode}}", name).Output()
		if err != nil || strings.TrimSpace(string(code)) != "137" {
			t.Errorf("the agent's exit code is %q (%v), want 137 (killed)", code, err)
		}
	})
	t.Run("a-component's-namespaces", func(t *testing.T) {
		// A container that is no component in the agent's pid namespace would see its process.
		out, err := s.compose(ctx, "run", "--detach", "--no-deps", "agent", "-idle")
		if err != nil {
			t.Fatalf("docker compose run -d agent: %v\n%s", err, out)
		}
		fields := strings.Fields(string(out))
		name := fields[len(fields)-1]
		defer exec.Command("docker", "rm", "-f", name).Run()
		out, err = exec.CommandContext(ctx, "docker", "run", "--rm", "--network", "none", "--pid", "container:"+name, plainImage(t), "/bin/busybox", "true").CombinedOutput()
		refused(t, out, err, "container", "linux.namespaces.pid", "no namespace of a SHarness container")
		// And its network namespace: the agent's edges (llm's, in the attack: the way to kms).
		out, err = exec.CommandContext(ctx, "docker", "run", "--rm", "--network", "container:"+name, plainImage(t), "/bin/busybox", "true").CombinedOutput()
		refused(t, out, err, "container", "linux.namespaces.network", "no namespace of a SHarness container")
	})
}

// fakeLLMImage builds an image that is llm's but for its entrypoint: /sharness-llm is busybox.
func fakeLLMImage(t *testing.T, ctx context.Context) string {
	t.Helper()
	dir := t.TempDir()
	busybox, err := os.ReadFile("/bin/busybox")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sharness-llm"), busybox, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM sharness/llm:dev\nCOPY sharness-llm /sharness-llm\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const image = "sharness-e2e/not-llm:dev"
	if out, err := exec.CommandContext(ctx, "docker", "build", "-q", "-t", image, dir).CombinedOutput(); err != nil {
		t.Fatalf("docker build %s: %v\n%s", image, err, out)
	}
	t.Cleanup(func() { _ = exec.Command("docker", "rmi", "-f", image).Run() })
	return image
}

// plainImage is a test tool's image that is no SHarness component: busybox FROM scratch. The
// runtime shim refuses a component's image (the agent's, say) run outside its stack, so the
// suite's control containers (a DNS or host-service probe from beside the stack) use this one.
func plainImage(t *testing.T) string {
	t.Helper()
	plainOnce.Do(func() {
		dir, err := os.MkdirTemp("", "sharness-e2e-plain-")
		if err != nil {
			plainErr = err
			return
		}
		defer os.RemoveAll(dir)
		busybox, err := os.ReadFile("/bin/busybox") // Debian's busybox-static (hack/engine.sh install)
		if err == nil {
			err = os.MkdirAll(filepath.Join(dir, "bin"), 0o755)
		}
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, "bin", "busybox"), busybox, 0o755)
		}
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM scratch\nCOPY bin/busybox /bin/busybox\n"), 0o644)
		}
		if err != nil {
			plainErr = err
			return
		}
		if out, err := exec.Command("docker", "build", "-q", "-t", plainImageName, dir).CombinedOutput(); err != nil {
			plainErr = fmt.Errorf("docker build %s: %v\n%s", plainImageName, err, out)
		}
	})
	if plainErr != nil {
		t.Fatal(plainErr)
	}
	return plainImageName
}

const plainImageName = "sharness-e2e/busybox:dev"

var (
	plainOnce sync.Once
	plainErr  error
)
