package shim

import (
	"slices"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// Narrow adds to got what the compiled policy wants and the engine left out but can only narrow
// the container: the policy's masked and read-only paths (Docker 20.10 masks neither
// /proc/interrupts nor /sys/devices/virtual/powercap, which runc's defaults and the compiler
// do). It reports whether it changed got; the caller then writes the bundle's config.json back
// before runc reads it.
func Narrow(want, got *specs.Spec) bool {
	if want == nil || want.Linux == nil || got == nil {
		return false
	}
	if got.Linux == nil {
		got.Linux = &specs.Linux{}
	}
	changed := false
	add := func(have *[]string, need []string) {
		for _, p := range need {
			if !slices.Contains(*have, p) {
				*have = append(*have, p)
				changed = true
			}
		}
	}
	add(&got.Linux.MaskedPaths, want.Linux.MaskedPaths)
	add(&got.Linux.ReadonlyPaths, want.Linux.ReadonlyPaths)
	return changed
}
