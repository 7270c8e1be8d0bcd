// Package artefact writes compiled artefacts to disk all-or-nothing and compares a folder with
// what a manifest compiles to. It is host-side I/O for the pure compiler.
//
// Write is atomic per file (temporary file, fsync, rename) and stages every file before the
// first rename, so a failure while staging leaves the previous output untouched. It does not
// make the set of renames one transaction: a crash between two renames can leave a mix, which
// `sharness-ai compile --check` then reports.
package artefact

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
)

// Write puts every artefact under dir.
func Write(dir string, files map[string][]byte) error {
	type staged struct{ tmp, final string }
	var done []staged
	cleanup := func() {
		for _, s := range done {
			os.Remove(s.tmp)
		}
	}
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		final := filepath.Join(dir, filepath.FromSlash(p))
		tmp, err := stage(final, files[p])
		if err != nil {
			cleanup()
			return fmt.Errorf("write %s: %w", final, err)
		}
		done = append(done, staged{tmp, final})
	}
	for i, s := range done {
		if err := os.Rename(s.tmp, s.final); err != nil {
			cleanup()
			return fmt.Errorf("write %s (after %d of %d files): %w", s.final, i, len(done), err)
		}
	}
	return nil
}

func stage(final string, data []byte) (string, error) {
	if err := os.MkdirAll(filepath.Dir(final), 0o755); err != nil {
		return "", err
	}
	f, err := os.CreateTemp(filepath.Dir(final), "."+filepath.Base(final)+".tmp-*")
	if err != nil {
		return "", err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(0o644)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}

// Drift is one difference between a folder and the expected artefacts.
type Drift struct {
	Path   string `json:"path"`
	Reason string `json:"reason"` // "missing", "differs", "unexpected"
}

// Check compares dir with files. Files under any of the owned folders that the manifest does
// not produce are reported as unexpected.
func Check(dir string, files map[string][]byte, owned ...string) ([]Drift, error) {
	var drift []Drift
	for p, want := range files {
		got, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(p)))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			drift = append(drift, Drift{p, "missing"})
		case err != nil:
			return nil, fmt.Errorf("check %s: %w", p, err)
		case !bytes.Equal(got, want):
			drift = append(drift, Drift{p, "differs"})
		}
	}
	for _, o := range owned {
		root := filepath.Join(dir, filepath.FromSlash(o))
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			if err != nil || d.IsDir() {
				return err
			}
			rel, _ := filepath.Rel(dir, p)
			if _, ok := files[filepath.ToSlash(rel)]; !ok {
				drift = append(drift, Drift{filepath.ToSlash(rel), "unexpected"})
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("check %s: %w", root, err)
		}
	}
	sort.Slice(drift, func(i, j int) bool { return drift[i].Path < drift[j].Path })
	return drift, nil
}
