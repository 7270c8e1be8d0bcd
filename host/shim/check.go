package shim

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/sharness-ai/sharness/internal/strictjson"
	"github.com/sharness-ai/sharness/policies/compile"
	"github.com/sharness-ai/sharness/policies/pbp"
)

// Check returns every way got (the config.json an engine wrote into a bundle, for create and
// run) is wider than want (the component's compiled config.json), field by field under the rules
// of the allowlist (allow.go). f is what the host found about got's mount sources and hooks
// (host.Facts); a source or a hook it does not describe is refused. No refusal means allowed.
func Check(want, got *specs.Spec, f Facts) []Reason {
	if want == nil || got == nil {
		return []Reason{{Field: "spec", Want: "a compiled policy and a bundle spec", Got: "none"}}
	}
	c := &comparison{want: want, facts: f}
	return c.walk("", reflect.ValueOf(want), reflect.ValueOf(got))
}

// CheckProcess returns every way p (the process of `exec --process`, or of the container with
// exec's flags applied) is wider than want's process, under the same rules as a create's.
// An exec needs no fact beyond f.ID: its environment is held to the compiled spec alone
// (envExceptions).
func CheckProcess(want *specs.Spec, p *specs.Process, f Facts) []Reason {
	if want == nil || want.Process == nil || p == nil {
		return []Reason{{Field: "process", Want: "a compiled process", Got: "none"}}
	}
	c := &comparison{want: want, facts: f, exec: true}
	return c.field("process", reflect.ValueOf(want.Process), reflect.ValueOf(p))
}

// CheckResources returns every way r (what `update` asks for) widens want's resources, under the
// same rules as a create's, except that a field r leaves unset, or a limit it gives as 0, keeps
// the container's value (runc's update writes neither: checkLimit). A negative limit removes it
// (runc's -1) and is refused.
func CheckResources(want *specs.Spec, r *specs.LinuxResources) []Reason {
	if r == nil {
		return nil
	}
	c := &comparison{want: want, update: true}
	return c.field("linux.resources", reflect.ValueOf(linuxOf(want).Resources), reflect.ValueOf(unchangedAtZero(r)))
}

// unchangedAtZero is r with the real-time CPU fields that are 0 left out: runc's update starts
// them at 0 and its cgroup managers write them only when they are not (as for the limits,
// checkLimit), so a 0 there changes nothing, while the policy's value for them is "none".
func unchangedAtZero(r *specs.LinuxResources) *specs.LinuxResources {
	if r.CPU == nil {
		return r
	}
	out, cpu := *r, *r.CPU
	if cpu.RealtimeRuntime != nil && *cpu.RealtimeRuntime == 0 {
		cpu.RealtimeRuntime = nil
	}
	if cpu.RealtimePeriod != nil && *cpu.RealtimePeriod == 0 {
		cpu.RealtimePeriod = nil
	}
	out.CPU = &cpu
	return &out
}

func checkVersion(_ *comparison, field string, _, got string) []Reason {
	if strings.HasPrefix(got, "1.") {
		return nil
	}
	return []Reason{{Field: field, Want: "a 1.x runtime-spec version", Got: strconv.Quote(got)}}
}

func checkProcessPresent(c *comparison, field string, want, got *specs.Process) []Reason {
	if got == nil {
		return []Reason{{Field: field, Want: "a process", Got: "none"}}
	}
	return c.walk(field, reflect.ValueOf(want), reflect.ValueOf(got))
}

// checkArgs: a component but the agent runs its compiled command, flags and all: net's
// -upstream-proxy and -rate-per-caller, llm's -net and -kms are settings the policy
// must make, as their environment variables are. Docker's init may come first (`init: true`).
// An exec into such a component runs exactly one of the commands its policy lists for exec
// (execCommands: its health check, which Docker runs as an exec): anything else, its own binary
// with other flags among them, would be a second, differently configured instance inside the
// component's boundary. The agent's command and its execs are the caller's (kind app).
func checkArgs(c *comparison, field string, want, got []string) []Reason {
	if c.want.Annotations[compile.AnnotationKind] == string(pbp.KindApp) {
		return nil
	}
	if c.exec {
		allowed, err := execCommands(c.want)
		switch {
		case err != nil:
			return []Reason{{Field: field, Want: "a command the policy lists for exec (" + compile.AnnotationExec + ")", Got: clip(quoteArgs(got)) + " (" + err.Error() + ")"}}
		case slices.ContainsFunc(allowed, func(a []string) bool { return slices.Equal(a, got) }):
			return nil
		}
		var names []string
		for _, a := range allowed {
			names = append(names, quoteArgs(a))
		}
		return []Reason{{Field: field, Want: "exactly one of " + listOrNone(names) + " (" + compile.AnnotationExec + ")", Got: clip(quoteArgs(got))}}
	}
	if slices.Equal(afterInit(got), want) {
		return nil
	}
	return []Reason{{Field: field, Want: strconv.Quote(strings.Join(want, " ")) + " (after Docker's init)", Got: strconv.Quote(clip(strings.Join(got, " ")))}}
}

