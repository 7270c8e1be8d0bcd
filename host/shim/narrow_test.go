package shim

import (
	"slices"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

func TestNarrow(t *testing.T) {
	want := &specs.Spec{Linux: &specs.Linux{MaskedPaths: []string{"/proc/kcore", "/proc/interrupts"}, ReadonlyPaths: []string{"/proc/sys"}}}
	got := &specs.Spec{Linux: &specs.Linux{MaskedPaths: []string{"/proc/kcore", "/proc/extra"}}}
	if !Narrow(want, got) {
		t.Fatal("Narrow changed nothing")
	}
	if !slices.Equal(got.Linux.MaskedPaths, []string{"/proc/kcore", "/proc/extra", "/proc/interrupts"}) ||
		!slices.Equal(got.Linux.ReadonlyPaths, []string{"/proc/sys"}) {
		t.Errorf("after Narrow: masked %v, read-only %v", got.Linux.MaskedPaths, got.Linux.ReadonlyPaths)
	}
	if Narrow(want, got) {
		t.Error("a second Narrow changed something")
	}
	if Narrow(&specs.Spec{}, got) || Narrow(want, nil) {
		t.Error("Narrow without a policy or a spec changed something")
	}
}
