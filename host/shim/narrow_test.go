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

// TestGrant: the compiled capability sets are added to the spec Docker writes for a non-root user
// (the bounding set alone, since 20.10.14: measured on the stack's kms), only for what the
// engine's bounding set holds, and what Grant makes still passes the capability check against the
// compiled spec.
func TestGrant(t *testing.T) {
	ipc := []string{"CAP_IPC_LOCK"}
	compiled := &specs.Spec{Process: &specs.Process{Capabilities: &specs.LinuxCapabilities{
		Bounding: ipc, Effective: ipc, Permitted: ipc, Inheritable: ipc, Ambient: ipc}}}
	docker := func(b []string) *specs.Spec {
		return &specs.Spec{Process: &specs.Process{Capabilities: &specs.LinuxCapabilities{Bounding: b}}}
	}
	tests := []struct {
		name      string
		want, got *specs.Spec
		changed   bool
		sets      []string // effective, permitted, inheritable and ambient after Grant
	}{
		{"Docker's non-root kms", compiled, docker(ipc), true, ipc},
		{"lower-case without the prefix, as a hand-written spec may", compiled, docker([]string{"ipc_lock"}), true, ipc},
		{"not in the engine's bounding set", compiled, docker(nil), false, nil},
		{"a policy that grants nothing", &specs.Spec{Process: &specs.Process{Capabilities: &specs.LinuxCapabilities{}}}, docker(ipc), false, nil},
		{"a policy without process", &specs.Spec{}, docker(ipc), false, nil},
		{"no capabilities object from the engine", compiled, &specs.Spec{Process: &specs.Process{}}, false, nil},
		{"a policy that bounds but never makes it ambient", &specs.Spec{Process: &specs.Process{Capabilities: &specs.LinuxCapabilities{Bounding: ipc, Permitted: ipc}}},
			docker(ipc), true, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			reasons := func() int {
				if tc.want.Process == nil || tc.got.Process.Capabilities == nil {
					return 0
				}
				return len(checkCapabilities(nil, "process.capabilities", tc.want.Process.Capabilities, tc.got.Process.Capabilities))
			}
			before := reasons()
			if got := Grant(tc.want, tc.got); got != tc.changed {
				t.Fatalf("Grant changed: %v, want %v", got, tc.changed)
			}
			c := tc.got.Process.Capabilities
			if c == nil {
				return
			}
			if tc.sets != nil {
				for name, set := range map[string][]string{"effective": c.Effective, "permitted": c.Permitted, "inheritable": c.Inheritable, "ambient": c.Ambient} {
					if !slices.Equal(set, tc.sets) {
						t.Errorf("%s %v, want %v", name, set, tc.sets)
					}
				}
			}
			if len(c.Ambient) > 0 && (len(c.Inheritable) == 0 || len(c.Permitted) == 0) {
				t.Errorf("ambient %v without inheritable %v and permitted %v: the kernel refuses it", c.Ambient, c.Inheritable, c.Permitted)
			}
			if after := reasons(); after != before {
				t.Errorf("Grant made the spec wider than the compiled policy: %d capability refusals before, %d after", before, after)
			}
			if Grant(tc.want, tc.got) {
				t.Error("a second Grant changed something")
			}
		})
	}
}
