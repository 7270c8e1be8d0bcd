package shim

import (
	"slices"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// Grant gives got's process the capabilities of the compiled policy that the engine leaves out
// for a non-root user: Docker (since 20.10.14, CVE-2022-24769) sets only the bounding set for a
// container whose user is not root, "to match what execve does", and no compose key names the
// ambient set, so a capability the policy grants (kms's CAP_IPC_LOCK) is in no set the process
// can use, and would be dropped at the first execve anyway. Grant adds to the effective,
// permitted, inheritable and ambient sets what the compiled policy names in each, for a
// capability the engine's bounding set holds (the engine's say that this container may have it at
// all), so that the result is never wider than the compiled policy, which Check has held every
// set of got to. Run it after Check. It reports whether it changed got.
func Grant(want, got *specs.Spec) bool {
	if want == nil || got == nil || want.Process == nil || want.Process.Capabilities == nil ||
		got.Process == nil || got.Process.Capabilities == nil {
		return false
	}
	w, g := want.Process.Capabilities, got.Process.Capabilities
	has := func(set []string, c string) bool {
		return slices.ContainsFunc(set, func(x string) bool { return capName(x) == capName(c) })
	}
	changed := false
	add := func(set *[]string, from []string, also ...[]string) {
		for _, c := range from {
			ok := has(g.Bounding, c) && !has(*set, c)
			for _, need := range also {
				ok = ok && has(need, c)
			}
			if ok {
				*set = append(*set, capName(c))
				changed = true
			}
		}
	}
	add(&g.Permitted, w.Permitted)
	add(&g.Effective, w.Effective, g.Permitted) // the kernel refuses an effective one not permitted
	add(&g.Inheritable, w.Inheritable)
	add(&g.Ambient, w.Ambient, g.Permitted, g.Inheritable) // and an ambient one not both
	return changed
}
