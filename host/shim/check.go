package shim

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// Check returns every way got (the config.json an engine wrote into a bundle, for create and
// run) is wider than want (the component's compiled config.json). No refusal means allowed.
func Check(want, got *specs.Spec) []Reason {
	if want == nil || got == nil {
		return []Reason{{Field: "spec", Want: "a compiled policy and a bundle spec", Got: "none"}}
	}
	var out []Reason
	if got.Root == nil || !got.Root.Readonly {
		out = append(out, Reason{Field: "root.readonly", Want: "true", Got: "false"})
	}
	if got.Process == nil {
		out = append(out, Reason{Field: "process", Want: "a process", Got: "none"})
	} else {
		out = append(out, CheckProcess(want, got.Process)...)
	}
	out = append(out, checkMounts(want.Mounts, got.Mounts)...)
	wl, gl := linuxOf(want), linuxOf(got)
	out = append(out, checkNamespaces(wl.Namespaces, gl.Namespaces)...)
	out = append(out, checkSeccomp(wl.Seccomp, gl.Seccomp)...)
	if len(gl.Devices) > 0 {
		var paths []string
		for _, d := range gl.Devices {
			paths = append(paths, d.Path)
		}
		out = append(out, Reason{Field: "linux.devices", Want: "none", Got: strings.Join(paths, ",")})
	}
	out = append(out, checkResources(wl.Resources, gl.Resources, true)...)
	out = append(out, missing("linux.maskedPaths", wl.MaskedPaths, gl.MaskedPaths)...)
	out = append(out, missing("linux.readonlyPaths", wl.ReadonlyPaths, gl.ReadonlyPaths)...)
	for _, k := range sortedKeys(wl.Sysctl) {
		if v, ok := gl.Sysctl[k]; !ok || v != wl.Sysctl[k] {
			out = append(out, Reason{Field: "linux.sysctl[" + k + "]", Want: strconv.Quote(wl.Sysctl[k]), Got: orUnset(v, ok)})
		}
	}
	return out
}

// CheckProcess returns every way p (the process of a create, or of `exec --process`) is wider
// than want's process. The terminal, arguments, environment and working folder are the caller's.
func CheckProcess(want *specs.Spec, p *specs.Process) []Reason {
	if want == nil || want.Process == nil || p == nil {
		return []Reason{{Field: "process", Want: "a compiled process", Got: "none"}}
	}
	w := want.Process
	var out []Reason
	// Without capabilities runc leaves the process the ones it has (all of root's): fail closed.
	if p.Capabilities == nil {
		out = append(out, Reason{Field: "process.capabilities", Want: "explicit sets", Got: "none (the runtime's defaults)"})
	} else {
		wc := w.Capabilities
		if wc == nil {
			wc = &specs.LinuxCapabilities{}
		}
		out = append(out, extraCaps("bounding", wc.Bounding, p.Capabilities.Bounding)...)
		out = append(out, extraCaps("effective", wc.Effective, p.Capabilities.Effective)...)
		out = append(out, extraCaps("inheritable", wc.Inheritable, p.Capabilities.Inheritable)...)
		out = append(out, extraCaps("permitted", wc.Permitted, p.Capabilities.Permitted)...)
		out = append(out, extraCaps("ambient", wc.Ambient, p.Capabilities.Ambient)...)
	}
	if p.User.UID == 0 || p.User.UID != w.User.UID {
		out = append(out, Reason{Field: "process.user.uid", Want: fmt.Sprint(w.User.UID), Got: fmt.Sprint(p.User.UID)})
	}
	if p.User.GID == 0 || p.User.GID != w.User.GID {
		out = append(out, Reason{Field: "process.user.gid", Want: fmt.Sprint(w.User.GID), Got: fmt.Sprint(p.User.GID)})
	}
	var extraGids []string
	for _, g := range p.User.AdditionalGids {
		if g == 0 || (g != w.User.GID && !slices.Contains(w.User.AdditionalGids, g)) {
			extraGids = append(extraGids, fmt.Sprint(g))
		}
	}
	if len(extraGids) > 0 {
		out = append(out, Reason{Field: "process.user.additionalGids", Want: fmt.Sprint(w.User.AdditionalGids), Got: strings.Join(extraGids, ",")})
	}
	if !p.NoNewPrivileges {
		out = append(out, Reason{Field: "process.noNewPrivileges", Want: "true", Got: "false"})
	}
	if !labelAllowed(w.ApparmorProfile, p.ApparmorProfile) {
		out = append(out, Reason{Field: "process.apparmorProfile", Want: orEngine(w.ApparmorProfile), Got: p.ApparmorProfile})
	}
	if !labelAllowed(w.SelinuxLabel, p.SelinuxLabel) {
		out = append(out, Reason{Field: "process.selinuxLabel", Want: orEngine(w.SelinuxLabel), Got: p.SelinuxLabel})
	}
	return out
}

// CheckResources returns every way r (what `update` asks for) widens want's limits. A nil field
// leaves the current value; a limit at or below zero removes it (runc's -1) and is refused.
func CheckResources(want *specs.Spec, r *specs.LinuxResources) []Reason {
	if r == nil {
		return nil
	}
	return checkResources(linuxOf(want).Resources, r, false)
}

// extraCaps refuses the capabilities of one set that want's same set lacks. Names are compared
// upper-case with the CAP_ prefix, so "net_admin" cannot slip past as an unknown spelling.
func extraCaps(set string, want, got []string) []Reason {
	var extra []string
	for _, c := range got {
		if n := capName(c); !slices.ContainsFunc(want, func(w string) bool { return capName(w) == n }) {
			extra = append(extra, n)
		}
	}
	if len(extra) == 0 {
		return nil
	}
	return []Reason{{Field: "process.capabilities." + set, Want: listOrNone(want), Got: strings.Join(extra, ",")}}
}

