package cli

import (
	"os"
	"strings"
	"testing"
)

// TestCommittedDiagramMatches holds the README's picture true: docs/stack.svg is exactly what the
// default manifest draws.
func TestCommittedDiagramMatches(t *testing.T) {
	t.Chdir(repoRoot)
	code, out, errOut := run(t, "diagram", "--check")
	if code != ExitOK {
		t.Fatalf("diagram --check on the committed %s: exit %d\n%s%s\nregenerate with: go run ./cmd/sharness-ai diagram -o %s", DiagramFile, code, out, errOut, DiagramFile)
	}
}

func TestDiagram(t *testing.T) {
	copyTree(t, "policies/default")
	code, out, errOut := run(t, "diagram", "-o", "pic/stack.svg")
	if code != ExitOK || !strings.Contains(out, "7 components, 7 edges in pic/stack.svg") {
		t.Fatalf("diagram: exit %d\n%s%s", code, out, errOut)
	}
	written, err := os.ReadFile("pic/stack.svg")
	if err != nil {
		t.Fatal(err)
	}
	code, stdout, _ := run(t, "diagram", "-o", "-")
	if code != ExitOK || stdout != string(written) {
		t.Errorf("-o - printed another picture than the file holds (exit %d)", code)
	}
	if code, out, _ := run(t, "diagram", "--check", "-o", "pic/stack.svg"); code != ExitOK || !strings.HasPrefix(out, "ok: pic/stack.svg matches policy sha256:") {
		t.Errorf("--check on what it wrote: exit %d, %q", code, out)
	}
	os.WriteFile("pic/stack.svg", append(written, '\n'), 0o644)
	code, out, errOut = run(t, "diagram", "--check", "-o", "pic/stack.svg")
	if code != ExitRefused || out != "drift: pic/stack.svg: differs\n" || !strings.Contains(errOut, "run sharness-ai diagram -o pic/stack.svg") {
		t.Errorf("--check on a changed file: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if after, _ := os.ReadFile("pic/stack.svg"); len(after) != len(written)+1 {
		t.Error("--check wrote the file")
	}
	if code, _, _ := run(t, "diagram", "--check", "-o", "-"); code != ExitUsage {
		t.Errorf("--check with -o -: exit %d, want %d", code, ExitUsage)
	}
}
