package guard

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// world is a temporary directory holding a prepared workspace ("ws") and a folder outside it
// ("outside") that symlinks point at.
type world struct {
	dir, ws, outside string
	g                *Guard
}

func newWorld(t *testing.T, p Policy) *world {
	t.Helper()
	w := &world{dir: t.TempDir()}
	w.ws, w.outside = filepath.Join(w.dir, "ws"), filepath.Join(w.dir, "outside")
	for _, d := range []string{w.ws, w.outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	w.put(t, "../outside/passwd", "root:x:0:0\n")
	if _, err := Prepare(w.ws, p.Protected); err != nil {
		t.Fatal(err)
	}
	r, err := Compile(p)
	if err != nil {
		t.Fatal(err)
	}
	if w.g, err = Open(w.ws, r, testFilter(t)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.g.Close() })
	return w
}

// write, remove and rename make a change as the binary does (Apply), with nobody to ask: a
// change to an ask path is refused approval_required.
func (w *world) write(p string, content []byte, mode string) (Result, error) {
	return w.g.Apply(context.Background(), Change{Op: OpWrite, Path: p, Content: content, Mode: mode}, nil)
}

func (w *world) remove(p string) (Result, error) {
	return w.g.Apply(context.Background(), Change{Op: OpDelete, Path: p}, nil)
}

func (w *world) rename(from, to string) (Result, error) {
	return w.g.Apply(context.Background(), Change{Op: OpRename, Path: from, To: to}, nil)
}

func defaultWorld(t *testing.T) *world {
	return newWorld(t, Policy{Protected: defaultProtected, Ask: defaultAsk, MaxFileSize: 1 << 10, MaxEntries: 20})
}