func capName(c string) string {
	c = strings.ToUpper(strings.TrimSpace(c))
	if !strings.HasPrefix(c, "CAP_") {
		c = "CAP_" + c
	}
	return c
}

// labelAllowed: an empty label inherits the container's (runc exec) or the engine's default
// (docker-default); "unconfined" and SELinux's unconfined and super-privileged types are refused;
// when the policy names a label, only that one. Limitation: with no label in the policy, another
// named profile is accepted, since the engine picks the default one.
func labelAllowed(want, got string) bool {
	switch {
	case got == "":
		return true
	case got == "unconfined" || strings.Contains(got, "unconfined_t") || strings.Contains(got, ":spc_t"):
		return false
	case want != "":
		return got == want
	default:
		return true
	}
}

// checkResources compares the pids, memory and swap limits and the device cgroup. required is
// true at create, where a missing limit means none.
func checkResources(want, got *specs.LinuxResources, required bool) []Reason {
	if want == nil {
		want = &specs.LinuxResources{}
	}
	if got == nil {
		got = &specs.LinuxResources{}
	}
	var out []Reason
	var wantPids, gotPids *int64
	if want.Pids != nil {
		wantPids = want.Pids.Limit
	}
	if got.Pids != nil {
		gotPids = got.Pids.Limit
	}
	var wantMem, gotMem, wantSwap, gotSwap *int64
	if want.Memory != nil {
		wantMem, wantSwap = want.Memory.Limit, want.Memory.Swap
	}
	if got.Memory != nil {
		gotMem, gotSwap = got.Memory.Limit, got.Memory.Swap
	}
	for _, l := range []struct {
		field     string
		want, got *int64
	}{
		{"linux.resources.pids.limit", wantPids, gotPids},
		{"linux.resources.memory.limit", wantMem, gotMem},
		{"linux.resources.memory.swap", wantSwap, gotSwap},
	} {
		if l.want == nil && l.field == "linux.resources.memory.swap" {
			continue // the policy sets no swap limit of its own
		}
		if !limitAllowed(l.want, l.got, required) {
			out = append(out, Reason{Field: l.field, Want: limitText(l.want), Got: limitText(l.got)})
		}
	}
	var extra []string
	for _, d := range got.Devices {
		if d.Allow && !defaultDevice(d) {
			extra = append(extra, deviceText(d))
		}
	}
	if len(extra) > 0 {
		out = append(out, Reason{Field: "linux.resources.devices", Want: "runc's default devices only", Got: strings.Join(extra, ",")})
	}
	return out
}

// limitAllowed: a limit is set, positive, and no higher than the policy's.
func limitAllowed(want, got *int64, required bool) bool {
	switch {
	case got == nil:
		return !required
	case *got <= 0:
		return false
	case want == nil:
		return true
	default:
		return *got <= *want
	}
}

func limitText(v *int64) string {
	switch {
	case v == nil:
		return "none"
	case *v <= 0:
		return strconv.FormatInt(*v, 10) + " (unlimited)"
	}
	return strconv.FormatInt(*v, 10)
}

// defaultDevice is an allow rule for a device runc creates and allows in every container anyway
// (libcontainer's AllowedDevices: null, zero, full, random, urandom, tty, console, ptmx, the pts,
// and mknod without read or write, which needs CAP_MKNOD besides).
func defaultDevice(d specs.LinuxDeviceCgroup) bool {
	major, minor := int64(-1), int64(-1)
	if d.Major != nil {
		major = *d.Major
	}
	if d.Minor != nil {
		minor = *d.Minor
	}
	if d.Access == "m" && major == -1 && minor == -1 && (d.Type == "c" || d.Type == "b") {
		return true
	}
	if d.Type != "c" || strings.Trim(d.Access, "rwm") != "" || d.Access == "" {
		return false
	}
	switch {
	case major == 1 && slices.Contains([]int64{3, 5, 7, 8, 9}, minor),
		major == 5 && slices.Contains([]int64{0, 1, 2}, minor),
		major == 136 && minor == -1:
		return true
	}
	return false
}

func deviceText(d specs.LinuxDeviceCgroup) string {
	n := func(v *int64) string {
		if v == nil || *v < 0 {
			return "*"
		}
		return strconv.FormatInt(*v, 10)
	}
	t := d.Type
	if t == "" {
		t = "a"
	}
	return fmt.Sprintf("%s %s:%s %s", t, n(d.Major), n(d.Minor), d.Access)
}

// missing refuses want's entries that got lacks (masked and read-only paths).
func missing(field string, want, got []string) []Reason {
	var lack []string
	for _, p := range want {
		if !slices.Contains(got, p) {
			lack = append(lack, p)
		}
	}
	if len(lack) == 0 {
		return nil
	}
	return []Reason{{Field: field, Want: strings.Join(want, ","), Got: "without " + strings.Join(lack, ",")}}
}

func linuxOf(s *specs.Spec) *specs.Linux {
	if s == nil || s.Linux == nil {
		return &specs.Linux{}
	}
	return s.Linux
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func orUnset(v string, ok bool) string {
	if !ok {
		return "unset"
	}
	return strconv.Quote(v)
}

func orEngine(label string) string {
	if label == "" {
		return "the engine's default"
	}
	return label
}

func listOrNone(l []string) string {
	if len(l) == 0 {
		return "none"
	}
	return strings.Join(l, ",")
}
