package artefact

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestWriteThenCheck(t *testing.T) {
	dir := t.TempDir()
	files := map[string][]byte{"a.yml": []byte("a\n"), "compiled/x/config.json": []byte("{}\n")}
	if err := Write(dir, files); err != nil {
		t.Fatal(err)
	}
	drift, err := Check(dir, files, "compiled")
	if err != nil || len(drift) != 0 {
		t.Fatalf("Check after Write: %v, %v; want no drift", drift, err)
	}
	os.WriteFile(filepath.Join(dir, "compiled/x/config.json"), []byte("changed"), 0o644)
	os.WriteFile(filepath.Join(dir, "compiled/stale.json"), []byte("{}"), 0o644)
	os.Remove(filepath.Join(dir, "a.yml"))
	drift, err = Check(dir, files, "compiled")
	if err != nil {
		t.Fatal(err)
	}
	want := []Drift{{"a.yml", "missing"}, {"compiled/stale.json", "unexpected"}, {"compiled/x/config.json", "differs"}}
	if diff := cmp.Diff(want, drift); diff != "" {
		t.Fatalf("drift (-want +got):\n%s", diff)
	}
}

// TestFailedWriteLeavesOldOutput: when one file cannot be staged, no file is replaced and no
// temporary file is left behind.
func TestFailedWriteLeavesOldOutput(t *testing.T) {
	dir := t.TempDir()
	old := map[string][]byte{"a.yml": []byte("old\n")}
	if err := Write(dir, old); err != nil {
		t.Fatal(err)
	}
	// "blocked" is a file, so staging "blocked/b.json" fails after "a.yml" was staged.
	os.WriteFile(filepath.Join(dir, "blocked"), nil, 0o644)
	err := Write(dir, map[string][]byte{"a.yml": []byte("new\n"), "blocked/b.json": []byte("{}")})
	if err == nil {
		t.Fatal("Write succeeded; want an error")
	}
	got, _ := os.ReadFile(filepath.Join(dir, "a.yml"))
	if string(got) != "old\n" {
		t.Fatalf("a.yml = %q after a failed write; want the old content", got)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Fatalf("folder holds %d entries after a failed write; want a.yml and blocked only", len(entries))
	}
}
