//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sharness-ai/sharness/policies/pbp"
)

const (
	project    = "sharness-e2e"
	agentImage = "sharness/agent:dev"
)

// agentChecks are the checks the agent must report, all passed and none skipped, in the default
// stack. The agent may report more; those must pass too.
var agentChecks = []string{
	"uid", "gid", "cap_eff", "cap_prm", "cap_bnd", "no_new_privs", "seccomp",
	"rootfs_read_only", "tmp_writable",
	"io_uring_setup", "unshare_newuser", "ptrace_traceme", "keyctl", "bpf", "userfaultfd",
	"model-tool-call", "model-tool-result", "model-refused", "model-stream",
	"shell-mcp", "fs-write",
}

type check struct {
	Check    string `json:"check"`
	Expected string `json:"expected"`
	Got      string `json:"got"`
	OK       bool   `json:"ok"`
	Skipped  bool   `json:"skipped"`
	Reason   string `json:"reason"`
}

type summary struct {
	Passed  int `json:"passed"`
	Failed  int `json:"failed"`
	Skipped int `json:"skipped"`
}

// door is one line of the side-door probe's report.
type door struct {
	Door     string `json:"door"`
	Expected string `json:"expected"`
	Got      string `json:"got"`
	OK       bool   `json:"ok"`
	Reason   string `json:"reason"`
}

// report is what the agent container printed: its own checks and summary, then the probe's
// doors and summary.
type report struct {
	checks    []check
	doors     []door
	summaries []summary
}

// parseReport reads the JSON lines of the agent container. Lines that are not JSON objects (the
// engine's or the runtime's messages) are ignored; malformed objects are errors.
func parseReport(out []byte) (report, error) {
	var r report
	scanner := bufio.NewScanner(bytes.NewReader(out))
	scanner.Buffer(make([]byte, 64<<10), 1<<20)
	for scanner.Scan() {
		line := strings.TrimSpace(scanner.Text())
		if !strings.HasPrefix(line, "{") {
			continue
		}
		var v struct {
			check
			Door    string   `json:"door"`
			Summary *summary `json:"summary"`
		}
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			return r, fmt.Errorf("line %q: %w", line, err)
		}
		switch {
		case v.Summary != nil:
			r.summaries = append(r.summaries, *v.Summary)
		case v.Door != "":
			var d door
			if err := json.Unmarshal([]byte(line), &d); err != nil {
				return r, fmt.Errorf("line %q: %w", line, err)
			}
			r.doors = append(r.doors, d)
		case v.Check != "":
			r.checks = append(r.checks, v.check)
		default:
			return r, fmt.Errorf("line %q: neither a check, a door nor a summary", line)
		}
	}
	if err := scanner.Err(); err != nil {
		return r, err
	}
	if len(r.summaries) == 0 {
		return r, errors.New("no summary line: the agent did not finish its report")
	}
	return r, nil
}

// envDoors names a file the suite appends each parsed report's doors and checks to, one JSON line
// each, so that two runs (on two engines) can be compared: hack/doors.sh diff A B.
const envDoors = "SHARNESS_E2E_DOORS"

// outcome is one line of that file: a door's or a check's result, without its free-text reason.
type outcome struct {
	Test     string `json:"test"`
	Door     string `json:"door,omitempty"`
	Check    string `json:"check,omitempty"`
	Expected string `json:"expected"`
	Got      string `json:"got"`
	OK       bool   `json:"ok"`
	Skipped  bool   `json:"skipped,omitempty"`
}

// recordReport appends r's doors and checks, under t's name, to the file $SHARNESS_E2E_DOORS
// names (nothing without it).
func recordReport(t *testing.T, r report) {
	t.Helper()
	name := os.Getenv(envDoors)
	if name == "" {
		return
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for _, d := range r.doors {
		_ = enc.Encode(outcome{Test: t.Name(), Door: d.Door, Expected: d.Expected, Got: d.Got, OK: d.OK})
	}
	for _, c := range r.checks {
		_ = enc.Encode(outcome{Test: t.Name(), Check: c.Check, Expected: c.Expected, Got: c.Got, OK: c.OK, Skipped: c.Skipped})
	}
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		t.Errorf("%s: %v", envDoors, err)
		return
	}
	if _, err := f.Write(buf.Bytes()); err != nil {
		t.Errorf("%s: %v", envDoors, err)
	}
	if err := f.Close(); err != nil {
		t.Errorf("%s: %v", envDoors, err)
	}
}

