//go:build e2e

package e2e

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRunClaudeCode: `sharness-ai run --offline --agent claude-code --workspace DIR -- ARGS` is the
// whole job in one command, on the real engine with the real Claude Code: it makes the workspace
// (owned by the agent's uid), starts the stack, seals a key to this session's kms, runs Claude
// Code with the arguments, prints its answer (which the offline model gives only to the sealed key,
// never to the agent's placeholder), exits with Claude Code's status, and leaves no container nor
// network of the project behind, only the audit record's volumes, which it names. A failing agent's
// status is run's: Claude Code refusing an unknown option exits 1, and so does run.
func TestRunClaudeCode(t *testing.T) {
	buildClaudeCode(t)
	root := repoRoot(t)
	m := policyHash(t, root)
	s := newStack(t) // its cleanup removes whatever a failed run left of the project
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	ws := filepath.Join(t.TempDir(), "new-workspace")
	const prompt = "hello from sharness-ai run"

	out, err := s.cli(ctx, "", "run", "-p", project, "--offline", "--agent", "claude-code", "--policy-hash", m, "--workspace", ws, "--", "-p", prompt)
	t.Logf("sharness-ai run:\n%s", out)
	if err != nil {
		t.Fatalf("sharness-ai run: %v", err)
	}
	for _, want := range []string{
		"run: log ", "run: starting the stack… done", "run: sealing the key to this session's kms… done",
		"offline model: ", "last user text: " + prompt,
		"run: the agent exited with status 0", "run: removing the stack… done", "run: kept the audit record",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("run's output lacks %q", want)
		}
	}
	if st, err := os.Stat(ws); err != nil {
		t.Errorf("the workspace was not made: %v", err)
	} else if uid := st.Sys().(*syscall.Stat_t).Uid; uid != workspaceUID {
		t.Errorf("the workspace run made belongs to uid %d, not %d", uid, workspaceUID)
	}
	left := func() string {
		c, _ := exec.CommandContext(ctx, "docker", "ps", "-aq", "--filter", "label=com.docker.compose.project="+project).Output()
		n, _ := exec.CommandContext(ctx, "docker", "network", "ls", "-q", "--filter", "label=com.docker.compose.project="+project).Output()
		return strings.TrimSpace(string(c) + string(n))
	}
	if l := left(); l != "" {
		t.Errorf("run left containers or networks of %s: %s", project, l)
	}

	out, err = s.cli(ctx, "", "run", "-p", project, "--offline", "--agent", "claude-code", "--policy-hash", m, "--workspace", ws, "--", "--no-such-option")
	var exit *exec.ExitError
	if err == nil || !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(string(out), "sharness-ai: the agent exited with status 1") {
		t.Errorf("run of a Claude Code that refuses its option: %v, want exit 1 naming the agent's status:\n%s", err, out)
	}
	if l := left(); l != "" {
		t.Errorf("the failed agent's run left containers or networks of %s: %s", project, l)
	}
}
