//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestOperatorUpStatusDown: `sharness-ai up --policy-hash M` brings the stack (every service but
// the agent) up under the runtime shim, with a line per image and per container as it becomes
// healthy and the one line that seals the key to the new kms, `status --json` shows every
// component running, healthy where it has a health check, under runtime sharness, and `down`
// stops it but keeps the audit and gate volumes; a wrong hash, or an --agent image the engine
// lacks, is refused before anything starts. With --agent another image runs as the agent, under
// the shim and with the agent's confinement, and doctor compares the running stack's policy with
// the supplied hash. On the running stack `audit verify` passes without --allow-running and asks
// for a missing hash by name; `status` fails an agent that exited non-zero, naming its code; and
// `down` removes a running `docker compose run` agent and the networks it holds, after which
// every log ends signed.
func TestOperatorUpStatusDown(t *testing.T) {
	root := repoRoot(t)
	// up runs docker-compose.yml, the default (production) policy, without the world.
	m := defaultHash(t, root)
	s := newStack(t, "SHARNESS_AI_SECRETS_DIR="+t.TempDir(), "SHARNESS_AI_MANIFEST="+filepath.Join(root, "policies", "default", "manifest.yaml"))
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()

	wrong := "sha256:" + strings.Repeat("0", 64)
	if out, err := s.cli(ctx, "", "up", "-p", project, "--policy-hash", wrong); err == nil || !strings.Contains(string(out), m) {
		t.Fatalf("up with another hash: %v, want a refusal naming both hashes:\n%s", err, out)
	}
	if out, _ := exec.CommandContext(ctx, "docker", "ps", "-q", "--filter", "label=com.docker.compose.project="+project).Output(); len(strings.TrimSpace(string(out))) > 0 {
		t.Fatalf("a refused up started containers: %s", out)
	}

	if out, err := s.cli(ctx, "", "up", "-p", project, "--policy-hash", m, "--agent", "sharness-e2e/no-such-agent:1"); err == nil ||
		!strings.Contains(string(out), "--agent sharness-e2e/no-such-agent:1: no such image on this engine: nothing started") {
		t.Fatalf("up with a missing agent image: %v, want a refusal naming it:\n%s", err, out)
	}
	if out, _ := exec.CommandContext(ctx, "docker", "ps", "-q", "--filter", "label=com.docker.compose.project="+project).Output(); len(strings.TrimSpace(string(out))) > 0 {
		t.Fatalf("up refused for its agent image started containers: %s", out)
	}

	// --agent: the demo agent's image under another name stands for another agent image.
	other := "sharness-e2e/other-agent:1"
	if out, err := exec.CommandContext(ctx, "docker", "tag", agentImage, other).CombinedOutput(); err != nil {
		t.Fatalf("docker tag: %v\n%s", err, out)
	}
	t.Cleanup(func() { exec.Command("docker", "rmi", other).Run() })
	upOut, err := s.cli(ctx, "", "up", "-p", project, "--policy-hash", m, "--agent", other)
	if err != nil {
		t.Fatalf("sharness-ai up: %v\n%s", err, upOut)
	}
	t.Logf("sharness-ai up:\n%s", upOut)
	for _, want := range []string{
		`(?m)^up: image ` + regexp.QuoteMeta(other) + ` \(agent\): present, sha256:[0-9a-f]{12}, [0-9.]+ MB$`,
		`(?m)^up: image sharness/launcher:dev \(launcher\): present, `,
		`(?m)^up: launcher \(\S+\): running, healthy after `,
		`(?m)^up: kms \(\S+\): running`,
		`(?m)^up: kms has a new identity this session: seal the key to it before you start the agent: sharness-ai kms bundle -p ` + project + ` --wait 30s --out /tmp/kms\.json && read -rsp 'anthropic-api-key: ' KEY && echo && printf %s "\$KEY" \| sharness-ai secret seal --to /tmp/kms\.json anthropic-api-key; unset KEY$`,
	} {
		if !regexp.MustCompile(want).Match(upOut) {
			t.Errorf("up's progress lacks %s:\n%s", want, upOut)
		}
	}
	override := regexp.MustCompile(`-f (\S+/agent\.yml) run --rm agent`).FindSubmatch(upOut)
	if override == nil {
		t.Fatalf("up --agent printed no command to start the agent:\n%s", upOut)
	}
	t.Cleanup(func() { os.RemoveAll(filepath.Dir(string(override[1]))) })

	out, err := s.cli(ctx, "", "status", "-p", project, "--json")
	if err != nil {
		t.Fatalf("sharness-ai status: %v\n%s", err, out)
	}
	var rows []struct {
		Service, State, Health, Runtime string
		Component                       bool
	}
	if err := json.Unmarshal(out, &rows); err != nil {
		t.Fatalf("status --json printed %s: %v", out, err)
	}
	running := map[string]bool{}
	for _, r := range rows {
		if r.Component && r.State == "running" && r.Runtime == "sharness" && (r.Health == "" || r.Health == "healthy") {
			running[r.Service] = true
		}
	}
	for _, c := range []string{"launcher", "net", "llm", "kms", "bash", "fs"} {
		if !running[c] {
			t.Errorf("status: %s is not running, healthy and under runtime sharness: %s", c, out)
		}
	}

	checkOtherAgent(t, s, ctx, m, string(override[1]), other)
	checkDoctorPolicy(t, s, ctx, m)
	checkVerifyRunning(t, s, ctx, m)
	checkStatusExited(t, s, ctx, m)

	// A `docker compose run` agent still running holds four edge networks: compose's own down
	// leaves it and them; sharness-ai down must not.
	runAgent(t, s, ctx, m, "sharness-e2e-run-agent", "-d", "--entrypoint", "/bin/busybox", "agent", "sleep", "600")
	downOut, err := s.cli(ctx, "", "down", "-p", project)
	if err != nil {
		t.Fatalf("sharness-ai down: %v\n%s", err, downOut)
	}
	t.Logf("sharness-ai down, with a running compose run agent:\n%s", downOut)
	for _, want := range []string{
		`(?m)^down: stopping and removing container sharness-e2e-run-agent \(service agent, running, started by docker compose run\)$`,
		`(?m)^down: ` + project + ` is down: no container nor network of it is left \(removed by their labels, as docker compose down leaves them: [^)]*sharness-e2e-run-agent`,
		`(?m)^down: kept \d+ volumes on purpose: the audit record \(` + project + `_audit-\*\) and the gate's state`,
		`(?m)^  ` + project + `_audit-launcher$`,
	} {
		if !regexp.MustCompile(want).Match(downOut) {
			t.Errorf("down's output lacks %s:\n%s", want, downOut)
		}
	}
	for _, what := range [][]string{{"ps", "-aq"}, {"network", "ls", "-q"}} {
		out, err := exec.CommandContext(ctx, "docker", append(what, "--filter", "label=com.docker.compose.project="+project)...).Output()
		if err != nil || len(strings.TrimSpace(string(out))) > 0 {
			t.Errorf("docker %v after down: %q (%v), want nothing of %s left", what, out, err, project)
		}
	}
	// The run agent stopped before the components: every log ends with its signed shutdown
	// checkpoint, and verify is strict again.
	if out, err := s.cli(ctx, "", "audit", "verify", "--project", project, "--policy-hash", m); err != nil || bytes.Contains(out, []byte("not yet checkpointed")) {
		t.Errorf("audit verify after down: %v, want every log ending signed\n%s", err, out)
	} else {
		t.Logf("sharness-ai audit verify after down:\n%s", out)
	}
	vols, err := exec.CommandContext(ctx, "docker", "volume", "ls", "--format", "{{.Name}}").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"audit-launcher", "audit-net", "audit-fs", "gate-fs"} {
		if !strings.Contains(string(vols), project+"_"+v+"\n") {
			t.Errorf("volume %s_%s is gone after down: the record must outlive the stack", project, v)
		}
	}
}