// requireEngine fails the test, naming the script that fixes it, unless the engine answers, the
// compose plugin runs and the agent image exists.
func requireEngine(t *testing.T) {
	t.Helper()
	steps := []struct {
		args []string
		fix  string
	}{
		{[]string{"info"}, "start the engine with hack/engine.sh start"},
		{[]string{"compose", "version"}, "install the compose plugin with hack/engine.sh install"},
		{[]string{"image", "inspect", agentImage}, "build the images with hack/build-images.sh"},
	}
	for _, s := range steps {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		out, err := exec.CommandContext(ctx, "docker", s.args...).CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("docker %s: %v\n%s\n%s (hack/e2e.sh does every step)", strings.Join(s.args, " "), err, bytes.TrimSpace(out), s.fix)
		}
	}
}

// repoRoot is the directory holding the module's go.mod, above the test's working directory.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's working directory")
		}
		dir = parent
	}
}

// policyHash is the hash of the offline world's manifest (policies/world: the default policy and
// its test_world section), the policy the suite's stack runs (newStack): the e2e suite plays the
// person who supplies it.
func policyHash(t *testing.T, root string) string {
	t.Helper()
	return manifestHash(t, filepath.Join(root, "policies", "world"))
}

// defaultHash is the hash of the default manifest, the production policy docker-compose.yml runs.
func defaultHash(t *testing.T, root string) string {
	t.Helper()
	return manifestHash(t, filepath.Join(root, "policies", "default"))
}

func manifestHash(t *testing.T, dir string) string {
	t.Helper()
	m, err := pbp.Load(os.DirFS(dir), "manifest.yaml")
	if err != nil {
		t.Fatalf("load %s/manifest.yaml: %v", dir, err)
	}
	return m.Hash
}

// operatorInit makes an operator key with `sharness-ai operator init`, as a person does once, and
// returns its path and the public key to give the stack (SHARNESS_AI_OPERATOR_PUBKEY).
func operatorInit(t *testing.T) (key, public string) {
	t.Helper()
	key = filepath.Join(t.TempDir(), "operator.key")
	out, err := exec.Command(sharnessAI(t), "operator", "init", "--key", key, "--json").CombinedOutput()
	if err != nil {
		t.Fatalf("sharness-ai operator init: %v\n%s", err, out)
	}
	var op struct{ Public string }
	if err := json.Unmarshal(out, &op); err != nil || !strings.HasPrefix(op.Public, "ed25519:") {
		t.Fatalf("operator init printed %s (%v)", out, err)
	}
	return key, op.Public
}

// operatorStack is the stack as a person runs it with an operator key (operatorInit): the
// supplied policy hash, a fresh workspace, an empty secrets folder, the operator's public key,
// and env on top. It returns the stack, the workspace and the operator key's path.
func operatorStack(t *testing.T, env ...string) (s *stack, ws, key string) {
	t.Helper()
	root := repoRoot(t)
	key, pub := operatorInit(t)
	ws = newWorkspace(t, root)
	s = newStack(t, append([]string{"SHARNESS_AI_POLICY_HASH=" + policyHash(t, root), "SHARNESS_AI_SECRETS_DIR=" + t.TempDir(),
		"SHARNESS_AI_WORKSPACE=" + ws, "SHARNESS_AI_OPERATOR_PUBKEY=" + pub}, env...)...)
	return s, ws, key
}

// volumeDir is the host folder of the project's volume name (p_name), root's.
func volumeDir(t *testing.T, ctx context.Context, name string) string {
	t.Helper()
	mp, err := exec.CommandContext(ctx, "docker", "volume", "inspect", "-f", "{{.Mountpoint}}", project+"_"+name).Output()
	if err != nil {
		t.Fatalf("docker volume inspect %s_%s: %v", project, name, err)
	}
	return strings.TrimSpace(string(mp))
}
