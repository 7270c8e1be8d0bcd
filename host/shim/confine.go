package shim

import (
	"fmt"
	"slices"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/sharness-ai/sharness/host/shim/restrict"
	"github.com/sharness-ai/sharness/policies/landlock"
)

// HelperMount is where the shim binds the Landlock helper (cmd/sharness-landlock) into a
// container, read-only: a file at the root, so that no folder of the image is shadowed.
const HelperMount = landlock.HelperPath

// DefaultHelper is where hack/runtime.sh installs the helper on the host.
const DefaultHelper = "/usr/local/lib/sharness-ai/sharness-landlock"

// Domain reads the Landlock domain of a compiled policy. A policy compiled before the domain
// existed has none: a refusal, since running without it would be a silent degradation.
func Domain(want *specs.Spec) (landlock.Domain, []Reason) {
	s, ok := want.Annotations[landlock.Annotation]
	if !ok {
		return landlock.Domain{}, []Reason{{Field: "annotations." + landlock.Annotation,
			Want: "a Landlock domain in the compiled policy (reinstall it: sharness-ai install)", Got: "none"}}
	}
	d, err := landlock.Parse(s)
	if err != nil {
		return landlock.Domain{}, []Reason{{Field: "annotations." + landlock.Annotation, Want: "a valid Landlock domain", Got: err.Error()}}
	}
	return d, nil
}

// Confine puts got's process under d, the compiled policy's Landlock domain (Domain): it binds
// the helper at HelperMount and makes it the process's first argument (HelperMount DOMAIN --
// ARGS...: DOMAIN in the helper's compact encoding, restrict.Domain.Encode, which it reads without
// a JSON decoder). It refuses an enforced domain on a kernel below landlock.MinABI. A per_command domain
// (bash) leaves got as it is; changed says whether got was changed. Run it after Check: the
// helper's mount is not in the policy, and Check would refuse it.
func Confine(d landlock.Domain, got *specs.Spec, helper string, kernelABI int) (changed bool, rs []Reason) {
	switch {
	case d.Mode == landlock.PerCommand:
		return false, nil
	case d.Mode == landlock.Enforce && kernelABI < landlock.MinABI:
		return false, []Reason{{Field: "landlock", Want: fmt.Sprintf("Landlock ABI %d or later (process.landlock: enforce)", landlock.MinABI),
			Got: fmt.Sprintf("the kernel's ABI %d", kernelABI)}}
	case got.Process == nil || len(got.Process.Args) == 0:
		return false, []Reason{{Field: "process.args", Want: "a process to confine", Got: "none"}}
	}
	// With `init: true` the engine's init (read-only, checked as an engine mount) is the first
	// program: it runs inside the domain too, so it must be executable there.
	if got.Process.Args[0] == dockerInit {
		d.Exec = append(d.Exec, dockerInit)
	}
	got.Mounts = append(got.Mounts, specs.Mount{Destination: HelperMount, Type: "bind", Source: helper,
		Options: []string{"bind", "ro", "nosuid", "nodev"}})
	got.Process.Args = wrap(d, got.Process.Args)
	return true, nil
}

// dockerInit is where Docker mounts its init (tini) for `init: true`.
const dockerInit = "/sbin/docker-init"

// ConfineProcess wraps a process that joins a confined container (`exec`) in the same domain d,
// through the helper Confine bound at create. A per_command domain leaves it as it is.
func ConfineProcess(d landlock.Domain, p *specs.Process) (changed bool, rs []Reason) {
	switch {
	case d.Mode == landlock.PerCommand:
		return false, nil
	case len(p.Args) == 0:
		return false, []Reason{{Field: "process.args", Want: "a process to confine", Got: "none"}}
	}
	p.Args = wrap(d, p.Args)
	return true, nil
}

func wrap(d landlock.Domain, args []string) []string {
	return slices.Concat([]string{HelperMount, helperDomain(d).Encode(), "--"}, args)
}

// helperDomain is d as the helper reads it. Every mode but best_effort is enforced: Confine and
// ConfineProcess never wrap per_command, and landlock.Parse knows no other mode.
func helperDomain(d landlock.Domain) restrict.Domain {
	return restrict.Domain{BestEffort: d.Mode == landlock.BestEffort, Exec: d.Exec, Write: d.Write,
		Bind: d.Bind, Connect: d.Connect, AnyConnect: d.AnyConnect}
}
