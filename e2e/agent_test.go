//go:build e2e

package e2e

import (
	"github.com/sharness-ai/sharness/policies/pbp"

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
)

const (
	project    = "sharness-e2e"
	agentImage = "sharness/agent:dev"
)

// agentChecks are the checks the agent must report, all passed and none skipped, in the default
// stack. The agent may report more; those must pass too.
var agentChecks = []string{
	"uid", "gid", "cap_eff", "cap_prm", "cap_bnd", "no_new_privs", "seccomp",
	"rootfs_read_only", "tmp_writable", "network_none",
	"io_uring_setup", "unshare_newuser", "ptrace_traceme", "keyctl", "bpf", "userfaultfd",
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

func TestDefaultStackAgentConfinement(t *testing.T) {
	root := repoRoot(t)
	composeFile := filepath.Join(root, "docker-compose.yml")
	if f := os.Getenv("SHARNESS_E2E_COMPOSE_FILE"); f != "" {
		composeFile = f
	}
	requireEngine(t)
	if _, err := os.Stat(composeFile); err != nil {
		t.Fatalf("the default stack is missing (%v): generate docker-compose.yml with the policy compiler, or point SHARNESS_E2E_COMPOSE_FILE at one", err)
	}
	override, err := filepath.Abs(filepath.Join("testdata", "expect-no-network.yml"))
	if err != nil {
		t.Fatal(err)
	}
	hash := policyHash(t, root)
	compose := func(ctx context.Context, args ...string) ([]byte, error) {
		args = append([]string{"compose", "--ansi", "never", "-f", composeFile, "-f", override, "-p", project}, args...)
		cmd := exec.CommandContext(ctx, "docker", args...)
		cmd.Env = append(os.Environ(), "SHARNESS_AI_POLICY_HASH="+hash)
		return cmd.CombinedOutput()
	}
	down := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if out, err := compose(ctx, "down", "-v", "--remove-orphans"); err != nil {
			t.Errorf("docker compose down: %v\n%s", err, out)
		}
	}
	down() // leftovers of an interrupted run
	t.Cleanup(down)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	upOut, upErr := compose(ctx, "up", "--pull", "never",
		"--abort-on-container-exit", "--exit-code-from", "agent")
	t.Logf("docker compose up:\n%s", upOut)
	logs, err := compose(ctx, "logs", "--no-log-prefix", "agent")
	if err != nil {
		t.Fatalf("docker compose logs agent: %v\n%s", err, logs)
	}
	checks, sum, err := parseReport(logs)
	if err != nil {
		t.Fatalf("parse the agent's report: %v\nagent output:\n%s", err, logs)
	}

	byName := map[string]check{}
	for _, c := range checks {
		if _, dup := byName[c.Check]; dup {
			t.Errorf("check %q reported twice", c.Check)
		}
		byName[c.Check] = c
		if !c.OK || c.Skipped {
			t.Errorf("check %q: ok=%v skipped=%v, expected %q, got %q: %s", c.Check, c.OK, c.Skipped, c.Expected, c.Got, c.Reason)
		}
	}
	for _, name := range agentChecks {
		if _, found := byName[name]; !found {
			t.Errorf("check %q missing from the agent's report", name)
		}
	}
	if want := (summary{Passed: len(checks)}); sum != want {
		t.Errorf("summary = %+v, want %+v", sum, want)
	}
	var exitErr *exec.ExitError
	switch {
	case errors.As(upErr, &exitErr):
		t.Errorf("docker compose up: the agent exited with code %d, want 0", exitErr.ExitCode())
	case upErr != nil:
		t.Errorf("docker compose up: %v", upErr)
	}
}

// parseReport reads the agent's JSON lines: checks, then one summary last. Lines that are not JSON
// objects (the engine's or the runtime's messages) are ignored; malformed objects are errors.
func parseReport(out []byte) ([]check, summary, error) {
	var (
		checks  []check
		sum     *summary
		scanner = bufio.NewScanner(bytes.NewReader(out))
	)
	for scanner.Scan() {
		line := strings.TrimSpace(scanner.Text())
		if !strings.HasPrefix(line, "{") {
			continue
		}
		var v struct {
			check
			Summary *summary `json:"summary"`
		}
		dec := json.NewDecoder(strings.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&v); err != nil {
			return nil, summary{}, fmt.Errorf("line %q: %w", line, err)
		}
		switch {
		case sum != nil:
			return nil, summary{}, fmt.Errorf("line %q after the summary", line)
		case v.Summary != nil:
			sum = v.Summary
		case v.Check == "":
			return nil, summary{}, fmt.Errorf("line %q: neither a check nor a summary", line)
		default:
			checks = append(checks, v.check)
		}
	}
	if err := scanner.Err(); err != nil {
		return nil, summary{}, err
	}
	if sum == nil {
		return nil, summary{}, errors.New("no summary line: the agent did not finish its report")
	}
	return checks, *sum, nil
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

// policyHash is the hash of the default manifest: the e2e suite plays the person who supplies it.
func policyHash(t *testing.T, root string) string {
	t.Helper()
	m, err := pbp.Load(os.DirFS(filepath.Join(root, "policies", "default")), "manifest.yaml")
	if err != nil {
		t.Fatalf("load the default manifest: %v", err)
	}
	return m.Hash
}