// checkOtherAgent starts the agent with the compose file `up --agent` wrote, as up says to: the
// container runs the other image, under runtime sharness, and the demo agent's report in it shows
// the agent's confinement (its model checks may fail: no key is sealed here).
func checkOtherAgent(t *testing.T, s *stack, ctx context.Context, m, override, image string) {
	t.Helper()
	const name = "sharness-e2e-other-agent"
	exec.Command("docker", "rm", "-f", name).Run()
	t.Cleanup(func() { exec.Command("docker", "rm", "-f", name).Run() })
	cmd := exec.CommandContext(ctx, "docker", "compose", "--ansi", "never", "-p", project, "-f", "docker-compose.yml", "-f", override,
		"run", "--name", name, "--no-deps", "-T", "agent")
	cmd.Env, cmd.Dir = append(append([]string{}, s.env...), "SHARNESS_AI_POLICY_HASH="+m), s.root
	out, _ := cmd.CombinedOutput() // the exit status is the report's verdict, the model's checks included
	got, err := exec.CommandContext(ctx, "docker", "inspect", "-f", "{{.Config.Image}} {{.HostConfig.Runtime}}", name).Output()
	if err != nil || strings.TrimSpace(string(got)) != image+" sharness" {
		t.Fatalf("the agent container: %q (%v), want image %s under runtime sharness\n%s", got, err, image, out)
	}
	r, err := parseReport(out)
	if err != nil {
		t.Fatalf("the other agent's report: %v\n%s", err, out)
	}
	recordReport(t, r)
	seen := map[string]bool{}
	for _, c := range r.checks {
		seen[c.Check] = c.OK && !c.Skipped
	}
	for _, c := range []string{"uid", "gid", "cap_eff", "no_new_privs", "seccomp", "rootfs_read_only", "tmp_writable", "io_uring_setup", "unshare_newuser"} {
		if !seen[c] {
			t.Errorf("check %s did not pass in the agent run from %s: the agent's confinement changed\n%s", c, override, out)
		}
	}
}