// put plants a file as the person on the host would, making its folders.
func (w *world) put(t *testing.T, rel, content string) {
	t.Helper()
	p := filepath.Join(w.ws, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (w *world) read(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(w.ws, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// snapshot is every entry under the world: type, mode, and content digest or link target.
func (w *world) snapshot(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(w.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		v := info.Mode().String()
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			v += " -> " + target
		case d.Type().IsRegular():
			b, _ := os.ReadFile(p)
			v += fmt.Sprintf(" %x", sha256.Sum256(b))
		}
		out[strings.TrimPrefix(p, w.dir)] = v
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func reasonOf(err error) Reason {
	var ref *Refusal
	if errors.As(err, &ref) {
		return ref.Reason
	}
	if err != nil {
		return "not a refusal: " + Reason(err.Error())
	}
	return ""
}

func ino(t *testing.T, p string) uint64 {
	t.Helper()
	info, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return info.Sys().(*syscall.Stat_t).Ino
}

func TestWriteNewFile(t *testing.T) {
	w := defaultWorld(t)
	res, err := w.write(".claude/commands/hello.md", []byte("hello\n"), "")
	if err != nil {
		t.Fatal(err)
	}
	if want := (Result{Path: ".claude/commands/hello.md", Bytes: 6, Created: true}); res != want {
		t.Errorf("Result = %+v, want %+v", res, want)
	}
	if got := w.read(t, ".claude/commands/hello.md"); got != "hello\n" {
		t.Errorf("content = %q", got)
	}
	for p, want := range map[string]fs.FileMode{".claude/commands": fs.ModeDir | 0o755, ".claude/commands/hello.md": 0o644} {
		if info, _ := os.Stat(filepath.Join(w.ws, p)); info.Mode() != want {
			t.Errorf("%s mode = %v, want %v", p, info.Mode(), want)
		}
	}
}

func TestWriteReplacesAtomically(t *testing.T) {
	w := defaultWorld(t)
	w.put(t, ".vscode/settings.json", "{}")
	before := ino(t, filepath.Join(w.ws, ".vscode/settings.json"))
	if _, err := w.write(".vscode/settings.json", []byte(`{"a":1}`), ""); err != nil {
		t.Fatal(err)
	}
	if got := w.read(t, ".vscode/settings.json"); got != `{"a":1}` {
		t.Errorf("content = %q", got)
	}
	if ino(t, filepath.Join(w.ws, ".vscode/settings.json")) == before {
		t.Error("a file inside a protected folder was rewritten in place, want a new inode")
	}
	entries, _ := os.ReadDir(filepath.Join(w.ws, ".vscode"))
	if len(entries) != 1 {
		t.Errorf("entries left in .vscode: %v", entries)
	}
}

func TestWriteRootFileInPlace(t *testing.T) {
	w := newWorld(t, Policy{Protected: []string{".envrc", ".git/config"}})
	for _, rel := range []string{".envrc", ".git/config"} {
		p := filepath.Join(w.ws, rel)
		w.put(t, rel, "a much longer old content\n")
		before := ino(t, p)
		res, err := w.write(rel, []byte("new\n"), "0755")
		if err != nil {
			t.Fatal(err)
		}
		if got := w.read(t, rel); got != "new\n" {
			t.Errorf("%s content = %q", rel, got)
		}
		if ino(t, p) != before {
			t.Errorf("%s was replaced, want the same inode (it is a single-file bind mount)", rel)
		}
		if info, _ := os.Stat(p); info.Mode() != 0o644 || !res.ExecBitsStripped {
			t.Errorf("%s mode = %v, stripped %v; want 0644, true", rel, info.Mode(), res.ExecBitsStripped)
		}
	}
}

func TestWriteExecBits(t *testing.T) {
	w := newWorld(t, Policy{Protected: []string{".claude/", ".tools/"}, ExecBits: false})
	res, err := w.write(".claude/commands/hello.md", []byte("#!/bin/sh\n"), "0755")
	if err != nil {
		t.Fatal(err)
	}
	info, _ := os.Stat(filepath.Join(w.ws, ".claude/commands/hello.md"))
	if !res.ExecBitsStripped || info.Mode()&0o111 != 0 {
		t.Errorf("stripped = %v, mode %v; want stripped and no x bit", res.ExecBitsStripped, info.Mode())
	}
	w2 := newWorld(t, Policy{Protected: []string{".tools/"}, ExecBits: true})
	if res, err = w2.write(".tools/run", []byte("#!/bin/sh\n"), "0755"); err != nil || res.ExecBitsStripped {
		t.Fatalf("Write = %+v, %v", res, err)
	}
	if info, _ := os.Stat(filepath.Join(w2.ws, ".tools/run")); info.Mode() != 0o755 {
		t.Errorf("mode = %v, want 0755 (exec_bits allowed)", info.Mode())
	}
}

// TestRefusalsChangeNothing: every refused write leaves the world exactly as it was: the old
// content, no temporary file, no folder made.
func TestRefusalsChangeNothing(t *testing.T) {
	key := string(pemKey(t))
	for _, c := range []struct {
		name, path, content string
		plant               func(t *testing.T, w *world)
		want                Reason
	}{
		{"pem key", ".claude/commands/hello.md", "key:\n" + key, nil, ReasonSecret},
		{"pem key in a new folder", ".claude/new/deep/k.md", key, nil, ReasonSecret},
		{"symlink escape", ".claude/escape/passwd", "owned\n", func(t *testing.T, w *world) {
			os.Symlink(w.outside, filepath.Join(w.ws, ".claude/escape"))
		}, ReasonSymlink},
		{"symlink escape deeper", ".claude/escape/sub/passwd", "owned\n", func(t *testing.T, w *world) {
			os.Symlink(w.outside, filepath.Join(w.ws, ".claude/escape"))
		}, ReasonSymlink},
		{"symlink final component", ".claude/link", "owned\n", func(t *testing.T, w *world) {
			os.Symlink(filepath.Join(w.outside, "passwd"), filepath.Join(w.ws, ".claude/link"))
		}, ReasonSymlink},
		{"relative symlink", ".claude/rel/passwd", "owned\n", func(t *testing.T, w *world) {
			os.Symlink("../../outside", filepath.Join(w.ws, ".claude/rel"))
		}, ReasonSymlink},
		{"dot dot", ".claude/../../outside/passwd", "owned\n", nil, ReasonBadPath},
		{"absolute", "/etc/passwd", "owned\n", nil, ReasonBadPath},
		{"oversized", ".claude/commands/hello.md", strings.Repeat("a", 1025), nil, ReasonTooLarge},
		{"ask folder", ".git/hooks/pre-commit", "#!/bin/sh\n", nil, ReasonApproval},
		{"ask root file", ".envrc", "export X=1\n", nil, ReasonApproval},
		{"ask file", ".claude/settings.json", "{}", nil, ReasonApproval},
		{"not protected", "src/main.go", "package main\n", nil, ReasonNotProtected},
		{"file in the way", ".claude/commands/hello.md/x", "x", nil, ReasonWrongType},
		{"folder in the way", ".claude/commands", "x", nil, ReasonWrongType},
		{"fifo", ".claude/fifo", "x", func(t *testing.T, w *world) {
			syscall.Mkfifo(filepath.Join(w.ws, ".claude/fifo"), 0o644)
		}, ReasonWrongType},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := defaultWorld(t)
			w.put(t, ".claude/commands/hello.md", "old\n")
			w.put(t, ".claude/settings.json", "{}\n")
			if c.plant != nil {
				c.plant(t, w)
			}
			before := w.snapshot(t)
			_, err := w.write(c.path, []byte(c.content), "")
			if got := reasonOf(err); got != c.want {
				t.Fatalf("Write(%q) = %v, want reason %q", c.path, err, c.want)
			}
			if d := cmp.Diff(before, w.snapshot(t)); d != "" {
				t.Errorf("the refused write changed the world (-before +after):\n%s", d)
			}
		})
	}
}

// TestRollback makes writes fail midway (a file size limit: EFBIG) and checks that the old
// content is back, for a root file rewritten in place and for a file replaced atomically.
func TestRollback(t *testing.T) {
	w := newWorld(t, Policy{Protected: []string{".envrc", ".claude/"}, MaxFileSize: 1 << 16})
	w.put(t, ".envrc", "old envrc\n")
	w.put(t, ".claude/a.md", "old a\n")
	before := w.snapshot(t)
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		t.Fatal(err)
	}
	lim := old
	lim.Cur = 4096
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		t.Skipf("set RLIMIT_FSIZE: %v", err)
	}
	big := []byte(strings.Repeat("n", 10000))
	_, errEnvrc := w.write(".envrc", big, "")
	_, errA := w.write(".claude/a.md", big, "")
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{errEnvrc, errA} {
		if reasonOf(err) != ReasonIO || !errors.Is(err, syscall.EFBIG) {
			t.Errorf("Write = %v, want io_error caused by EFBIG", err)
		}
	}
	if d := cmp.Diff(before, w.snapshot(t)); d != "" {
		t.Errorf("a failed write changed the world (-before +after):\n%s", d)
	}
}

func TestEntryLimit(t *testing.T) {
	w := newWorld(t, Policy{Protected: []string{".claude/", ".vscode/"}, MaxEntries: 5})
	for i := range 4 {
		if _, err := w.write(fmt.Sprintf(".claude/f%d", i), nil, ""); err != nil {
			t.Fatal(err)
		}
	}
	before := w.snapshot(t)
	if _, err := w.write(".vscode/a/b", nil, ""); reasonOf(err) != ReasonTooMany {
		t.Fatalf("Write = %v, want too_many_entries", err)
	}
	if d := cmp.Diff(before, w.snapshot(t)); d != "" {
		t.Errorf("the refused write left entries (-before +after):\n%s", d)
	}
	if _, err := w.write(".vscode/x", nil, ""); err != nil {
		t.Fatalf("the fifth entry: %v", err)
	}
	if _, err := w.write(".claude/f0", []byte("rewrite"), ""); err != nil {
		t.Fatalf("rewriting an existing entry at the limit: %v", err)
	}
	if _, err := w.write(".vscode/y", nil, ""); reasonOf(err) != ReasonTooMany {
		t.Fatalf("the sixth entry: %v, want too_many_entries", err)
	}
}

func TestDelete(t *testing.T) {
	for _, c := range []struct {
		name, path string
		want       Reason
		gone       bool
	}{
		{"file", ".claude/commands/hello.md", "", true},
		{"empty folder", ".claude/empty/", "", true},
		{"folder not empty", ".claude/commands", ReasonNotEmpty, false},
		{"protected folder", ".claude/", ReasonProtectedRoot, false},
		{"protected file", ".git/config", ReasonProtectedRoot, false},
		{"symlink", ".claude/escape", ReasonSymlink, false},
		{"through a symlink", ".claude/escape/passwd", ReasonSymlink, false},
		{"missing", ".claude/nothing", ReasonNotFound, false},
		{"file named as a folder", ".claude/commands/hello.md/", ReasonWrongType, false},
		{"special file", ".claude/fifo", ReasonWrongType, false},
		{"ask", ".git/hooks/pre-commit", ReasonApproval, false},
		{"not protected", "src/main.go", ReasonNotProtected, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := defaultWorld(t)
			w.put(t, ".claude/commands/hello.md", "old\n")
			w.put(t, ".git/hooks/pre-commit", "#!/bin/sh\n")
			w.put(t, "src/main.go", "package main\n")
			os.Mkdir(filepath.Join(w.ws, ".claude/empty"), 0o755)
			os.Symlink(w.outside, filepath.Join(w.ws, ".claude/escape"))
			syscall.Mkfifo(filepath.Join(w.ws, ".claude/fifo"), 0o644)
			before := w.snapshot(t)
			_, err := w.remove(c.path)
			if got := reasonOf(err); got != c.want {
				t.Fatalf("Delete(%q) = %v, want reason %q", c.path, err, c.want)
			}
			after := w.snapshot(t)
			key := "/ws/" + strings.TrimSuffix(c.path, "/")
			if _, ok := after[key]; c.gone && ok {
				t.Errorf("%s still there", key)
			}
			if !c.gone {
				if d := cmp.Diff(before, after); d != "" {
					t.Errorf("the refused delete changed the world (-before +after):\n%s", d)
				}
			}
		})
	}
}

