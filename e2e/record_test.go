//go:build e2e

package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// recordComponents are the components that keep an audit log in the default stack.
var recordComponents = []string{"bash", "fs", "kms", "launcher", "llm", "net"}

// checkRecord runs on the stack TestWall just used: every component's audit log verifies from
// the host (`sharness-ai audit verify --project`) while the stack runs; a component killed and
// started again continues its chain; once the stack stops, every log ends with its signed
// shutdown checkpoint and verifies strictly; and copies with a changed, deleted, reordered or
// cut line each fail with the line and the reason.
func checkRecord(t *testing.T, s *stack, ctx context.Context) {
	verify := func(t *testing.T, args ...string) ([]byte, error) {
		return s.cli(ctx, "", append([]string{"audit", "verify", "--json", "--project", project}, args...)...)
	}
	type result struct {
		File   string
		OK     bool
		Report struct {
			Component string
			Lines     int
			Final     bool
			Failures  []struct {
				Line   int
				Reason string
			}
		}
	}
	parse := func(t *testing.T, out []byte) []result {
		t.Helper()
		var rs []result
		if err := json.Unmarshal(out, &rs); err != nil {
			var wrapped struct{ Logs []result }
			if err2 := json.Unmarshal(out, &wrapped); err2 != nil || len(wrapped.Logs) == 0 {
				t.Fatalf("audit verify --json printed %s (%v)", out, err)
			}
			rs = wrapped.Logs
		}
		return rs
	}
	t.Run("running", func(t *testing.T) {
		out, err := verify(t, "--allow-running")
		if err != nil {
			t.Fatalf("audit verify of the running stack: %v\n%s", err, out)
		}
		var seen []string
		for _, r := range parse(t, out) {
			seen = append(seen, r.Report.Component)
			if !r.OK || r.Report.Lines < 2 {
				t.Errorf("%s: ok=%v, %d lines", r.File, r.OK, r.Report.Lines)
			}
		}
		slices.Sort(seen)
		if !slices.Equal(seen, recordComponents) {
			t.Errorf("verified the logs of %v, want %v", seen, recordComponents)
		}
	})
	t.Run("restart-continues", func(t *testing.T) {
		for _, args := range [][]string{{"kill", "net"}, {"up", "--pull", "never", "--detach", "--wait", "--no-deps", "net"}} {
			if out, err := s.compose(ctx, args...); err != nil {
				t.Fatalf("docker compose %v: %v\n%s", args, err, out)
			}
		}
		if out, err := verify(t, "--allow-running"); err != nil {
			t.Fatalf("audit verify after net was killed and restarted: %v\n%s", err, out)
		}
	})
	if out, err := s.compose(ctx, "stop", "--timeout", "20"); err != nil {
		t.Fatalf("docker compose stop: %v\n%s", err, out)
	}
	t.Run("stopped", func(t *testing.T) {
		out, err := verify(t)
		if err != nil {
			t.Fatalf("audit verify of the stopped stack (every log must end signed): %v\n%s", err, out)
		}
		for _, r := range parse(t, out) {
			if !r.Report.Final {
				t.Errorf("%s: no shutdown checkpoint at its end", r.File)
			}
		}
	})
	t.Run("tampered", func(t *testing.T) {
		dir, ca := copyLogs(t, ctx)
		logFile := filepath.Join(dir, "fs.jsonl")
		orig, err := os.ReadFile(logFile)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.SplitAfter(string(orig), "\n")
		lines = lines[:len(lines)-1] // the empty string after the last newline
		if len(lines) < 4 {
			t.Fatalf("fs's log has %d lines: too few to tamper with", len(lines))
		}
		for name, edit := range map[string]func([]string) []string{
			"changed":   func(l []string) []string { l[1] = strings.Replace(l[1], `"time":"20`, `"time":"19`, 1); return l },
			"deleted":   func(l []string) []string { return slices.Delete(l, 1, 2) },
			"reordered": func(l []string) []string { l[1], l[2] = l[2], l[1]; return l },
			"truncated": func(l []string) []string { return l[:len(l)-1] },
		} {
			t.Run(name, func(t *testing.T) {
				bad := edit(slices.Clone(lines))
				path := filepath.Join(t.TempDir(), "fs.jsonl")
				if err := os.WriteFile(path, []byte(strings.Join(bad, "")), 0o600); err != nil {
					t.Fatal(err)
				}
				out, err := s.cli(ctx, "", "audit", "verify", "--ca", ca, path)
				// Refused, naming the file and the line: "…/fs.jsonl:<line>: <reason>".
				if err == nil || !regexp.MustCompile(`fs\.jsonl:[0-9]+: `).Match(out) {
					t.Errorf("a %s log: verify %v, want a failure naming its line:\n%s", name, err, out)
				}
			})
		}
	})
}

// copyLogs copies every audit log of the project's volumes into a folder as <component>.jsonl,
// and writes the session CA from the launcher's session record as PEM.
func copyLogs(t *testing.T, ctx context.Context) (dir, caPEM string) {
	t.Helper()
	dir = t.TempDir()
	for _, c := range recordComponents {
		mp, err := exec.CommandContext(ctx, "docker", "volume", "inspect", "-f", "{{.Mountpoint}}", project+"_audit-"+c).Output()
		if err != nil {
			t.Fatalf("docker volume inspect %s_audit-%s: %v", project, c, err)
		}
		data, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(mp)), "audit.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, c+".jsonl"), data, 0o600); err != nil {
			t.Fatal(err)
		}
		if c != "launcher" {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			var rec struct {
				Action string            `json:"action"`
				Fields map[string]string `json:"fields"`
			}
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Action == "session_start" {
				der, err := base64.StdEncoding.DecodeString(rec.Fields["ca_cert"])
				if err != nil {
					t.Fatalf("the session record's ca_cert: %v", err)
				}
				caPEM = filepath.Join(dir, "ca.pem")
				if err := os.WriteFile(caPEM, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if caPEM == "" {
		t.Fatal("the launcher's log has no session record with the CA")
	}
	return dir, caPEM
}
