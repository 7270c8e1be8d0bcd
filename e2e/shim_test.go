//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/sharness-ai/sharness/host/shim"
)

// bundleDirs are where Docker's containerd keeps each running container's OCI bundle: Engine
// 20.10's own containerd, then a system containerd. containerdSockets are the same two
// containerds' sockets, for `ctr`.
var (
	bundleDirs = []string{
		"/run/docker/containerd/daemon/io.containerd.runtime.v2.task/moby",
		"/run/containerd/io.containerd.runtime.v2.task/moby",
	}
	containerdSockets = []string{"/run/docker/containerd/containerd.sock", "/run/containerd/containerd.sock"}
)

// envFixtures names the folder TestShimFixtures writes to (host/shim/testdata/docker-20.10).
const envFixtures = "SHARNESS_SHIM_FIXTURES"

// TestShimRunsTheStack runs the default stack with the offline world, as hack/up.sh does: every
// service of docker-compose.yml asks for runtime sharness. For each SHarness container the test
// reads the spec the engine wrote (from containerd, since the shim rewrote the bundle's copy) and
// the bundle runc ran: the engine's runtime is sharness; the engine's spec, narrowed as the shim
// narrows it, passes the shim's check against its component's compiled config.json with the
// facts of this host; and the bundle is what the shim handed runc: the process wrapped in the
// Landlock helper (bash, per_command, is not), every compiled nosuid, nodev and noexec on its
// mount, every bind source without a symbolic link. The world and the model (no marker) pass
// through to runc unchanged.
func TestShimRunsTheStack(t *testing.T) {
	requireShim(t)
	root := repoRoot(t)
	s := newStack(t, "SHARNESS_AI_POLICY_HASH="+policyHash(t, root), "SHARNESS_AI_SECRETS_DIR="+t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	ids := upStack(t, ctx, s)
	seen := map[string]bool{}
	for _, id := range ids {
		engine, bundle := containerdSpec(t, ctx, id), bundleSpec(t, id)
		rt, err := exec.CommandContext(ctx, "docker", "inspect", "-f", "{{.HostConfig.Runtime}}", id).Output()
		if err != nil {
			t.Fatalf("docker inspect %.12s: %v", id, err)
		}
		component, policy, marked := shim.Identify(engine)
		if fixture := fixtureName(engine); fixture != "" {
			// The world and the model: admitted as the test fixtures their policy lists, handed
			// to runc unchanged.
			seen["fixture"] = true
			if policy != policyHash(t, root) || fixture != "world" && fixture != "model" {
				t.Errorf("container %.12s: fixture %q of policy %q", id, fixture, policy)
			}
			if !reflect.DeepEqual(engine, bundle) {
				t.Errorf("container %.12s (fixture %s): the bundle differs from what the engine wrote", id, fixture)
			}
			continue
		}
		if !marked {
			t.Errorf("container %.12s: neither a component nor a fixture ran in the stack", id)
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
		want := compiledSpec(t, root, component)
		shim.Narrow(want, engine)
		for _, r := range shim.Check(want, engine, shim.HostFacts(id, engine)) {
			t.Errorf("%s: the shim would refuse %s: want %s, got %s", component, r.Field, r.Want, r.Got)
		}
		if wrapped := unwrap(bundle); wrapped == (component == "bash") {
			t.Errorf("%s: wrapped in the Landlock helper = %v, want %v", component, wrapped, component != "bash")
		}
		checkHandedOver(t, component, want, bundle)
	}
	for _, c := range []string{"launcher", "net", "llm", "kms", "bash", "fs", "agent", "fixture"} {
		if !seen[c] {
			t.Errorf("no running container of %s was checked", c)
		}
	}
}

// upStack starts the stack's services and a detached agent, and returns every container's id.
func upStack(t *testing.T, ctx context.Context, s *stack) []string {
	t.Helper()
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
	return strings.Fields(string(out))
}

// checkHandedOver: the bundle runc ran has each compiled nosuid, nodev and noexec on the mount at
// the same destination, and its bind sources are names without a symbolic link.
func checkHandedOver(t *testing.T, component string, want, bundle *specs.Spec) {
	t.Helper()
	flags := map[string][]string{}
	for _, m := range want.Mounts {
		for _, f := range []string{"nosuid", "nodev", "noexec"} {
			if slices.Contains(m.Options, f) {
				flags[m.Destination] = append(flags[m.Destination], f)
			}
		}
	}
	for _, m := range bundle.Mounts {
		for _, f := range flags[m.Destination] {
			if !slices.Contains(m.Options, f) {
				t.Errorf("%s: mount %s runs without %s (options %v)", component, m.Destination, f, m.Options)
			}
		}
		if m.Type != "bind" || m.Destination == shim.HelperMount {
			continue
		}
		if real, err := filepath.EvalSymlinks(m.Source); err != nil || real != m.Source {
			t.Errorf("%s: mount %s's source %s was handed to runc unresolved (%s, %v)", component, m.Destination, m.Source, real, err)
		}
	}
}

func compiledSpec(t *testing.T, root, component string) *specs.Spec {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "compose", "world", "compiled", component, "config.json")) // the world's stack
	if err != nil {
		t.Fatal(err)
	}
	want, err := shim.LoadSpec(data)
	if err != nil {
		t.Fatal(err)
	}
	return want
}

