//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestOperatorUpStatusDown: `sharness-ai up --policy-hash M` brings the stack (every service but
// the agent) up under the runtime shim, `status --json` shows every component running, healthy
// where it has a health check, under runtime sharness, and `down` stops it but keeps the audit and
// gate volumes; a wrong hash is refused before anything starts.
func TestOperatorUpStatusDown(t *testing.T) {
	root := repoRoot(t)
	m := policyHash(t, root)
	s := newStack(t, "SHARNESS_AI_SECRETS_DIR="+t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	wrong := "sha256:" + strings.Repeat("0", 64)
	if out, err := s.cli(ctx, "", "up", "-p", project, "--policy-hash", wrong); err == nil || !strings.Contains(string(out), m) {
		t.Fatalf("up with another hash: %v, want a refusal naming both hashes:\n%s", err, out)
	}
	if out, _ := exec.CommandContext(ctx, "docker", "ps", "-q", "--filter", "label=com.docker.compose.project="+project).Output(); len(strings.TrimSpace(string(out))) > 0 {
		t.Fatalf("a refused up started containers: %s", out)
	}

	if out, err := s.cli(ctx, "", "up", "-p", project, "--policy-hash", m); err != nil {
		t.Fatalf("sharness-ai up: %v\n%s", err, out)
	}
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

	if out, err := s.cli(ctx, "", "down", "-p", project); err != nil {
		t.Fatalf("sharness-ai down: %v\n%s", err, out)
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
