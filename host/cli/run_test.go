package cli

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sharness-ai/sharness/testkit/enginetest"
)

// TestRunRefusesBeforeAnything: every bad input and every failed check of `run` that can be
// known before the engine is asked stops it there: no docker command, no script, no log file.
func TestRunRefusesBeforeAnything(t *testing.T) {
	dir := upTree(t)
	os.MkdirAll(filepath.Join(dir, "hack"), 0o755)
	os.WriteFile(filepath.Join(dir, "hack", "build-images.sh"), []byte("#!/bin/sh\nexit 1\n"), 0o755)
	t.Setenv("XDG_STATE_HOME", filepath.Join(dir, "state"))
	t.Setenv("SHARNESS_AI_POLICY_HASH", "")
	t.Setenv("COMPOSE_PROJECT_NAME", "")
	_, m, _ := run(t, "hash")
	m = strings.TrimSpace(m)
	other := "sha256:" + strings.Repeat("0", 64)
	tests := []struct {
		name  string
		args  []string
		stdin string
		code  int
		want  string
	}{
		{"bad agent", []string{"run", "--agent", "not an image!", "--yes"}, "k\n", ExitUsage, `--agent "not an image!": claude-code, or a local image`},
		{"offline with a manifest", []string{"-f", "policies/default/manifest.yaml", "run", "--offline", "--yes"}, "", ExitUsage, "leave -f out"},
		{"hash mismatch", []string{"run", "--policy-hash", other}, "k\n", ExitRefused, "the supplied hash is " + other + ": nothing started"},
		{"malformed hash", []string{"run", "--policy-hash", "sha256:12"}, "k\n", ExitUsage, "sha256:12"},
		{"wrong confirmation", []string{"run"}, "0123456789ab\nkey\n", ExitRefused, "not the start of policy"},
		{"confirmed, then no key", []string{"run"}, m[7:19] + "\n", ExitUsage, "API key from stdin"},
		{"a key with white space", []string{"run", "--yes"}, "sk-ant one two\n", ExitUsage, "white space: nothing started"},
		{"bad project", []string{"run", "-p", "No Such", "--yes"}, "k\n", ExitUsage, "--project"},
		{"bad timeout", []string{"run", "--timeout", "-1s", "--yes"}, "k\n", ExitUsage, "positive duration"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeDocker{}
			f.install(t)
			origIn, origSecret, origScript := confirmInput, secretInput, script
			t.Cleanup(func() { confirmInput, secretInput, script = origIn, origSecret, origScript })
			confirmInput = strings.NewReader(tc.stdin)
			secretInput = confirmInput
			script = func(_ context.Context, _ io.Writer, path string, _ ...string) error {
				t.Errorf("ran %s", path)
				return nil
			}
			code, out, errOut := run(t, tc.args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.code, out, errOut)
			}
			if !strings.Contains(errOut, tc.want) {
				t.Errorf("stderr lacks %q:\n%s", tc.want, errOut)
			}
			if v := f.verbs(); len(v) > 0 {
				t.Errorf("docker was asked %v", v)
			}
			if logs, _ := filepath.Glob(filepath.Join(dir, "state", "sharness-ai", "run-*.log")); len(logs) > 0 {
				t.Errorf("a log was made: %v", logs)
			}
		})
	}
	// run's end removes its project whatever is there of it, so a project already there (another
	// run, up, the e2e suite) is refused before anything is built, installed or started.
	t.Run("the project is already there", func(t *testing.T) {
		f := &fakeDocker{containers: []fakeContainer{{id: "c1", name: "sharness-llm-1", state: "running", service: "llm"}}}
		f.install(t)
		// An engine that answers, with the shim registered: the model serves /version and /info.
		useAPI(t, &enginetest.Engine{Version: "20.10.24", Runtimes: []string{"runc", "sharness"},
			Hook: func(w http.ResponseWriter, r *http.Request, path string) bool {
				return path != "/version" && path != "/info" && path != "/_ping" && f.api(w, r, path)
			}})
		origIn, origSecret, origScript := confirmInput, secretInput, script
		t.Cleanup(func() { confirmInput, secretInput, script = origIn, origSecret, origScript })
		confirmInput = strings.NewReader("k\n")
		secretInput = confirmInput
		script = func(_ context.Context, _ io.Writer, path string, _ ...string) error {
			t.Errorf("ran %s", path)
			return nil
		}
		code, _, errOut := run(t, "run", "--yes")
		if code != ExitRefused || !strings.Contains(errOut, "project sharness already has 1 containers (sharness-llm-1)") {
			t.Fatalf("exit %d, want %d naming the container; stderr:\n%s", code, ExitRefused, errOut)
		}
		if v := f.verbsBut("ps"); len(v) > 0 {
			t.Errorf("docker was asked %v beyond listing the project", v)
		}
		if len(f.containers) != 1 {
			t.Errorf("its container was removed")
		}
	})
	t.Run("not in a checkout", func(t *testing.T) {
		os.Rename(filepath.Join(dir, "hack"), filepath.Join(dir, "hack.off"))
		t.Cleanup(func() { os.Rename(filepath.Join(dir, "hack.off"), filepath.Join(dir, "hack")) })
		code, _, errOut := run(t, "run", "--yes")
		if code != ExitUsage || !strings.Contains(errOut, "run works from the SHarness checkout") {
			t.Errorf("exit %d, stderr:\n%s", code, errOut)
		}
	})
}