// execCommands are the argvs the compiled spec lets an exec run (compile.AnnotationExec, written
// by the compiler from compile.HealthCommand). A policy without the annotation, or with one that
// is not a JSON list of non-empty argvs, lets an exec run nothing.
func execCommands(want *specs.Spec) ([][]string, error) {
	raw, ok := want.Annotations[compile.AnnotationExec]
	if !ok {
		return nil, fmt.Errorf("the policy has no %s", compile.AnnotationExec)
	}
	var list [][]string
	if err := strictjson.Decode([]byte(raw), 4, &list); err != nil {
		return nil, fmt.Errorf("the policy's %s: %w", compile.AnnotationExec, err)
	}
	for _, a := range list {
		if len(a) == 0 {
			return nil, fmt.Errorf("the policy's %s holds an empty command", compile.AnnotationExec)
		}
	}
	return list, nil
}

// quoteArgs is an argv as a refusal shows it: each argument quoted, so that an argument with a
// space is not read as two.
func quoteArgs(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = strconv.Quote(a)
	}
	return "[" + strings.Join(q, " ") + "]"
}

// afterInit is a command without Docker's init in front of it.
func afterInit(args []string) []string {
	if len(args) >= 2 && args[0] == dockerInit && args[1] == "--" {
		return args[2:]
	}
	return args
}

func checkUID(_ *comparison, field string, want, got uint32) []Reason {
	if got == 0 || got != want {
		return []Reason{{Field: field, Want: fmt.Sprint(want), Got: fmt.Sprint(got)}}
	}
	return nil
}

func checkGID(c *comparison, field string, want, got uint32) []Reason {
	return checkUID(c, field, want, got)
}

// checkGroups: Docker adds the primary gid to the supplementary groups; any other must be the
// policy's.
func checkGroups(c *comparison, field string, want, got []uint32) []Reason {
	var gid uint32
	if c.want.Process != nil {
		gid = c.want.Process.User.GID
	}
	var extra []string
	for _, g := range got {
		if g == 0 || (g != gid && !slices.Contains(want, g)) {
			extra = append(extra, fmt.Sprint(g))
		}
	}
	if len(extra) == 0 {
		return nil
	}
	allowed := []string{fmt.Sprint(gid)}
	for _, g := range want {
		allowed = append(allowed, fmt.Sprint(g))
	}
	return []Reason{{Field: field, Want: "within " + strings.Join(allowed, ","), Got: strings.Join(extra, ",")}}
}

