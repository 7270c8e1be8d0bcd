//go:build e2e

package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// shellDoors are the bash doors sharness-shellprobe must report from the agent's seat, each
// refused for its reason or, for the allowed paths, working (issue: shell and files).
var shellDoors = []string{
	"bash/echo", "bash/analyse-network", "bash/analyse-write-workspace", "bash/build-write-workspace",
	"bash/exec-workspace", "bash/exec-tmp", "bash/reach-llm", "bash/reach-kms", "bash/reach-net-mtls",
	"bash/reach-own-server", "bash/reach-net", "bash/net-refusal-said", "bash/other-processes", "bash/signal-init", "bash/identity-socket",
	"bash/mount", "bash/unshare-user", "bash/unshare-root", "bash/setns", "bash/ptrace", "bash/write-git-hooks",
	"bash/write-claude", "bash/rename-git", "bash/planted-secret", "bash/admin-profile",
	"bash/invalid-profile", "bash/invalid-command", "bash/invalid-cwd", "bash/invalid-timeout",
	"bash/fork-bomb", "bash/runaway", "bash/output-100mb",
}

// fsDoors are fs's doors sharness-fsprobe must report from the agent's seat.
var fsDoors = []string{
	"fs/write-api", "fs/write-mcp", "fs/secret-pem", "fs/symlink-escape", "fs/dot-dot", "fs/oversized",
	"fs/ask", "fs/not-protected", "fs/delete-protected-root", "fs/exec-bit", "fs/mcp-invalid-arguments",
	"fs/direct-write-folder", "fs/direct-write-file", "fs/direct-rename-git",
}

// TestShellAndFiles brings up the stack (bash and fs with the workspace sharness-ai workspace
// init prepared) and, from the agent's container, drives bash through a real MCP client and fs
// through its API and MCP tools. Then it looks at the workspace from the host: what fs refused
// is not there, what it wrote is, without exec bits, and the planted symlink led nowhere.
func TestShellAndFiles(t *testing.T) {
	root := repoRoot(t)
	ws := newWorkspace(t, root)
	s := newStack(t, "SHARNESS_AI_POLICY_HASH="+policyHash(t, root), "SHARNESS_AI_WORKSPACE="+ws)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if out, err := s.compose(ctx, "up", "--pull", "never", "--detach", "--wait", "launcher", "net", "bash", "fs", "world"); err != nil {
		t.Fatalf("docker compose up: %v\n%s\nbash:\n%s\nfs:\n%s", err, out, s.logs("bash"), s.logs("fs"))
	}

	t.Run("bash", func(t *testing.T) {
		out, err := s.run(ctx, "", "--entrypoint", "/sharness-shellprobe", "agent")
		checkOnlyDoors(t, out, err, shellDoors)
		if t.Failed() {
			t.Logf("bash:\n%s", s.logs("bash"))
		}
	})
	t.Run("fs", func(t *testing.T) {
		out, err := s.run(ctx, "", "--entrypoint", "/sharness-fsprobe", "agent")
		checkOnlyDoors(t, out, err, fsDoors)
		if t.Failed() {
			t.Logf("fs:\n%s", s.logs("fs"))
		}
	})
	t.Run("workspace-seen-from-the-host", func(t *testing.T) {
		if _, err := os.Lstat(filepath.Join(ws, ".git", "hooks", "pre-commit")); !os.IsNotExist(err) {
			t.Errorf(".git/hooks/pre-commit exists (%v): a hook reached the workspace without approval", err)
		}
		if _, err := os.Lstat(filepath.Join(ws, ".claude", "x")); !os.IsNotExist(err) {
			t.Errorf(".claude/x exists (%v): a sandbox wrote a protected folder", err)
		}
		if target, err := os.Readlink(filepath.Join(ws, ".claude", "escape")); err != nil || target != "/etc" {
			t.Errorf(".claude/escape is no longer the planted symlink: %q %v", target, err)
		}
		st, err := os.Stat(filepath.Join(ws, ".claude", "commands", "hello.md"))
		if err != nil {
			t.Fatalf("fs's write is not in the workspace: %v", err)
		}
		if st.Mode().Perm()&0o111 != 0 {
			t.Errorf(".claude/commands/hello.md has mode %v: fs let an exec bit through", st.Mode())
		}
		if b, err := os.ReadFile(filepath.Join(ws, ".envrc")); err != nil || len(b) != 0 {
			t.Errorf(".envrc changed (%q, %v): nobody may write it without approval", b, err)
		}
		if b, err := os.ReadFile(filepath.Join(ws, ".git", "config")); err != nil || len(b) != 0 {
			t.Errorf(".git/config changed (%q, %v)", b, err)
		}
	})
}

// TestBashRefusesWithoutUserNamespaces runs the bash image as the stack would, but under Docker's
// own seccomp profile, which refuses user namespaces to a process without CAP_SYS_ADMIN: bash
// must refuse to start and say why, not serve commands in a weaker sandbox.
func TestBashRefusesWithoutUserNamespaces(t *testing.T) {
	requireEngine(t)
	root := repoRoot(t)
	ws := newWorkspace(t, root)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// runc by name: Docker's seccomp profile is not bash's compiled one, which the runtime shim
	// would refuse before bash could.
	out, err := exec.CommandContext(ctx, "docker", "run", "--rm", "--runtime", "runc", "--network", "none", "--user", "65532:65532",
		"--read-only", "--cap-drop", "ALL", "--security-opt", "no-new-privileges:true", "--security-opt", "systempaths=unconfined",
		"-v", filepath.Join(root, "policies", "default")+":/etc/sharness/policy:ro", "-v", ws+":/workspace",
		"-e", "SHARNESS_AI_COMPONENT=bash", "-e", "SHARNESS_AI_POLICY_HASH="+defaultHash(t, root),
		"sharness/bash:dev").CombinedOutput()
	if err == nil {
		t.Fatalf("bash started without user namespaces:\n%s", out)
	}
	if !strings.Contains(string(out), "user namespace") {
		t.Errorf("bash refused without naming the missing feature:\n%s", out)
	}
}
