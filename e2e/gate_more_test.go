//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// adminCommand is what the agent asks bash to run under the admin profile: it counts its runs in
// the workspace, and looks at bash's gate folder, which a sandbox must see as an empty tmpfs.
const adminCommand = "echo run >> admin-runs; echo admin-ran-$(wc -l < admin-runs); stat -f -c %T /var/lib/sharness/gate"

// TestAdminGate: with an operator key made by `sharness-ai operator init` and its public key
// given to the stack, a bash admin command the agent asks for (a real MCP client in the agent's
// container, `sharness-shellprobe call`) waits, pending in bash's gate volume on the host:
//
//   - `sharness-ai approve` lets it run once, and its output comes back to the agent; approving
//     the same request again is refused;
//   - the identical command again is a new request that needs a new approval;
//   - a spent approval planted for the next identical command is refused (approval_mismatch: it
//     names another request) and the command does not run;
//   - `sharness-ai deny` gives approval_denied;
//   - nobody deciding gives approval_timeout, and approving the request after that is refused.
//
// An approval whose `approve --ttl` has run out is not tested here: --ttl takes any positive
// duration (1s included), but bash reads a decision within 200 ms of its writing and the gate
// allows 30 s of clock skew, so an approval cannot expire before bash uses it. Expiry is tested
// end to end through the request timing out (the last case) and in unit tests (internal/gate:
// TestCheck's expired token).
func TestAdminGate(t *testing.T) {
	// Each request waits 45 s: long enough for the test to decide, short enough to time out.
	s, ws, key := operatorStack(t, "SHARNESS_AI_GATE_TIMEOUT=45s")
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	if out, err := s.compose(ctx, "up", "--pull", "never", "--detach", "--wait", "launcher", "net", "bash"); err != nil {
		t.Fatalf("docker compose up: %v\n%s\nbash:\n%s", err, out, s.logs("bash"))
	}
	gateDir := volumeDir(t, ctx, "gate-bash")
	runs := func() int {
		b, _ := os.ReadFile(filepath.Join(ws, "admin-runs"))
		return strings.Count(string(b), "\n")
	}

	// ask starts the agent's admin command and waits until its request is pending; it returns
	// the request's id.
	ask := func(t *testing.T, name string) string {
		t.Helper()
		args, _ := json.Marshal(map[string]any{"command": adminCommand, "profile": "admin"})
		if out, err := s.compose(ctx, "run", "-d", "--no-deps", "--name", name, "--entrypoint", "/sharness-shellprobe", "agent",
			"call", string(args)); err != nil {
			t.Fatalf("start the agent's admin command: %v\n%s", err, out)
		}
		t.Cleanup(func() { exec.Command("docker", "rm", "-f", name).Run() })
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(500 * time.Millisecond) {
			out, err := s.cli(ctx, "", "pending", "--gate-dir", gateDir, "--json")
			var rows []struct{ ID, Action, Summary, Tier string }
			if err == nil && json.Unmarshal(out, &rows) == nil && len(rows) == 1 {
				if r := rows[0]; r.Action != "bash.admin" || r.Tier != "every" || r.Summary != "admin: "+strconv.Quote(adminCommand) {
					t.Fatalf("pending request %+v, want the exact admin command, tier every", r)
				}
				return rows[0].ID
			}
			if time.Now().After(deadline) {
				t.Fatalf("no pending request appeared: %v\n%s\nbash:\n%s", err, out, s.logs("bash"))
			}
		}
	}
	// answer waits for the agent's call to end and returns what bash told it.
	answer := func(t *testing.T, name string) (refusal, stdout string) {
		t.Helper()
		if out, err := exec.CommandContext(ctx, "docker", "wait", name).CombinedOutput(); err != nil {
			t.Fatalf("docker wait %s: %v\n%s", name, err, out)
		}
		out, _ := exec.CommandContext(ctx, "docker", "logs", name).CombinedOutput()
		for _, line := range strings.Split(string(out), "\n") {
			var r struct{ Refusal, Stdout string }
			if strings.HasPrefix(line, "{") && json.Unmarshal([]byte(line), &r) == nil {
				return r.Refusal, r.Stdout
			}
		}
		t.Fatalf("the agent's call printed no result:\n%s", out)
		return "", ""
	}
	// shadowApprove signs an approval of request id with `sharness-ai approve` in a copy of the
	// request's folder and returns the token, which the test then delivers itself (as the CLI
	// would) so that it keeps a copy.
	shadowApprove := func(t *testing.T, id string) []byte {
		t.Helper()
		shadow := t.TempDir()
		for _, d := range []string{"pending", "decisions"} {
			if err := os.Mkdir(filepath.Join(shadow, d), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		req, err := os.ReadFile(filepath.Join(gateDir, "pending", id+".json"))
		if err == nil {
			err = os.WriteFile(filepath.Join(shadow, "pending", id+".json"), req, 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
		if out, err := s.cli(ctx, "", "approve", id, "--gate-dir", shadow, "--key", key); err != nil {
			t.Fatalf("sharness-ai approve in the copy: %v\n%s", err, out)
		}
		token, err := os.ReadFile(filepath.Join(shadow, "decisions", id+".json"))
		if err != nil {
			t.Fatal(err)
		}
		return token
	}
	// deliver writes token as the decision on request id in bash's gate folder, all at once.
	deliver := func(t *testing.T, id string, token []byte) {
		t.Helper()
		tmp := filepath.Join(gateDir, "decisions", ".e2e-"+id)
		if err := os.WriteFile(tmp, token, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(gateDir, "decisions", id+".json")); err != nil {
			t.Fatal(err)
		}
	}

	var spent []byte
	t.Run("approved-runs-once", func(t *testing.T) {
		id := ask(t, project+"-admin-approve")
		if n := runs(); n != 0 {
			t.Fatalf("the command ran %d times before anyone approved it", n)
		}
		if out, err := s.cli(ctx, "", "approve", id, "--gate-dir", gateDir, "--key", key); err != nil {
			t.Fatalf("sharness-ai approve: %v\n%s", err, out)
		}
		refusal, stdout := answer(t, project+"-admin-approve")
		if refusal != "" || stdout != "admin-ran-1\ntmpfs\n" {
			t.Fatalf("the approved command: refusal %q, stdout %q; want it to run once, the gate folder hidden", refusal, stdout)
		}
		if out, err := s.cli(ctx, "", "approve", id, "--gate-dir", gateDir, "--key", key); err == nil {
			t.Errorf("approving the same request again succeeded:\n%s", out)
		}
	})
	t.Run("same-command-needs-a-new-approval", func(t *testing.T) {
		id := ask(t, project+"-admin-again")
		spent = shadowApprove(t, id)
		deliver(t, id, spent)
		if refusal, stdout := answer(t, project+"-admin-again"); refusal != "" || !strings.HasPrefix(stdout, "admin-ran-2\n") {
			t.Fatalf("the command approved again: refusal %q, stdout %q", refusal, stdout)
		}
	})
	t.Run("spent-approval-replayed", func(t *testing.T) {
		if spent == nil {
			t.Skip("no spent approval (the previous case failed)")
		}
		id := ask(t, project+"-admin-replay")
		deliver(t, id, spent)
		if refusal, _ := answer(t, project+"-admin-replay"); !strings.HasPrefix(refusal, "refused: approval_mismatch") {
			t.Errorf("a spent approval replayed: refusal %q, want approval_mismatch", refusal)
		}
		if n := runs(); n != 2 {
			t.Errorf("the command ran %d times, want 2", n)
		}
	})
	t.Run("denied", func(t *testing.T) {
		id := ask(t, project+"-admin-deny")
		if out, err := s.cli(ctx, "", "deny", id, "--gate-dir", gateDir, "--key", key); err != nil {
			t.Fatalf("sharness-ai deny: %v\n%s", err, out)
		}
		if refusal, _ := answer(t, project+"-admin-deny"); !strings.HasPrefix(refusal, "refused: approval_denied") || !strings.Contains(refusal, "the operator denied it") {
			t.Errorf("the denied command: refusal %q", refusal)
		}
		if n := runs(); n != 2 {
			t.Errorf("the command ran %d times, want 2", n)
		}
	})
	t.Run("times-out", func(t *testing.T) {
		id := ask(t, project+"-admin-timeout")
		if refusal, _ := answer(t, project+"-admin-timeout"); !strings.HasPrefix(refusal, "refused: approval_timeout") {
			t.Errorf("nobody decided: refusal %q, want approval_timeout", refusal)
		}
		if out, err := s.cli(ctx, "", "approve", id, "--gate-dir", gateDir, "--key", key, "--ttl", "1s"); err == nil {
			t.Errorf("approving a request that timed out succeeded:\n%s", out)
		}
		if n := runs(); n != 2 {
			t.Errorf("the command ran %d times, want 2", n)
		}
	})
	if t.Failed() {
		t.Logf("bash:\n%s", s.logs("bash"))
	}
}