// TestShimFixtures regenerates host/shim/testdata/docker-20.10, the specs Docker 20.10 writes for
// the stack and the offline world, so that the shim's unit tests judge what the engine really
// writes: SHARNESS_SHIM_FIXTURES=$PWD/host/shim/testdata/docker-20.10 hack/e2e.sh -run
// TestShimFixtures. Every service runs under runc, so that each bundle holds the engine's spec
// unrewritten. Certificates and keys in the environment (the world's throwaway ones) are elided.
// Without the variable it is skipped.
func TestShimFixtures(t *testing.T) {
	dir := os.Getenv(envFixtures)
	if dir == "" {
		t.Skip("set " + envFixtures + "=DIR to regenerate host/shim/testdata/docker-20.10")
	}
	requireShim(t)
	root := repoRoot(t)
	s := newStack(t, "SHARNESS_AI_POLICY_HASH="+policyHash(t, root), "SHARNESS_AI_SECRETS_DIR="+t.TempDir())
	var overlay strings.Builder
	overlay.WriteString("services:\n")
	for _, svc := range []string{"launcher", "net", "llm", "kms", "bash", "fs", "agent", "world", "model"} {
		fmt.Fprintf(&overlay, "  %s:\n    runtime: runc\n", svc)
	}
	f := filepath.Join(t.TempDir(), "runc.yml")
	if err := os.WriteFile(f, []byte(overlay.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	s.files = append(s.files, f)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	pem := regexp.MustCompile(`-----BEGIN ([A-Z ]+)-----(\\n[A-Za-z0-9+/=]+)+\\n-----END `)
	for _, id := range upStack(t, ctx, s) {
		svc, err := exec.CommandContext(ctx, "docker", "inspect", "-f", `{{index .Config.Labels "com.docker.compose.service"}}`, id).Output()
		if err != nil {
			t.Fatalf("docker inspect %.12s: %v", id, err)
		}
		raw := bundleRaw(t, id)
		raw = pem.ReplaceAll(raw, []byte(`-----BEGIN $1-----\n(elided by TestShimFixtures)\n-----END `))
		var out bytes.Buffer
		if err := json.Indent(&out, raw, "", "  "); err != nil {
			t.Fatalf("container %.12s: %v", id, err)
		}
		out.WriteByte('\n')
		name := filepath.Join(dir, strings.TrimSpace(string(svc))+".json")
		if err := os.WriteFile(name, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s (container %.12s)", name, id)
	}
}

// TestShimIsTheDefaultRuntime: the engine hack/engine.sh starts has the shim as its default
// runtime, so a container that names no runtime is checked too (a widened agent is refused), an
// unmarked one that is no component passes through and the agent's image unmarked is refused;
// and, as the README says, whoever holds the Docker API can still
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
	if out, err := docker(plainImage(t), "true"); err != nil {
		t.Errorf("an unmarked container under the default runtime: %v\n%s", err, out)
	}
	// The agent's image is a component's: without its marker it is refused, not run with Docker's
	// defaults.
	if out, err := docker(agentImage, "true"); err == nil || !strings.Contains(string(out), "no SHarness component's image") {
		t.Errorf("the agent's image unmarked under the default runtime: want the shim's refusal, got (%v):\n%s", err, out)
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

// bundleSpec reads the config.json of a running container's bundle: what runc ran.
func bundleSpec(t *testing.T, id string) *specs.Spec {
	t.Helper()
	s, err := shim.LoadSpec(bundleRaw(t, id))
	if err != nil {
		t.Fatalf("container %.12s: %v", id, err)
	}
	return s
}

func bundleRaw(t *testing.T, id string) []byte {
	t.Helper()
	for _, dir := range bundleDirs {
		if data, err := os.ReadFile(filepath.Join(dir, id, "config.json")); err == nil {
			return data
		}
	}
	t.Fatalf("container %.12s: no bundle under %v", id, bundleDirs)
	return nil
}

// containerdSpec is the spec the engine gave containerd for a container, which containerd
// wrote into the bundle before the shim rewrote it there.
func containerdSpec(t *testing.T, ctx context.Context, id string) *specs.Spec {
	t.Helper()
	var errs []string
	for _, sock := range containerdSockets {
		out, err := exec.CommandContext(ctx, "ctr", "--address", sock, "--namespace", "moby", "containers", "info", id).Output()
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", sock, err))
			continue
		}
		var info struct{ Spec json.RawMessage }
		if err := json.Unmarshal(out, &info); err != nil {
			t.Fatalf("ctr containers info %.12s: %v", id, err)
		}
		s, err := shim.LoadSpec(info.Spec)
		if err != nil {
			t.Fatalf("container %.12s: the engine's spec: %v", id, err)
		}
		return s
	}
	t.Fatalf("container %.12s: ctr containers info: %v", id, errs)
	return nil
}

// TestShimRefusesWidenings runs the demo agent under sharness-runtime (registered by
// hack/engine.sh, its policies installed by `sharness-ai install`, both done by hack/e2e.sh):
// as compiled it starts; each widening of its compose service, one at a time (an overlay file
// each: the fields a list of refusals never named among them, and the Docker socket through a
// symbolic link at a listed destination), is refused before the container starts, with the
// shim's reason in `docker compose` output; so is net given an upstream proxy or an allowed
// address by environment or by flag; and an exec with more privileges, or an update above its
// limits, of the running agent is refused the same way.
func TestShimRefusesWidenings(t *testing.T) {
	requireShim(t)
	root := repoRoot(t)
	// The default (production) stack, without the world: the world's compiled stack names its
	// fixtures' images only in compose/world.yml.
	s := newStack(t, "SHARNESS_AI_POLICY_HASH="+defaultHash(t, root), "SHARNESS_AI_SECRETS_DIR="+t.TempDir())
	s.files = []string{filepath.Join(root, "docker-compose.yml")}
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
	// underShimService is the stack with one more compose file giving service override.
	underShimService := func(t *testing.T, service, override string) *stack {
		t.Helper()
		f := filepath.Join(t.TempDir(), "override.yml")
		if err := os.WriteFile(f, []byte("services:\n  "+service+":\n    runtime: sharness\n"+override), 0o644); err != nil {
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
	link, shared := socketLink(t), sharedFolder(t)
	for _, w := range []struct{ name, override, field, why string }{
		{"privileged", "    privileged: true\n", "process.capabilities", ""},
		{"cap_add", "    cap_add: [NET_ADMIN]\n", "process.capabilities", ""},
		{"network_mode-host", "    network_mode: host\n    networks: !reset {}\n", "linux.namespaces.network", ""},
		{"pid-host", "    pid: host\n", "linux.namespaces.pid", ""},
		{"docker-socket", "    volumes:\n      - /var/run/docker.sock:/var/run/docker.sock\n", "mounts[/var/run/docker.sock]", ""},
		{"read_only-false", "    read_only: false\n", "root.readonly", ""},
		{"seccomp-unconfined", "    security_opt: !override [no-new-privileges:true, seccomp=unconfined]\n", "linux.seccomp", ""},
		{"user-root", "    user: \"0:0\"\n", "process.user.uid", ""},
		// The fields a list of refusals never named (issue 16), each refused by the allowlist.
		{"sysctls", "    sysctls:\n      net.ipv4.ip_forward: \"1\"\n", "linux.sysctl[net.ipv4.ip_forward]", ""},
		{"ulimits", "    ulimits:\n      nofile: {soft: 65536, hard: 65536}\n", "process.rlimits[RLIMIT_NOFILE]", "at most"},
		{"oom_score_adj", "    oom_score_adj: -500\n", "process.oomScoreAdj", "-500"},
		{"bind-propagation-rshared", "    volumes:\n      - type: bind\n        source: " + shared + "\n        target: /workspace/.claude\n" +
			"        read_only: true\n        bind:\n          propagation: rshared\n", "mounts[/workspace/.claude]", "private propagation"},
		{"docker-socket-through-a-symlink", "    volumes:\n      - type: bind\n        source: " + link + "\n        target: /workspace/.claude\n" +
			"        read_only: true\n", "mounts[/workspace/.claude]", "docker.sock"},
		{"a-sharness-switch", "    environment:\n      SHARNESS_AI_FS_URL: http://elsewhere:8091\n", "process.env[SHARNESS_AI_FS_URL]", "http://fs:8091"},
		{"a-protected-bind-dropped", "    volumes: !override\n      - ${SHARNESS_AI_WORKSPACE}:/workspace\n", "mounts[/workspace/.git/hooks]", "missing"},
		{"cgroup_parent", "    cgroup_parent: /\n", "linux.cgroupsPath", ""},
	} {
		t.Run(w.name, func(t *testing.T) {
			out, err := runWith(t, w.override)
			if err == nil || !strings.Contains(string(out), "sharness-runtime: refused agent") || !strings.Contains(string(out), w.field) ||
				!strings.Contains(string(out), w.why) {
				t.Errorf("widening %s: want a refusal naming %s (%q), got (%v):\n%s", w.name, w.field, w.why, err, out)
			}
			for _, line := range strings.Split(string(out), "\n") {
				if strings.Contains(line, "sharness-runtime: refused") {
					t.Logf("%s", strings.TrimSpace(line))
				}
			}
			if strings.Contains(string(out), `"check":"uid"`) {
				t.Errorf("widening %s: the agent ran", w.name)
			}
		})
	}
	// A trusted component's switches, by environment or by flag: the shim refuses them before
	// net starts (so without the launcher it needs).
	for _, w := range []struct{ name, override, field string }{
		{"net-upstream-proxy-env", "    environment:\n      SHARNESS_AI_NET_UPSTREAM_PROXY: http://203.0.113.7:3128\n", "process.env[SHARNESS_AI_NET_UPSTREAM_PROXY]"},
		{"net-upstream-proxy-flag", "    command: [\"-upstream-proxy\", \"http://203.0.113.7:3128\"]\n", "process.args"},
		{"net-allowed-address-flag", "    command: [\"-unsafe-allow-addr-for-tests\", \"169.254.169.254\"]\n", "process.args"},
	} {
		t.Run(w.name, func(t *testing.T) {
			f := filepath.Join(t.TempDir(), "override.yml")
			if err := os.WriteFile(f, []byte("services:\n  net:\n    runtime: sharness\n"+w.override), 0o644); err != nil {
				t.Fatal(err)
			}
			o := *s
			o.files = append(append([]string{}, s.files...), f)
			out, err := o.run(ctx, "", "net")
			if err == nil || !strings.Contains(string(out), "sharness-runtime: refused net") || !strings.Contains(string(out), w.field) {
				t.Errorf("%s: want a refusal naming %s, got (%v):\n%s", w.name, w.field, err, out)
			}
		})
	}
	// What Docker writes into a component's /etc files from settings the spec does not carry
	// (issue 16): a line in /etc/hosts pointing a name the component reaches (net's allowlisted
	// destination, net itself for the agent) at another address, or a resolver of the caller's
	// (invisible in resolv.conf: Docker's embedded resolver forwards to it), is refused.
	for _, w := range []struct{ name, service, override, field string }{
		{"net-extra_hosts", "net", "    extra_hosts: [\"allowed.sharness.test:203.0.113.7\"]\n", "mounts[/etc/hosts]"},
		{"net-dns", "net", "    dns: [203.0.113.53]\n", "mounts[/etc/resolv.conf]"},
		{"net-dns_search", "net", "    dns_search: [evil.test]\n", "mounts[/etc/resolv.conf]"},
		{"agent-extra_hosts", "agent", "    extra_hosts: [\"net:203.0.113.7\"]\n", "mounts[/etc/hosts]"},
		{"agent-dns-reset", "agent", "    dns: !reset []\n", "mounts[/etc/resolv.conf]"},
	} {
		t.Run(w.name, func(t *testing.T) {
			out, err := underShimService(t, w.service, w.override).run(ctx, "", w.service)
			refusal := "sharness-runtime: refused " + w.service
			if err == nil || !strings.Contains(string(out), refusal) || !strings.Contains(string(out), w.field) {
				t.Errorf("%s: want a refusal naming %s, got (%v):\n%s", w.name, w.field, err, out)
			}
			logRefusals(t, out)
		})
	}
	// A policy volume whose driver options mount something else at the volume's folder: an
	// overlayfs over host folders, or a bind of one. The volume is made anew for each (an
	// earlier subtest made it as compiled).
	for _, w := range []struct{ name, volume string }{
		{"identity-volume-overlayfs", "    driver: local\n    driver_opts: {type: overlay, device: overlay, o: \"lowerdir=/etc:/usr/share\"}\n"},
		{"identity-volume-bind", "    driver: local\n    driver_opts: {type: none, o: bind, device: /etc}\n"},
	} {
		t.Run(w.name, func(t *testing.T) {
			removeVolume(t, ctx, project+"_identity-agent")
			t.Cleanup(func() { removeVolume(t, ctx, project+"_identity-agent") })
			out, err := underShim(t, "volumes:\n  identity-agent: !override\n"+w.volume).run(ctx, "", "agent")
			if err == nil || !strings.Contains(string(out), "sharness-runtime: refused agent") || !strings.Contains(string(out), "mounts[/run/sharness/identity/agent]") {
				t.Errorf("%s: want a refusal naming mounts[/run/sharness/identity/agent], got (%v):\n%s", w.name, err, out)
			}
			logRefusals(t, out)
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
		// A narrowing update passes (Docker 20.10 sends the memory fields it leaves alone as 0,
		// which runc's update leaves as they are) and takes effect.
		id, err := exec.CommandContext(ctx, "docker", "inspect", "-f", "{{.Id}}", name).Output()
		if err != nil {
			t.Fatalf("docker inspect %s: %v", name, err)
		}
		for _, u := range []struct {
			flags []string
			file  string
			want  string
		}{
			{[]string{"--pids-limit", "100"}, "/sys/fs/cgroup/pids/docker/%s/pids.max", "100"},
			{[]string{"--memory", "536870912", "--memory-swap", "536870912"}, "/sys/fs/cgroup/memory/docker/%s/memory.limit_in_bytes", "536870912"},
		} {
			out, err := exec.CommandContext(ctx, "docker", append(append([]string{"update"}, u.flags...), name)...).CombinedOutput()
			if err != nil {
				t.Errorf("docker update %v (narrower than compiled): %v\n%s", u.flags, err, out)
				continue
			}
			got, err := os.ReadFile(fmt.Sprintf(u.file, strings.TrimSpace(string(id))))
			if err != nil || strings.TrimSpace(string(got)) != u.want {
				t.Errorf("docker update %v: the cgroup holds %q (%v), want %s", u.flags, got, err, u.want)
			}
		}
		// update is policed too: a pids limit above the policy's, or none, is refused.
		for _, flags := range [][]string{{"--pids-limit", "100000"}, {"--pids-limit", "-1"}} {
			out, err := exec.CommandContext(ctx, "docker", append(append([]string{"update"}, flags...), name)...).CombinedOutput()
			if err == nil || !strings.Contains(string(out), "sharness-runtime: refused agent") {
				t.Errorf("docker update %v: want the shim's refusal, got (%v):\n%s", flags, err, out)
			}
			logRefusals(t, out)
		}
	})
	// An exec into a component runs only what its policy lists for exec, its health check: the
	// launcher turns healthy under the shim (Docker's health check is an exec), so net starts;
	// an exec of net's own binary with flags of its own (a second, wider net) is refused.
	t.Run("exec-into-a-component", func(t *testing.T) {
		if out, err := s.compose(ctx, "up", "--pull", "never", "--detach", "--wait", "--no-deps", "launcher"); err != nil {
			t.Fatalf("docker compose up launcher: %v\n%s", err, out)
		}
		// net without the world it depends on: its own start needs only the launcher.
		if out, err := s.compose(ctx, "up", "--pull", "never", "--detach", "--wait", "--no-deps", "net"); err != nil {
			t.Fatalf("docker compose up net: %v\n%s", err, out)
		}
		container := func(service string) string {
			out, err := s.compose(ctx, "ps", "--quiet", service)
			if err != nil || len(strings.Fields(string(out))) != 1 {
				t.Fatalf("docker compose ps %s: %v\n%s", service, err, out)
			}
			return strings.TrimSpace(string(out))
		}
		launcher, net := container("launcher"), container("net")
		if out, err := exec.CommandContext(ctx, "docker", "exec", launcher, "/sharness-launcher", "health").CombinedOutput(); err != nil {
			t.Errorf("docker exec launcher /sharness-launcher health (its health check): %v\n%s", err, out)
		}
		for _, args := range [][]string{
			{"/sharness-net", "-unsafe-allow-addr-for-tests", "169.254.169.254", "-listen", ":3130"},
			{"/sharness-launcher", "health", "-x"},
		} {
			target := net
			if args[0] == "/sharness-launcher" {
				target = launcher
			}
			out, err := exec.CommandContext(ctx, "docker", append([]string{"exec", target}, args...)...).CombinedOutput()
			if err == nil || !strings.Contains(string(out), "sharness-runtime: refused") || !strings.Contains(string(out), "process.args") {
				t.Errorf("docker exec %v: want the shim's refusal naming process.args, got (%v):\n%s", args, err, out)
			}
			logRefusals(t, out)
		}
	})
}

// logRefusals logs the shim's refusals in out, so that a run shows each reason.
func logRefusals(t *testing.T, out []byte) {
	t.Helper()
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "sharness-runtime: refused") {
			t.Logf("%s", strings.TrimSpace(line))
		}
	}
}

// removeVolume removes a volume, if there is one (a test that defines it anew).
func removeVolume(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	if out, err := exec.CommandContext(ctx, "docker", "volume", "rm", "-f", name).CombinedOutput(); err != nil {
		t.Logf("docker volume rm %s: %v\n%s", name, err, out)
	}
}

// socketLink is a symbolic link to the Docker socket, as a cloned repository or an edited compose
// file could name it: the engine binds what it points at.
func socketLink(t *testing.T) string {
	t.Helper()
	link := filepath.Join(t.TempDir(), "innocent")
	if err := os.Symlink("/var/run/docker.sock", link); err != nil {
		t.Fatal(err)
	}
	return link
}

// sharedFolder is a folder that is a shared mount, which Docker requires of an rshared bind's
// source (the host's / here is private); it is unmounted when the test ends.
func sharedFolder(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount(dir, dir, "", syscall.MS_BIND, ""); err != nil {
		t.Fatalf("bind %s onto itself: %v", dir, err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	if err := syscall.Mount("", dir, "", syscall.MS_SHARED, ""); err != nil {
		t.Fatalf("make %s a shared mount: %v", dir, err)
	}
	return dir
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

// fixtureName is the test fixture a spec says it is (shim.EnvFixture), "" for none.
func fixtureName(s *specs.Spec) string {
	if s.Process == nil {
		return ""
	}
	for _, e := range s.Process.Env {
		if v, ok := strings.CutPrefix(e, shim.EnvFixture+"="); ok {
			return v
		}
	}
	return ""
}
