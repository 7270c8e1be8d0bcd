//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// runnableMark is the line that marks the shell block right after it as one a person pastes and
// this test runs (docs/cli.md's examples are TestREADMEExamples' instead).
const runnableMark = "<!-- runnable"

// runnableBlocks are the bodies of the ```sh blocks of a Markdown file that follow runnableMark,
// in order; a mark not followed by a sh block is an error, so that no mark silently runs nothing.
func runnableBlocks(md []byte) ([]string, error) {
	lines := strings.Split(string(md), "\n")
	var blocks []string
	for i := 0; i < len(lines); i++ {
		if !strings.HasPrefix(lines[i], runnableMark) {
			continue
		}
		if i+1 >= len(lines) || lines[i+1] != "```sh" {
			return nil, fmt.Errorf("line %d: %s is not followed by a ```sh block", i+1, runnableMark)
		}
		var b []string
		for i += 2; i < len(lines) && lines[i] != "```"; i++ {
			b = append(b, lines[i])
		}
		if i == len(lines) {
			return nil, fmt.Errorf("the block marked runnable has no end")
		}
		blocks = append(blocks, strings.Join(b, "\n"))
	}
	return blocks, nil
}

// freshCopy is the tree at root as a fresh clone of it would be, with this run's uncommitted
// changes: every file git tracks or would (not the ignored build outputs, images' caches, or a
// workspace), modes kept.
func freshCopy(t *testing.T, root string) string {
	t.Helper()
	out, err := exec.Command("git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	dst := filepath.Join(t.TempDir(), "sharness")
	for _, rel := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		src := filepath.Join(root, rel)
		st, err := os.Lstat(src)
		if err != nil || !st.Mode().IsRegular() {
			continue // deleted in the working tree, or a symlink (none is tracked today)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dst, rel)), 0o755); err != nil {
			t.Fatal(err)
		}
		in, err := os.Open(src)
		if err != nil {
			t.Fatal(err)
		}
		f, err := os.OpenFile(filepath.Join(dst, rel), os.O_WRONLY|os.O_CREATE|os.O_EXCL, st.Mode().Perm())
		if err != nil {
			t.Fatal(err)
		}
		_, err = io.Copy(f, in)
		in.Close()
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// TestDocsRunnable: every shell block marked runnable in README.md and docs/ runs as a person
// pastes it: in one bash per file (so that its exports carry to the next block), with `set -euo
// pipefail`, from a fresh copy of the tree, as root on this engine, with a clean environment (no
// SHARNESS_* variable of the suite's) and a throwaway key on stdin for a block that reads one.
// Each must exit 0; what it started is removed afterwards. At least the README's and operator.md's
// blocks must be found, so the test cannot pass by finding none.
func TestDocsRunnable(t *testing.T) {
	requireEngine(t)
	buildClaudeCode(t) // the README's block runs Claude Code; run would build it, slowly, the same way
	root := repoRoot(t)
	docs, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	found := map[string]int{}
	// operator.md's recipe rebuilds the images from the copy (its binaries differ: no .git there)
	// and records their code for the world's policy alone: record both policies' code again for the
	// images the rest of the suite now runs, as a person would after rebuilding.
	t.Cleanup(func() {
		for _, m := range []string{"policies/default/manifest.yaml", "policies/world/manifest.yaml"} {
			cmd := exec.Command(sharnessAI(t), "-f", m, "install", "--replace")
			cmd.Dir = root
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("sharness-ai -f %s install --replace: %v\n%s", m, err, out)
			}
		}
	})
	for _, path := range append([]string{filepath.Join(root, "README.md")}, docs...) {
		md, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, path)
		blocks, err := runnableBlocks(md)
		if err != nil {
			t.Errorf("%s: %v", rel, err)
			continue
		}
		if len(blocks) == 0 {
			continue
		}
		found[rel] = len(blocks)
		t.Run(rel, func(t *testing.T) {
			dir := freshCopy(t, root)
			down := func() {
				cmd := exec.Command(sharnessAI(t), "down", "-p", "sharness", "--volumes")
				cmd.Dir = dir
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Logf("down -p sharness --volumes: %v\n%s", err, out)
				}
			}
			down()
			t.Cleanup(down)
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, "bash", "-c", "set -euo pipefail\n"+strings.Join(blocks, "\n"))
			cmd.Dir, cmd.Stdin = dir, strings.NewReader("sk-ant-api03-docs-test-throwaway-key\n")
			for _, kv := range os.Environ() {
				if !strings.HasPrefix(kv, "SHARNESS_") && !strings.HasPrefix(kv, "COMPOSE_") {
					cmd.Env = append(cmd.Env, kv)
				}
			}
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			err := cmd.Run()
			t.Logf("%s's runnable blocks:\n%s", rel, out.String())
			if err != nil {
				t.Fatalf("%s's runnable blocks failed as pasted: %v", rel, err)
			}
		})
	}
	for _, want := range []string{"README.md", filepath.Join("docs", "operator.md")} {
		if found[want] == 0 {
			t.Errorf("no runnable block found in %s (found: %v)", want, found)
		}
	}
}