func TestRename(t *testing.T) {
	key := string(pemKey(t))
	for _, c := range []struct {
		name, from, to string
		want           Reason
		stripped       bool
	}{
		{"file", ".claude/commands/hello.md", ".claude/commands/bye.md", "", false},
		{"across folders into a new folder", ".claude/commands/hello.md", ".vscode/x/hello.md", "", false},
		{"folder", ".claude/commands", ".claude/cmds", "", false},
		{"exec bit stripped", ".claude/run.sh", ".claude/run2.sh", "", true},
		{"onto an existing file", ".claude/commands/hello.md", ".vscode/settings.json", ReasonExists, false},
		{"secret content", ".claude/k.pem", ".vscode/k.pem", ReasonSecret, false},
		{"too large", ".claude/big", ".vscode/big", ReasonTooLarge, false},
		{"symlink", ".claude/escape", ".claude/escape2", ReasonSymlink, false},
		{"into a symlink", ".claude/commands/hello.md", ".claude/escape/hello.md", ReasonSymlink, false},
		{"missing", ".claude/nothing", ".claude/x", ReasonNotFound, false},
		{"protected folder", ".claude", ".vscode/claude", ReasonProtectedRoot, false},
		{"out of protection", ".claude/commands/hello.md", "src/hello.md", ReasonNotProtected, false},
		{"ask", ".claude/commands/hello.md", ".git/hooks/pre-commit", ReasonApproval, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := defaultWorld(t)
			w.put(t, ".claude/commands/hello.md", "hello\n")
			w.put(t, ".vscode/settings.json", "{}\n")
			w.put(t, ".claude/k.pem", key)
			w.put(t, ".claude/big", strings.Repeat("b", 2000))
			w.put(t, ".claude/run.sh", "#!/bin/sh\n")
			os.Chmod(filepath.Join(w.ws, ".claude/run.sh"), 0o755)
			os.Symlink(w.outside, filepath.Join(w.ws, ".claude/escape"))
			before := w.snapshot(t)
			res, err := w.rename(c.from, c.to)
			if got := reasonOf(err); got != c.want {
				t.Fatalf("Rename = %v, want reason %q", err, c.want)
			}
			after := w.snapshot(t)
			if c.want != "" {
				if d := cmp.Diff(before, after); d != "" {
					t.Errorf("the refused rename changed the world (-before +after):\n%s", d)
				}
				return
			}
			if _, ok := after["/ws/"+c.from]; ok {
				t.Errorf("%s still there", c.from)
			}
			moved, ok := after["/ws/"+c.to]
			if !ok {
				t.Fatalf("%s not there", c.to)
			}
			if res.ExecBitsStripped != c.stripped || c.stripped && !strings.HasPrefix(moved, "-rw-r--r--") {
				t.Errorf("stripped = %v, entry %s", res.ExecBitsStripped, moved)
			}
		})
	}
}