// checkDoctorPolicy: doctor's policy line says ok for the running stack's hash, fail for another,
// and degraded when none is supplied.
func checkDoctorPolicy(t *testing.T, s *stack, ctx context.Context, m string) {
	t.Helper()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--policy-hash", m}, "ok"},
		{[]string{"--policy-hash", "sha256:" + strings.Repeat("0", 64)}, "fail"},
		{nil, "degraded"},
	} {
		// stdout alone: a failed check also prints its one-line summary on stderr.
		cmd := exec.CommandContext(ctx, sharnessAI(t), append([]string{"doctor", "--json", "-p", project}, tc.args...)...)
		cmd.Env, cmd.Dir = s.env, s.root
		out, err := cmd.Output()
		if code := cmd.ProcessState.ExitCode(); (tc.want == "fail") != (code == 1) {
			t.Errorf("doctor %v: exit %d (%v), want 1 exactly when the policy check fails", tc.args, code, err)
		}
		var rep struct {
			Checks []struct{ Name, Status, Detail string } `json:"checks"`
		}
		if err := json.Unmarshal(out, &rep); err != nil {
			t.Fatalf("sharness-ai doctor --json: %v\n%s", err, out)
		}
		var got, detail string
		for _, c := range rep.Checks {
			if c.Name == "policy" {
				got, detail = c.Status, c.Detail
			}
		}
		if got != tc.want {
			t.Errorf("doctor %v: policy %q (%s), want %s", tc.args, got, detail, tc.want)
		}
	}
}

// runAgent runs the agent service with `docker compose run --name name --no-deps -T args...`, as
// a person starts it, and returns its output and error; the container is removed at the end of
// the test whatever happens.
func runAgent(t *testing.T, s *stack, ctx context.Context, m, name string, args ...string) ([]byte, error) {
	t.Helper()
	exec.Command("docker", "rm", "-f", name).Run()
	t.Cleanup(func() { exec.Command("docker", "rm", "-f", name).Run() })
	cmd := exec.CommandContext(ctx, "docker", append([]string{"compose", "--ansi", "never", "-p", project, "-f", "docker-compose.yml",
		"run", "--name", name, "--no-deps", "-T"}, args...)...)
	cmd.Env, cmd.Dir = append(append([]string{}, s.env...), "SHARNESS_AI_POLICY_HASH="+m), s.root
	return cmd.CombinedOutput()
}

// checkVerifyRunning: `audit verify --project` on the running stack, without --allow-running,
// verifies every component's log up to its last signed checkpoint (exit 0, an unsigned tail
// reported as not yet checkpointed); --allow-running is still accepted; without a hash, the hash
// is asked for by name.
func checkVerifyRunning(t *testing.T, s *stack, ctx context.Context, m string) {
	t.Helper()
	out, err := s.cli(ctx, "", "audit", "verify", "--project", project)
	if err == nil || !bytes.Contains(out, []byte("no policy hash to verify the logs against: give --policy-hash sha256:<hex> or set SHARNESS_AI_POLICY_HASH")) || bytes.Contains(out, []byte(`policy hash ""`)) {
		t.Errorf("audit verify without a hash: %v, want the hash asked for by name\n%s", err, out)
	}
	for _, extra := range [][]string{nil, {"--allow-running"}} {
		out, err := s.cli(ctx, "", append([]string{"audit", "verify", "--project", project, "--policy-hash", m}, extra...)...)
		if err != nil {
			t.Errorf("audit verify %v of the running stack: %v\n%s", extra, err, out)
			continue
		}
		t.Logf("sharness-ai audit verify %v of the running stack:\n%s", extra, out)
		for _, c := range recordComponents {
			if !regexp.MustCompile(`(?m)^ok: \S+/` + project + `_audit-` + c + `/_data/audit\.jsonl: ` + c + `, `).Match(out) {
				t.Errorf("audit verify %v: no ok line for %s:\n%s", extra, c, out)
			}
		}
	}
}

// checkStatusExited: an agent that exited 3 makes status fail, naming the code (exit 1).
func checkStatusExited(t *testing.T, s *stack, ctx context.Context, m string) {
	t.Helper()
	if out, err := runAgent(t, s, ctx, m, "sharness-e2e-exit-3", "--entrypoint", "/bin/busybox", "agent", "sh", "-c", "exit 3"); err == nil {
		t.Fatalf("the agent that exits 3 exited 0:\n%s", out)
	}
	cmd := exec.CommandContext(ctx, sharnessAI(t), "status", "-p", project)
	cmd.Env, cmd.Dir = s.env, s.root
	out, _ := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); code != 1 ||
		!regexp.MustCompile(`(?m)^agent +exited \(3\) +- +sharness +FAIL: exited with code 3$`).Match(out) ||
		!bytes.Contains(out, []byte("agent (exited with code 3)")) {
		t.Errorf("status with an agent that exited 3: exit %d, want 1 naming the code\n%s", code, out)
	}
	t.Logf("sharness-ai status with an agent that exited 3:\n%s", out)
}
