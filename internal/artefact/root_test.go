package artefact

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// TestWriteIn: a new file gets exactly its bytes and mode; exclusive refuses an existing name
// with fs.ErrExist and leaves it as it was; otherwise the file is replaced; no temporary file is
// left either way; a symlink planted as the folder's name does not lead the write outside root.
func TestWriteIn(t *testing.T) {
	dir := t.TempDir()
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if err := WriteIn(root, "a", []byte("one"), 0o600, true); err != nil {
		t.Fatal(err)
	}
	if err := WriteIn(root, "a", []byte("two"), 0o600, true); !errors.Is(err, fs.ErrExist) {
		t.Errorf("exclusive over an existing file: %v, want fs.ErrExist", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "a")); string(b) != "one" {
		t.Errorf("after the refused write: %q", b)
	}
	if err := WriteIn(root, "a", []byte("three"), 0o644, false); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "a")); string(b) != "three" {
		t.Errorf("after the replacing write: %q", b)
	}
	if st, _ := os.Stat(filepath.Join(dir, "a")); st.Mode().Perm() != 0o644 {
		t.Errorf("mode %04o, want 0644", st.Mode().Perm())
	}
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := WriteIn(root, "link/escape", []byte("x"), 0o644, true); err == nil {
		t.Error("a write through a symlink to outside the root succeeded")
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Errorf("outside the root: %v", entries)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Errorf("left in the folder: %v, want a and link only", entries)
	}
}