func TestPrepare(t *testing.T) {
	ws := t.TempDir()
	created, err := Prepare(ws, defaultProtected)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{".bashrc", ".claude/", ".envrc", ".git/", ".git/config", ".git/hooks/", ".idea/", ".profile", ".vscode/", ".zshrc"}
	if d := cmp.Diff(want, created); d != "" {
		t.Errorf("created (-want +got):\n%s", d)
	}
	for _, p := range created {
		info, err := os.Lstat(filepath.Join(ws, p))
		if err != nil {
			t.Fatal(err)
		}
		wantMode := fs.FileMode(0o644)
		if strings.HasSuffix(p, "/") {
			wantMode = fs.ModeDir | 0o755
		}
		if info.Mode() != wantMode || !info.IsDir() && info.Size() != 0 {
			t.Errorf("%s: mode %v size %d, want %v and empty", p, info.Mode(), info.Size(), wantMode)
		}
	}
	if again, err := Prepare(ws, defaultProtected); err != nil || len(again) != 0 {
		t.Errorf("second Prepare = %v, %v; want nothing made", again, err)
	}
}

func TestPrepareRefuses(t *testing.T) {
	for _, c := range []struct {
		name  string
		plant func(t *testing.T, ws, outside string)
		entry string
	}{
		{"symlinked folder", func(t *testing.T, ws, outside string) { os.Symlink(outside, filepath.Join(ws, ".claude")) }, ".claude/"},
		{"symlinked file", func(t *testing.T, ws, outside string) {
			os.Symlink(filepath.Join(outside, "f"), filepath.Join(ws, ".envrc"))
		}, ".envrc"},
		{"dangling symlinked file", func(t *testing.T, ws, outside string) {
			os.Symlink(filepath.Join(outside, "none"), filepath.Join(ws, ".envrc"))
		}, ".envrc"},
		{"symlinked ancestor", func(t *testing.T, ws, outside string) { os.Symlink(outside, filepath.Join(ws, ".git")) }, ".git/hooks/"},
		{"file where a folder is", func(t *testing.T, ws, _ string) { os.WriteFile(filepath.Join(ws, ".claude"), nil, 0o644) }, ".claude/"},
		{"folder where a file is", func(t *testing.T, ws, _ string) { os.Mkdir(filepath.Join(ws, ".envrc"), 0o755) }, ".envrc"},
		{"file where an ancestor is", func(t *testing.T, ws, _ string) { os.WriteFile(filepath.Join(ws, ".git"), nil, 0o644) }, ".git/config"},
		{"not clean", func(*testing.T, string, string) {}, "../x"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			ws, outside := filepath.Join(dir, "ws"), filepath.Join(dir, "outside")
			os.Mkdir(ws, 0o755)
			os.Mkdir(outside, 0o755)
			os.WriteFile(filepath.Join(outside, "f"), []byte("outside"), 0o644)
			c.plant(t, ws, outside)
			_, err := Prepare(ws, []string{c.entry})
			if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%q", c.entry)) {
				t.Fatalf("Prepare = %v, want an error naming %q", err, c.entry)
			}
			if entries, _ := os.ReadDir(outside); len(entries) != 1 {
				t.Errorf("Prepare wrote outside the workspace: %v", entries)
			}
		})
	}
}

func TestOpenChecks(t *testing.T) {
	r := testRules(t)
	ws := t.TempDir()
	os.Mkdir(filepath.Join(ws, ".claude"), 0o755)
	_, err := Open(ws, r, testFilter(t))
	if !errors.Is(err, ErrMissing) || !strings.Contains(err.Error(), ".git/hooks/") || strings.Contains(err.Error(), ".claude/") {
		t.Fatalf("Open = %v, want ErrMissing naming .git/hooks/ and not .claude/", err)
	}
	if _, err := Prepare(ws, defaultProtected); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(ws, ".vscode"))
	os.Symlink("/etc", filepath.Join(ws, ".vscode"))
	if _, err = Open(ws, r, testFilter(t)); err == nil || errors.Is(err, ErrMissing) || !strings.Contains(err.Error(), ".vscode/") {
		t.Fatalf("Open = %v, want an error naming the symlinked .vscode/", err)
	}
}
