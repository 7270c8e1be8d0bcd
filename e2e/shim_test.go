//go:build e2e

package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/sharness-ai/sharness/host/shim"
)

// bundleDirs are where Docker's containerd keeps each running container's OCI bundle: Engine
// 20.10's own containerd, then a system containerd.
var bundleDirs = []string{
	"/run/docker/containerd/daemon/io.containerd.runtime.v2.task/moby",
	"/run/containerd/io.containerd.runtime.v2.task/moby",
}

// TestShimRunsTheStack runs the default stack with the offline world, as hack/up.sh does: every
// service of docker-compose.yml asks for runtime sharness. For each SHarness container the test
// reads the OCI bundle the engine handed the shim and the shim rewrote: the engine's runtime is
// sharness; the process is wrapped in the Landlock helper (bash, per_command, is not); and with
// the helper taken off, the shim's own check passes against the compiled config.json of its
// component. The world and the model (no marker) pass through to runc unchanged.
func TestShimRunsTheStack(t *testing.T) {
	requireShim(t)
	root := repoRoot(t)
	s := newStack(t, "SHARNESS_AI_POLICY_HASH="+policyHash(t, root), "SHARNESS_AI_SECRETS_DIR="+t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	services := []string{"launcher", "net", "llm", "kms", "bash", "fs", "world", "model"}
	if out, err := s.compose(ctx, append([]string{"up", "--pull", "never", "--detach", "--wait"}, services...)...); err != nil {
		t.Fatalf("docker compose up: %v\n%s", err, out)
	}
	if out, err := s.compose(ctx, "run", "--detach", "--no-deps", "agent", "-idle"); err != nil {
		t.Fatalf("docker compose run agent: %v\n%s", err, out)
	}
	out, err := s.compose(ctx, "ps", "--all", "--quiet")
	if err != nil {
		t.Fatalf("docker compose ps: %v\n%s", err, out)
	}
	seen := map[string]bool{}
	for _, id := range strings.Fields(string(out)) {
		got := bundleSpec(t, id)
		rt, err := exec.CommandContext(ctx, "docker", "inspect", "-f", "{{.HostConfig.Runtime}}", id).Output()
		if err != nil {
			t.Fatalf("docker inspect %.12s: %v", id, err)
		}
		component, policy, marked := shim.Identify(got)
		if !marked {
			seen["unmarked"] = true
			if unwrap(got) {
				t.Errorf("container %.12s (no marker) was wrapped in the Landlock helper", id)
			}
			continue
		}
		if component == "" || policy != policyHash(t, root) {
			t.Errorf("container %.12s: marker component %q policy %q: the shim would not know its policy", id, component, policy)
			continue
		}
		seen[component] = true
		if strings.TrimSpace(string(rt)) != "sharness" {
			t.Errorf("%s runs under runtime %q, want sharness", component, strings.TrimSpace(string(rt)))
		}
		if wrapped := unwrap(got); wrapped == (component == "bash") {
			t.Errorf("%s: wrapped in the Landlock helper = %v, want %v", component, wrapped, component != "bash")
		}
		data, err := os.ReadFile(filepath.Join(root, "compiled", component, "config.json"))
		if err != nil {
			t.Fatal(err)
		}
		want, err := shim.LoadSpec(data)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range shim.Check(want, got) {
			t.Errorf("%s: the shim would refuse %s: want %s, got %s", component, r.Field, r.Want, r.Got)
		}
	}
	for _, c := range append(services[:6], "agent", "unmarked") {
		if !seen[c] {
			t.Errorf("no running container of %s was checked", c)
		}
	}
}

// TestShimIsTheDefaultRuntime: the engine hack/engine.sh starts has the shim as its default
// runtime, so a container that names no runtime is checked too (a widened agent is refused), an
// unmarked one passes through; and, as the README says, whoever holds the Docker API can still
// name runc and run the same widened container unchecked.
func TestShimIsTheDefaultRuntime(t *testing.T) {
	requireShim(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	def, err := exec.CommandContext(ctx, "docker", "info", "--format", "{{.DefaultRuntime}}").Output()
	if err != nil || strings.TrimSpace(string(def)) != "sharness" {
		t.Fatalf("default runtime %q (%v), want sharness (hack/engine.sh starts dockerd with --default-runtime sharness)", def, err)
	}
	marker := []string{"-e", shim.EnvComponent + "=agent", "-e", shim.EnvPolicy + "=" + policyHash(t, repoRoot(t))}
	docker := func(args ...string) ([]byte, error) {
		return exec.CommandContext(ctx, "docker", append([]string{"run", "--rm", "--entrypoint", "/bin/busybox"}, args...)...).CombinedOutput()
	}
	out, err := docker(append(append([]string{"--privileged"}, marker...), agentImage, "true")...)
	if err == nil || !strings.Contains(string(out), "sharness-runtime: refused agent") {
		t.Errorf("a privileged agent with no runtime named: want the shim's refusal, got (%v):\n%s", err, out)
	}
	if out, err := docker(agentImage, "true"); err != nil {
		t.Errorf("an unmarked container under the default runtime: %v\n%s", err, out)
	}
	if out, err := docker(append(append([]string{"--runtime", "runc", "--privileged"}, marker...), agentImage, "true")...); err != nil {
		t.Errorf("the same container with --runtime runc: %v (the README says the Docker API can bypass the shim this way)\n%s", err, out)
	}
}

// unwrap undoes the shim's Landlock wrapping on a spec read back from a running container's
// bundle: the helper's mount removed and its arguments taken off, so that shim.Check sees what the
// engine asked for. It says whether the spec was wrapped.
func unwrap(s *specs.Spec) bool {
	i := slices.IndexFunc(s.Mounts, func(m specs.Mount) bool { return m.Destination == shim.HelperMount })
	if i < 0 || s.Process == nil || len(s.Process.Args) < 3 || s.Process.Args[0] != shim.HelperMount || s.Process.Args[2] != "--" {
		return false
	}
	s.Mounts = slices.Delete(s.Mounts, i, i+1)
	s.Process.Args = s.Process.Args[3:]
	return true
}

// bundleSpec reads the config.json the engine wrote for a running container.
func bundleSpec(t *testing.T, id string) *specs.Spec {
	t.Helper()
	for _, dir := range bundleDirs {
		data, err := os.ReadFile(filepath.Join(dir, id, "config.json"))
		if err != nil {
			continue
		}
		s, err := shim.LoadSpec(data)
		if err != nil {
			t.Fatalf("container %.12s: %v", id, err)
		}
		return s
	}
	t.Fatalf("container %.12s: no bundle under %v", id, bundleDirs)
	return nil
}

// TestShimRefusesWidenings runs the demo agent under sharness-runtime (registered by
// hack/engine.sh, its policies installed by `sharness-ai install`, both done by hack/e2e.sh):
// as compiled it starts; each widening of its compose service, one at a time, is refused before
// the container starts, with the shim's reason in `docker compose` output; and an exec with more
// privileges, or an update above its limits, of the running agent is refused the same way.
func TestShimRefusesWidenings(t *testing.T) {
	requireShim(t)
	root := repoRoot(t)
	s := newStack(t, "SHARNESS_AI_POLICY_HASH="+policyHash(t, root), "SHARNESS_AI_SECRETS_DIR="+t.TempDir())
	s.files = s.files[:1]
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// underShim is the stack with one more compose file: the agent under the shim, and override.
	underShim := func(t *testing.T, override string) *stack {
		t.Helper()
		f := filepath.Join(t.TempDir(), "override.yml")
		if err := os.WriteFile(f, []byte("services:\n  agent:\n    runtime: sharness\n"+override), 0o644); err != nil {
			t.Fatal(err)
		}
		o := *s
		o.files = append(append([]string{}, s.files...), f)
		return &o
	}
	runWith := func(t *testing.T, override string) ([]byte, error) {
		return underShim(t, override).run(ctx, "", "agent")
	}
	t.Run("as-compiled-starts", func(t *testing.T) {
		// Its confinement report: the first lines prove it started; without llm, bash and fs
		// here, its later checks fail, which does not matter to this test.
		out, _ := runWith(t, "")
		if strings.Contains(string(out), "sharness-runtime") || !strings.Contains(string(out), `"check":"uid"`) {
			t.Fatalf("the agent as compiled did not start under the shim:\n%s", out)
		}
	})
	for _, w := range []struct{ name, override, field string }{
		{"privileged", "    privileged: true\n", "process.capabilities"},
		{"cap_add", "    cap_add: [NET_ADMIN]\n", "process.capabilities"},
		{"network_mode-host", "    network_mode: host\n    networks: !reset {}\n", "linux.namespaces.network"},
		{"pid-host", "    pid: host\n", "linux.namespaces.pid"},
		{"docker-socket", "    volumes:\n      - /var/run/docker.sock:/var/run/docker.sock\n", "mounts[/var/run/docker.sock]"},
		{"read_only-false", "    read_only: false\n", "root.readonly"},
		{"seccomp-unconfined", "    security_opt: !override [no-new-privileges:true, seccomp=unconfined]\n", "linux.seccomp"},
		{"user-root", "    user: \"0:0\"\n", "process.user.uid"},
	} {
		t.Run(w.name, func(t *testing.T) {
			out, err := runWith(t, w.override)
			if err == nil || !strings.Contains(string(out), "sharness-runtime: refused agent") || !strings.Contains(string(out), w.field) {
				t.Errorf("widening %s: want a refusal naming %s, got (%v):\n%s", w.name, w.field, err, out)
			}
			if strings.Contains(string(out), `"check":"uid"`) {
				t.Errorf("widening %s: the agent ran", w.name)
			}
		})
	}
	t.Run("exec-and-update", func(t *testing.T) {
		out, err := underShim(t, "").compose(ctx, "run", "--detach", "--no-deps", "agent", "-idle")
		if err != nil {
			t.Fatalf("docker compose run -d agent under the shim: %v\n%s", err, out)
		}
		fields := strings.Fields(string(out))
		if len(fields) == 0 {
			t.Fatalf("docker compose run -d printed no container:\n%s", out)
		}
		name := fields[len(fields)-1]
		dockerExec := func(flags ...string) ([]byte, error) {
			args := append(append([]string{"exec"}, flags...), name, "/bin/busybox", "true")
			return exec.CommandContext(ctx, "docker", args...).CombinedOutput()
		}
		if out, err := dockerExec(); err != nil {
			t.Fatalf("a plain exec into the agent was refused: %v\n%s", err, out)
		}
		for _, extra := range [][]string{{"--privileged"}, {"--user", "0"}} {
			out, err := dockerExec(extra...)
			if err == nil || !strings.Contains(string(out), "sharness-runtime: refused agent") {
				t.Errorf("docker exec %v: want the shim's refusal, got (%v):\n%s", extra, err, out)
			}
		}
		// update is policed too: a pids limit above the policy's, or none, is refused.
		for _, flags := range [][]string{{"--pids-limit", "100000"}, {"--pids-limit", "-1"}} {
			out, err := exec.CommandContext(ctx, "docker", append(append([]string{"update"}, flags...), name)...).CombinedOutput()
			if err == nil || !strings.Contains(string(out), "sharness-runtime: refused agent") {
				t.Errorf("docker update %v: want the shim's refusal, got (%v):\n%s", flags, err, out)
			}
		}
	})
}

// requireShim fails the test, saying what to do, unless the engine has the sharness runtime and
// the default policy is installed where the shim reads it.
func requireShim(t *testing.T) {
	t.Helper()
	requireEngine(t)
	out, err := exec.Command("docker", "info", "--format", "{{json .Runtimes}}").CombinedOutput()
	if err != nil || !strings.Contains(string(out), `"sharness"`) {
		t.Fatalf("the engine has no runtime \"sharness\" (%v: %s): start it with hack/engine.sh (stop it first if it runs without), after hack/runtime.sh install", err, out)
	}
	hash := strings.TrimPrefix(policyHash(t, repoRoot(t)), "sha256:")
	if _, err := os.Stat(filepath.Join(shim.DefaultRoot, hash, "agent", "config.json")); err != nil {
		t.Fatalf("the default policy is not installed for the shim (%v): run sharness-ai install", err)
	}
}
