package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWorkspaceInit(t *testing.T) {
	copyTree(t, "policies/default")
	if err := os.Mkdir("ws", 0o777); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := run(t, "workspace", "init", "--dir", "ws")
	if code != ExitOK {
		t.Fatalf("exit %d: %s%s", code, out, errOut)
	}
	for _, p := range []string{".git/hooks", ".claude", ".vscode", ".idea"} {
		if st, err := os.Lstat(filepath.Join("ws", p)); err != nil || !st.IsDir() {
			t.Errorf("%s: want a folder, got %v %v", p, st, err)
		}
	}
	for _, p := range []string{".git/config", ".envrc", ".bashrc", ".zshrc", ".profile"} {
		if st, err := os.Lstat(filepath.Join("ws", p)); err != nil || !st.Mode().IsRegular() || st.Size() != 0 {
			t.Errorf("%s: want an empty file, got %v %v", p, st, err)
		}
	}
	if !strings.Contains(out, ".git/hooks/") {
		t.Errorf("the report does not name what it made:\n%s", out)
	}

	// Again: nothing to make, nothing touched.
	if err := os.WriteFile("ws/.envrc", []byte("export A=1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, _ = run(t, "workspace", "init", "--dir", "ws")
	if code != ExitOK || !strings.Contains(out, "0 made") {
		t.Errorf("second init: exit %d:\n%s", code, out)
	}
	if b, _ := os.ReadFile("ws/.envrc"); string(b) != "export A=1\n" {
		t.Errorf("init changed an existing protected file: %q", b)
	}

	// A protected path that is a symlink would let a read-only bind land anywhere: refused.
	os.RemoveAll("ws/.idea")
	if err := os.Symlink("/etc", "ws/.idea"); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = run(t, "workspace", "init", "--dir", "ws")
	if code != ExitRefused || !strings.Contains(errOut, ".idea") {
		t.Errorf("init over a symlinked protected path: exit %d, stderr %q; want exit 1 naming .idea", code, errOut)
	}

	code, _, errOut = run(t, "workspace", "init", "--dir", "missing")
	if code != ExitUsage || !strings.Contains(errOut, "missing") {
		t.Errorf("init of a missing folder: exit %d, stderr %q", code, errOut)
	}
}
