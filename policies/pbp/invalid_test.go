package pbp_test

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sharness-ai/sharness/policies/pbp"
)

var update = flag.Bool("update", false, "rewrite policies/testdata/invalid/*/want.txt from the loader's current errors (review the diff!)")

const invalidDir = "../testdata/invalid"

// Cases whose error is not about one field: they may have no line (the file is unreadable or
// holds no YAML at all) or no field (the problem is the file's shape, not a field in it).
var (
	noLine  = map[string]bool{"empty-file": true, "comment-only-file": true, "layer-empty-file": true, "layer-missing-file": true}
	noField = map[string]bool{"empty-file": true, "comment-only-file": true, "layer-empty-file": true, "layer-missing-file": true,
		"two-documents": true, "non-string-key": true}
)

// invalidCases lists every folder under testdata/invalid, so that a new folder is a new case.
func invalidCases(t testing.TB) []string {
	t.Helper()
	entries, err := os.ReadDir(invalidDir)
	if err != nil {
		t.Fatal(err)
	}
	var cases []string
	for _, e := range entries {
		if e.IsDir() {
			cases = append(cases, e.Name())
		}
	}
	if len(cases) < 50 {
		t.Fatalf("only %d cases under %s", len(cases), invalidDir)
	}
	return cases
}

// TestInvalid loads every negative fixture and requires the exact error of want.txt: each one
// is refused, for its reason, naming the file, the line and the field.
func TestInvalid(t *testing.T) {
	for _, name := range invalidCases(t) {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(invalidDir, name)
			m, err := pbp.Load(os.DirFS(dir), "manifest.yaml")
			if err == nil {
				t.Fatalf("Load accepted the manifest (policy %s); want an error", m.Hash)
			}
			wantFile := filepath.Join(dir, "want.txt")
			if *update {
				if err := os.WriteFile(wantFile, []byte(err.Error()+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			raw, rerr := os.ReadFile(wantFile)
			if rerr != nil {
				t.Fatal(rerr)
			}
			want := strings.TrimSuffix(string(raw), "\n")
			if strings.Contains(want, "\n") {
				t.Fatalf("want.txt must hold one line, has %q", want)
			}
			if got := err.Error(); got != want {
				t.Errorf("Load error\n got: %s\nwant: %s", got, want)
			}

			var pe *pbp.Error
			if !errors.As(err, &pe) {
				t.Fatalf("error is a %T, not a *pbp.Error: %v", err, err)
			}
			if pe.File != "manifest.yaml" && !strings.HasPrefix(pe.File, "layers/") {
				t.Errorf("error names file %q, want manifest.yaml or a layers/ file", pe.File)
			}
			if !noLine[name] && pe.Line <= 0 {
				t.Errorf("error names no line (Line=%d): %v", pe.Line, err)
			}
			if !noField[name] && pe.Field == "" {
				t.Errorf("error names no field: %v", err)
			}
		})
	}
}

// TestInvalidWithLayers makes sure every layer a fixture's manifest needs is really there, so a
// fixture cannot pass by failing to read a file it was meant to have.
func TestInvalidWithLayers(t *testing.T) {
	for _, name := range invalidCases(t) {
		if name == "layer-missing-file" {
			continue
		}
		dir := filepath.Join(invalidDir, name)
		err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			switch rel, _ := filepath.Rel(dir, p); {
			case rel == "manifest.yaml", rel == "want.txt", strings.HasPrefix(rel, "layers"+string(filepath.Separator)):
			default:
				t.Errorf("%s: unexpected file %s", name, rel)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := pbp.Load(os.DirFS(dir), "manifest.yaml"); err != nil && strings.Contains(err.Error(), "cannot read") {
			t.Errorf("%s: %v", name, err)
		}
	}
}
