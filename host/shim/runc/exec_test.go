package runc

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// TestWriteJSON: the handover replaces a bundle's config.json (host/shim's
// TestDecideNarrowsMaskedPaths makes the narrowed spec) whole, leaving no temporary file beside it.
func TestWriteJSON(t *testing.T) {
	spec := &specs.Spec{Version: specs.Version, Root: &specs.Root{Path: "rootfs", Readonly: true},
		Linux: &specs.Linux{MaskedPaths: []string{"/proc/kcore", "/proc/interrupts", "/sys/devices/virtual/powercap"}}}
	dir := t.TempDir()
	path := filepath.Join(dir, "config.json")
	if err := os.WriteFile(path, []byte(`{"ociVersion":"1.0.2"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := writeJSON(path, spec); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var back specs.Spec
	err = decodeStrict(data, &back)
	if err != nil || back.Linux == nil || !slices.Equal(back.Linux.MaskedPaths, spec.Linux.MaskedPaths) {
		t.Errorf("written spec: %v, masked %v", err, back.Linux)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("writeJSON left %d files, want config.json alone", len(entries))
	}
}
