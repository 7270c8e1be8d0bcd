package shim

import (
	"path"
	"slices"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// Narrow adds to got what the compiled policy wants and the engine left out but can only narrow
// the container: the policy's masked and read-only paths (Docker 20.10 masks neither
// /proc/interrupts nor /sys/devices/virtual/powercap, which runc's defaults and the compiler
// do), and the nosuid, nodev and noexec flags of each compiled mount on the engine's mount at the
// same destination (a compose bind cannot carry them, and Docker 20.10 leaves noexec off /dev:
// measured, testdata/docker-20.10). Without noexec on the workspace, Landlock alone stands
// between the agent and a program it wrote there, and Landlock does not stop the loader
// (`ld.so /workspace/prog`). It reports whether it changed got; the caller then writes the
// bundle's config.json back before runc reads it.
func Narrow(want, got *specs.Spec) bool {
	if want == nil || got == nil {
		return false
	}
	changed := false
	if want.Linux != nil {
		if got.Linux == nil {
			got.Linux = &specs.Linux{}
		}
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
	}
	flags := map[string]mountFlag{}
	for _, m := range want.Mounts {
		flags[path.Clean(m.Destination)] = effective(m.Options) & (flagNosuid | flagNodev | flagNoexec)
	}
	for i, m := range got.Mounts {
		lack := flags[path.Clean(m.Destination)] &^ effective(m.Options)
		for _, f := range []struct {
			flag mountFlag
			name string
		}{{flagNosuid, "nosuid"}, {flagNodev, "nodev"}, {flagNoexec, "noexec"}} {
			if lack&f.flag != 0 {
				// Appended last, so that it wins over an earlier "exec" (mount(8)'s rule).
				got.Mounts[i].Options = append(slices.Clone(got.Mounts[i].Options), f.name)
				changed = true
			}
		}
	}
	return changed
}