// checkCapabilities refuses, set by set, the capabilities the compiled set lacks. Without the
// object runc leaves the process the ones it has (all of root's): fail closed.
func checkCapabilities(_ *comparison, field string, want, got *specs.LinuxCapabilities) []Reason {
	if got == nil {
		return []Reason{{Field: field, Want: "explicit sets", Got: "none (the runtime's defaults)"}}
	}
	if want == nil {
		want = &specs.LinuxCapabilities{}
	}
	var out []Reason
	out = append(out, extraCaps("bounding", want.Bounding, got.Bounding)...)
	out = append(out, extraCaps("effective", want.Effective, got.Effective)...)
	out = append(out, extraCaps("inheritable", want.Inheritable, got.Inheritable)...)
	out = append(out, extraCaps("permitted", want.Permitted, got.Permitted)...)
	out = append(out, extraCaps("ambient", want.Ambient, got.Ambient)...)
	return out
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

// checkRlimits: a limit the spec leaves out is whatever runc inherits from the engine's shim
// (measured under hack/engine.sh's dockerd: RLIMIT_CORE with an unlimited hard limit,
// RLIMIT_NOFILE 20000, RLIMIT_MEMLOCK 8 MiB), so only the compiled types are allowed, each
// present once and at most its compiled values. Types are compared upper-case: runc maps the
// name to the kernel's.
func checkRlimits(_ *comparison, field string, want, got []specs.POSIXRlimit) []Reason {
	var out []Reason
	seen := map[string]bool{}
	for _, g := range got {
		t := strings.ToUpper(g.Type)
		i := slices.IndexFunc(want, func(w specs.POSIXRlimit) bool { return strings.ToUpper(w.Type) == t })
		switch {
		case seen[t]:
			out = append(out, Reason{Field: field + "[" + t + "]", Want: "once", Got: "twice"})
		case i < 0:
			out = append(out, Reason{Field: field + "[" + t + "]", Want: "unset (the policy does not set it)", Got: rlimitText(g)})
		case g.Soft > want[i].Soft || g.Hard > want[i].Hard:
			out = append(out, Reason{Field: field + "[" + t + "]", Want: "at most " + rlimitText(want[i]), Got: rlimitText(g)})
		}
		seen[t] = true
	}
	for _, w := range want {
		if t := strings.ToUpper(w.Type); !seen[t] {
			out = append(out, Reason{Field: field + "[" + t + "]", Want: rlimitText(w), Got: "unset (the runtime's own)"})
		}
	}
	return out
}

func rlimitText(r specs.POSIXRlimit) string {
	return fmt.Sprintf("soft %d hard %d", r.Soft, r.Hard)
}

func checkNoNewPrivileges(_ *comparison, field string, _, got bool) []Reason {
	if !got {
		return []Reason{{Field: field, Want: "true", Got: "false"}}
	}
	return nil
}

func checkAppArmor(_ *comparison, field string, want, got string) []Reason {
	if labelAllowed(want, got) {
		return nil
	}
	return []Reason{{Field: field, Want: orEngine(want), Got: got}}
}

func checkSELinux(c *comparison, field string, want, got string) []Reason {
	return checkAppArmor(c, field, want, got)
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

// checkOOMScore: unset, runc leaves the container the score of the process that starts it
// (containerd's shim, which follows the engine's own: 0 or 1 under hack/engine.sh's dockerd,
// measured; an engine started with a negative --oom-score-adjust passes that down), so it must
// be set, and not below the policy's.
func checkOOMScore(_ *comparison, field string, want, got *int) []Reason {
	floor := 0
	if want != nil {
		floor = *want
	}
	switch {
	case got == nil:
		return []Reason{{Field: field, Want: "at least " + strconv.Itoa(floor), Got: "unset (the runtime's own score)"}}
	case *got < floor:
		return []Reason{{Field: field, Want: "at least " + strconv.Itoa(floor), Got: strconv.Itoa(*got)}}
	}
	return nil
}

func checkRootPresent(c *comparison, field string, want, got *specs.Root) []Reason {
	if got == nil {
		return []Reason{{Field: field + ".readonly", Want: "true", Got: "false"}}
	}
	return c.walk(field, reflect.ValueOf(want), reflect.ValueOf(got))
}

func checkReadonlyRoot(_ *comparison, field string, _, got bool) []Reason {
	if !got {
		return []Reason{{Field: field, Want: "true", Got: "false"}}
	}
	return nil
}

// checkLimit: a limit is set, positive, and no higher than the policy's. At create a missing
// limit means none (refused when the policy sets one). In an update a missing limit, or a 0,
// keeps the current one: runc's update (v1.1.5, the version Debian 12 ships) starts from zero
// for every memory and pids field, decodes `--resources -` over that, and its cgroup managers
// (fs and fs2, systemd) write a limit only when it is not 0; Docker 20.10 sends 0 for the ones
// it leaves alone. A negative limit (runc's -1, "max") removes it, and is refused.
// A limit the policy does not set may be anything positive: it can only narrow.
func checkLimit(c *comparison, field string, want, got *int64) []Reason {
	switch {
	case got == nil && (c.update || want == nil):
		return nil
	case got != nil && *got == 0 && c.update:
		return nil
	case got != nil && *got > 0 && (want == nil || *got <= *want):
		return nil
	}
	return []Reason{{Field: field, Want: limitText(want), Got: limitText(got)}}
}

func checkOOMKiller(_ *comparison, field string, _, got *bool) []Reason {
	if got != nil && *got {
		return []Reason{{Field: field, Want: "false", Got: "true"}}
	}
	return nil
}

// checkReservation: a soft limit above the hard one means nothing; one at or below it narrows.
// In an update a 0 keeps the current one (checkLimit).
func checkReservation(c *comparison, field string, _, got *int64) []Reason {
	var limit *int64
	if r := linuxOf(c.want).Resources; r != nil && r.Memory != nil {
		limit = r.Memory.Limit
	}
	if got == nil || c.update && *got == 0 || *got > 0 && (limit == nil || *got <= *limit) {
		return nil
	}
	return []Reason{{Field: field, Want: "unset or at most " + limitText(limit), Got: limitText(got)}}
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

// checkDeviceCgroup: the first rule must deny every device (without it the cgroup starts from
// "allow all"); after it, deny rules only narrow, and allow rules must be runc's defaults.
func checkDeviceCgroup(c *comparison, field string, _, got []specs.LinuxDeviceCgroup) []Reason {
	var out []Reason
	if !c.update && (len(got) == 0 || !denyAll(got[0])) {
		first := "none"
		if len(got) > 0 {
			first = deviceText(got[0])
		}
		out = append(out, Reason{Field: field + "[0]", Want: "a *:* rwm denied first", Got: first})
	}
	var extra []string
	for _, d := range got {
		if d.Allow && !defaultDevice(d) {
			extra = append(extra, deviceText(d))
		}
	}
	if len(extra) > 0 {
		out = append(out, Reason{Field: field, Want: "runc's default devices only", Got: strings.Join(extra, ",")})
	}
	return out
}

func denyAll(d specs.LinuxDeviceCgroup) bool {
	return !d.Allow && (d.Type == "" || d.Type == "a") && (d.Major == nil || *d.Major == -1) &&
		(d.Minor == nil || *d.Minor == -1) && d.Access == "rwm"
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
	allow := "allowed"
	if !d.Allow {
		allow = "denied"
	}
	return fmt.Sprintf("%s %s:%s %s %s", t, n(d.Major), n(d.Minor), d.Access, allow)
}

// checkDevices refuses every device node the compiled spec does not create.
func checkDevices(_ *comparison, field string, want, got []specs.LinuxDevice) []Reason {
	var extra []string
	for _, d := range got {
		if !slices.ContainsFunc(want, func(w specs.LinuxDevice) bool { return reflect.DeepEqual(w, d) }) {
			extra = append(extra, d.Path)
		}
	}
	if len(extra) == 0 {
		return nil
	}
	var have []string
	for _, d := range want {
		have = append(have, d.Path)
	}
	return []Reason{{Field: field, Want: listOrNone(have), Got: strings.Join(extra, ",")}}
}

func checkMasked(_ *comparison, field string, want, got []string) []Reason {
	return missing(field, want, got)
}

func checkReadonlyPaths(_ *comparison, field string, want, got []string) []Reason {
	return missing(field, want, got)
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

// checkAnnotations: runc and its libraries act on annotations (org.systemd.property.* become
// properties of the container's systemd unit, with the systemd cgroup driver), so only the
// compiled ones, with their values.
func checkAnnotations(_ *comparison, field string, want, got map[string]string) []Reason {
	var out []Reason
	for _, k := range sortedKeys(got) {
		if w, ok := want[k]; !ok || w != got[k] {
			out = append(out, Reason{Field: field + "[" + k + "]", Want: orUnset(w, ok), Got: strconv.Quote(clip(got[k]))})
		}
	}
	return out
}

// engineSysctl is what Docker 20.10 sets in every container with a network namespace of its own
// (measured: testdata/docker-20.10): it lets unprivileged processes bind low ports there, in the
// container's own namespace only; Landlock's bind rules still decide which ports a component may
// bind.
var engineSysctl = map[string]string{"net.ipv4.ip_unprivileged_port_start": "0"}

func checkSysctl(_ *comparison, field string, want, got map[string]string) []Reason {
	var out []Reason
	for _, k := range sortedKeys(want) {
		if v, ok := got[k]; !ok || v != want[k] {
			out = append(out, Reason{Field: field + "[" + k + "]", Want: strconv.Quote(want[k]), Got: orUnset(v, ok)})
		}
	}
	for _, k := range sortedKeys(got) {
		if _, ok := want[k]; !ok && engineSysctl[k] != got[k] {
			out = append(out, Reason{Field: field + "[" + k + "]", Want: "unset", Got: strconv.Quote(got[k])})
		}
	}
	return out
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
