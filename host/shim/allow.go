package shim

import (
	"encoding/json"
	"reflect"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// The allowlist: every field of the OCI runtime spec (runtime-spec v1.3.0, specs.Spec and all
// below it) has exactly one rule in rules, keyed by its JSON path ("process.user.uid",
// "mounts[].options"). Check walks the engine's spec and the compiled one together and applies
// each field's rule; a field with no rule (a newer runtime-spec's) is refused whenever it is set.
// TestRulesCoverTheSpec walks the types by reflection and fails when a field has no rule, when a
// rule names no field, or when a field below a named rule is not listed as decided by it.

type ruleKind int

const (
	// walk: a struct (or a pointer to one, nil read as its zero value) whose fields each have
	// their own rule.
	walk ruleKind = iota + 1
	// equal: the compiled value, the whole subtree compared (a nil and an empty list alike; a nil
	// pointer unlike a pointer to zero), so a field a newer spec adds below it is compared too.
	equal
	// narrower: a named rule that lets the engine's value be narrower than the compiled one (a
	// lower limit, a subset of capabilities or syscalls) and refuses the rest.
	narrower
	// engine: the engine owns the value (hostname files, cgroup path, its network hook):
	// recognised by a named rule, with the reason it is the engine's, never taken on trust.
	engine
	// within: a field below a narrower or engine rule, which decides it with its parent (why
	// names that parent).
	within
)

// A rule decides one field. why says what it allows, in words, for every kind but walk and
// equal; check (narrower and engine) returns every way got is wider than the rule lets it be.
type rule struct {
	kind  ruleKind
	why   string
	check func(c *comparison, field string, want, got reflect.Value) []Reason
}

// named makes a narrower rule from a typed check.
func named[T any](why string, f func(c *comparison, field string, want, got T) []Reason) rule {
	return rule{kind: narrower, why: why, check: typed(f)}
}

// owned makes an engine rule from a typed check.
func owned[T any](why string, f func(c *comparison, field string, want, got T) []Reason) rule {
	return rule{kind: engine, why: why, check: typed(f)}
}

func typed[T any](f func(c *comparison, field string, want, got T) []Reason) func(*comparison, string, reflect.Value, reflect.Value) []Reason {
	return func(c *comparison, field string, want, got reflect.Value) []Reason {
		return f(c, field, want.Interface().(T), got.Interface().(T))
	}
}

func by(why string) rule { return rule{kind: within, why: why} }

var (
	walked = rule{kind: walk}
	same   = rule{kind: equal}
)

// free is an engine rule that lets any value through: the engine sets the field from the image
// or the command line, and no value of it widens the container.
func free(why string) rule {
	return rule{kind: engine, why: why, check: func(*comparison, string, reflect.Value, reflect.Value) []Reason { return nil }}
}

// unlessCompiled is a narrower rule for a limit or a share the policy does not set: any value
// when the compiled spec leaves it unset (the container has none, so any narrows), the compiled
// value when it sets one.
func unlessCompiled(why string) rule {
	return rule{kind: narrower, why: why, check: func(_ *comparison, field string, want, got reflect.Value) []Reason {
		if zero(want) || sameValue(want, got) {
			return nil
		}
		return []Reason{{Field: field, Want: show(want), Got: show(got)}}
	}}
}

// rules is the allowlist. Its entries are in the order of specs.Spec; the named rules are in
// check.go (process, resources, devices), env.go, mounts.go, engine.go and kernel.go
// (namespaces, seccomp). It is filled in init: some rules walk their struct with it.
var rules map[string]rule

func init() { rules = allowlist() }

func allowlist() map[string]rule {
	return map[string]rule{
		"ociVersion": owned("the version of the spec the engine writes (Docker 20.10: 1.0.2-dev): a 1.x version; every field is compared, not the label", checkVersion),
		"process":    named("a process is required: runc would otherwise start none", checkProcessPresent),

		"process.terminal":           free("the caller's: a terminal on the console socket the engine passes (docker run -t), no privilege"),
		"process.consoleSize":        free("the caller's: the size of that terminal"),
		"process.consoleSize.height": by("process.consoleSize"),
		"process.consoleSize.width":  by("process.consoleSize"),
		"process.user":               walked,
		"process.user.uid":           named("the compiled uid, never 0", checkUID),
		"process.user.gid":           named("the compiled gid, never 0", checkGID),
		"process.user.umask":         same,
		"process.user.additionalGids": named("a subset of the compiled groups and the primary gid (Docker adds it), never 0",
			checkGroups),
		"process.user.username": same,
		"process.args": named("a component's compiled command, after Docker's init (/sbin/docker-init --) when compose asks for one: its flags are "+
			"settings (net's -upstream-proxy) as much as its environment is; the agent's command (kind app), and an exec's, are the caller's, "+
			"bounded by the Landlock domain's exec list and, where pinned, subject.code_sha256", checkArgs),
		"process.commandLine": same,
		"process.env":         named("SHARNESS_AI_* variables and the Go runtime's switches (SSL_CERT_FILE, SSL_CERT_DIR, GODEBUG) only as the compiled spec carries them, or as envExceptions bound them; other variables are the image's and the caller's", checkEnv),
		"process.cwd":         free("the caller's: where the process starts, no access of its own"),
		"process.capabilities": named("each set a subset of the compiled set; an absent object is refused (runc would keep root's)",
			checkCapabilities),
		"process.capabilities.bounding":    by("process.capabilities"),
		"process.capabilities.effective":   by("process.capabilities"),
		"process.capabilities.inheritable": by("process.capabilities"),
		"process.capabilities.permitted":   by("process.capabilities"),
		"process.capabilities.ambient":     by("process.capabilities"),
		"process.rlimits":                  named("exactly the compiled limits' types, each at most its compiled soft and hard value", checkRlimits),
		"process.rlimits[].type":           by("process.rlimits"),
		"process.rlimits[].hard":           by("process.rlimits"),
		"process.rlimits[].soft":           by("process.rlimits"),
		"process.noNewPrivileges":          named("true", checkNoNewPrivileges),
		"process.apparmorProfile":          named("the compiled profile, or the engine's default when the policy names none; never unconfined", checkAppArmor),
		"process.oomScoreAdj":              named("set, and at least the compiled score (0 when the policy sets none): a lower one would spare the container at the host's expense", checkOOMScore),
		"process.scheduler":                same,
		"process.selinuxLabel":             named("the compiled label, or the engine's default; never an unconfined or super-privileged type", checkSELinux),
		"process.ioPriority":               same,
		"process.execCPUAffinity":          same,

		"root":          named("a root file system is required", checkRootPresent),
		"root.path":     owned("the engine's: the bundle's rootfs, the overlay Docker's overlay2 driver mounted (/var/lib/docker/overlay2/<id>/merged), or the containerd image store's for this container (/var/lib/docker/rootfs/overlayfs/<its id>)", checkRootPath),
		"root.readonly": named("true", checkReadonlyRoot),
		"hostname":      same,
		"domainname":    same,

		"mounts": named("each at a destination the compiled spec lists (or the engine's own /etc files and init), of the same kind, "+
			"with no wider options, from a source resolved on the host; none covered by a later one, none the compiled spec puts "+
			"below a kept mount left out", checkMounts),
		"mounts[].destination": by("mounts"),
		"mounts[].type":        by("mounts"),
		"mounts[].source":      by("mounts"),
		"mounts[].options":     by("mounts"),
		"mounts[].uidMappings": by("mounts"), "mounts[].uidMappings[].containerID": by("mounts"),
		"mounts[].uidMappings[].hostID": by("mounts"), "mounts[].uidMappings[].size": by("mounts"),
		"mounts[].gidMappings": by("mounts"), "mounts[].gidMappings[].containerID": by("mounts"),
		"mounts[].gidMappings[].hostID": by("mounts"), "mounts[].gidMappings[].size": by("mounts"),

		"hooks": owned("the compiled hooks, and the engine's own network setup: Docker's libnetwork-setkey prestart hook, "+
			"recognised exactly (dockerd re-run with this container's id), nothing else: a hook runs on the host as root", checkHooks),
		"hooks.prestart": by("hooks"), "hooks.createRuntime": by("hooks"), "hooks.createContainer": by("hooks"),
		"hooks.startContainer": by("hooks"), "hooks.poststart": by("hooks"), "hooks.poststop": by("hooks"),
		"hooks.prestart[].path": by("hooks"), "hooks.prestart[].args": by("hooks"), "hooks.prestart[].env": by("hooks"), "hooks.prestart[].timeout": by("hooks"),
		"hooks.createRuntime[].path": by("hooks"), "hooks.createRuntime[].args": by("hooks"), "hooks.createRuntime[].env": by("hooks"), "hooks.createRuntime[].timeout": by("hooks"),
		"hooks.createContainer[].path": by("hooks"), "hooks.createContainer[].args": by("hooks"), "hooks.createContainer[].env": by("hooks"), "hooks.createContainer[].timeout": by("hooks"),
		"hooks.startContainer[].path": by("hooks"), "hooks.startContainer[].args": by("hooks"), "hooks.startContainer[].env": by("hooks"), "hooks.startContainer[].timeout": by("hooks"),
		"hooks.poststart[].path": by("hooks"), "hooks.poststart[].args": by("hooks"), "hooks.poststart[].env": by("hooks"), "hooks.poststart[].timeout": by("hooks"),
		"hooks.poststop[].path": by("hooks"), "hooks.poststop[].args": by("hooks"), "hooks.poststop[].env": by("hooks"), "hooks.poststop[].timeout": by("hooks"),
		"annotations": named("a subset of the compiled annotations, each with its compiled value (runc reads org.systemd.property.* and others)", checkAnnotations),

		"linux":             walked,
		"linux.uidMappings": same,
		"linux.gidMappings": same,
		"linux.sysctl": named("the compiled keys with their values, and Docker 20.10's default net.ipv4.ip_unprivileged_port_start=0 "+
			"(a setting of the container's own network namespace); no other key", checkSysctl),
		"linux.resources":                              walked,
		"linux.resources.devices":                      named("everything denied first, then allowed only runc's default devices", checkDeviceCgroup),
		"linux.resources.devices[].allow":              by("linux.resources.devices"),
		"linux.resources.devices[].type":               by("linux.resources.devices"),
		"linux.resources.devices[].major":              by("linux.resources.devices"),
		"linux.resources.devices[].minor":              by("linux.resources.devices"),
		"linux.resources.devices[].access":             by("linux.resources.devices"),
		"linux.resources.memory":                       walked,
		"linux.resources.memory.limit":                 named("set, positive, at most the compiled limit", checkLimit),
		"linux.resources.memory.reservation":           named("unset, or a positive soft limit at most the compiled limit", checkReservation),
		"linux.resources.memory.swap":                  named("at most the compiled limit, when the policy sets one", checkLimit),
		"linux.resources.memory.kernel":                named("unset, or a positive limit (the policy sets none: any limit narrows)", checkLimit),
		"linux.resources.memory.kernelTCP":             named("unset, or a positive limit (the policy sets none: any limit narrows)", checkLimit),
		"linux.resources.memory.swappiness":            same,
		"linux.resources.memory.disableOOMKiller":      named("unset or false (Docker writes false): without its OOM killer a container at its limit hangs instead of giving memory back", checkOOMKiller),
		"linux.resources.memory.useHierarchy":          same,
		"linux.resources.memory.checkBeforeUpdate":     same,
		"linux.resources.cpu":                          walked,
		"linux.resources.cpu.shares":                   unlessCompiled("a weight among the engine's containers (Docker writes 0, the kernel's default): any, unless the policy sets one; it lifts no limit"),
		"linux.resources.cpu.quota":                    unlessCompiled("a CPU quota: any, unless the policy sets one (without one, any quota narrows)"),
		"linux.resources.cpu.burst":                    unlessCompiled("a CPU quota's burst: any, unless the policy sets one"),
		"linux.resources.cpu.period":                   unlessCompiled("a CPU quota's period: any, unless the policy sets one"),
		"linux.resources.cpu.realtimeRuntime":          same,
		"linux.resources.cpu.realtimePeriod":           same,
		"linux.resources.cpu.cpus":                     unlessCompiled("a set of CPUs: any, unless the policy sets one (without one, any set narrows)"),
		"linux.resources.cpu.mems":                     unlessCompiled("a set of memory nodes: any, unless the policy sets one"),
		"linux.resources.cpu.idle":                     unlessCompiled("the idle scheduling class: any, unless the policy sets it; it only lowers the container's share"),
		"linux.resources.pids":                         walked,
		"linux.resources.pids.limit":                   named("set, positive, at most the compiled limit", checkLimit),
		"linux.resources.blockIO":                      unlessCompiled("I/O weights and throttles (Docker writes weight 0): any, unless the policy sets them; they only share or slow the disks"),
		"linux.resources.blockIO.weight":               by("linux.resources.blockIO"),
		"linux.resources.blockIO.leafWeight":           by("linux.resources.blockIO"),
		"linux.resources.blockIO.weightDevice":         by("linux.resources.blockIO"),
		"linux.resources.blockIO.weightDevice[].major": by("linux.resources.blockIO"), "linux.resources.blockIO.weightDevice[].minor": by("linux.resources.blockIO"),
		"linux.resources.blockIO.weightDevice[].weight": by("linux.resources.blockIO"), "linux.resources.blockIO.weightDevice[].leafWeight": by("linux.resources.blockIO"),
		"linux.resources.blockIO.throttleReadBpsDevice":         by("linux.resources.blockIO"),
		"linux.resources.blockIO.throttleReadBpsDevice[].major": by("linux.resources.blockIO"), "linux.resources.blockIO.throttleReadBpsDevice[].minor": by("linux.resources.blockIO"),
		"linux.resources.blockIO.throttleReadBpsDevice[].rate":   by("linux.resources.blockIO"),
		"linux.resources.blockIO.throttleWriteBpsDevice":         by("linux.resources.blockIO"),
		"linux.resources.blockIO.throttleWriteBpsDevice[].major": by("linux.resources.blockIO"), "linux.resources.blockIO.throttleWriteBpsDevice[].minor": by("linux.resources.blockIO"),
		"linux.resources.blockIO.throttleWriteBpsDevice[].rate":  by("linux.resources.blockIO"),
		"linux.resources.blockIO.throttleReadIOPSDevice":         by("linux.resources.blockIO"),
		"linux.resources.blockIO.throttleReadIOPSDevice[].major": by("linux.resources.blockIO"), "linux.resources.blockIO.throttleReadIOPSDevice[].minor": by("linux.resources.blockIO"),
		"linux.resources.blockIO.throttleReadIOPSDevice[].rate":   by("linux.resources.blockIO"),
		"linux.resources.blockIO.throttleWriteIOPSDevice":         by("linux.resources.blockIO"),
		"linux.resources.blockIO.throttleWriteIOPSDevice[].major": by("linux.resources.blockIO"), "linux.resources.blockIO.throttleWriteIOPSDevice[].minor": by("linux.resources.blockIO"),
		"linux.resources.blockIO.throttleWriteIOPSDevice[].rate": by("linux.resources.blockIO"),
		"linux.resources.hugepageLimits":                         unlessCompiled("hugepage limits: any, unless the policy sets them (without them, any limit narrows)"),
		"linux.resources.hugepageLimits[].pageSize":              by("linux.resources.hugepageLimits"),
		"linux.resources.hugepageLimits[].limit":                 by("linux.resources.hugepageLimits"),
		"linux.resources.network":                                same,
		"linux.resources.rdma":                                   same,
		"linux.resources.unified":                                same,
		"linux.cgroupsPath": owned("the engine's cgroup for this container: runc's default (empty), or /docker/<id> "+
			"(systemd: system.slice:docker:<id>) with this container's id; never another cgroup to join", checkCgroupsPath),
		"linux.namespaces": named("every compiled namespace new, none the policy lacks (but a new time namespace, the engine's), none twice; "+
			"joined only for the network, a namespace libnetwork made (/var/run/docker/netns/<12 hex>), never the host's", checkNamespaces),
		"linux.namespaces[].type":  by("linux.namespaces"),
		"linux.namespaces[].path":  by("linux.namespaces"),
		"linux.devices":            named("only the compiled devices (none)", checkDevices),
		"linux.devices[].path":     by("linux.devices"),
		"linux.devices[].type":     by("linux.devices"),
		"linux.devices[].major":    by("linux.devices"),
		"linux.devices[].minor":    by("linux.devices"),
		"linux.devices[].fileMode": by("linux.devices"),
		"linux.devices[].uid":      by("linux.devices"),
		"linux.devices[].gid":      by("linux.devices"),
		"linux.netDevices":         same,
		"linux.seccomp": named("required; a default action that denies; only compiled architectures and flags; each rule that "+
			"lets a syscall run (or fakes its success) covered by a compiled rule with no more argument conditions; each "+
			"compiled conditional denial kept", checkSeccomp),
		"linux.seccomp.defaultAction":    by("linux.seccomp"),
		"linux.seccomp.defaultErrnoRet":  by("linux.seccomp"),
		"linux.seccomp.architectures":    by("linux.seccomp"),
		"linux.seccomp.flags":            by("linux.seccomp"),
		"linux.seccomp.listenerPath":     by("linux.seccomp"),
		"linux.seccomp.listenerMetadata": by("linux.seccomp"),
		"linux.seccomp.syscalls":         by("linux.seccomp"),
		"linux.seccomp.syscalls[].names": by("linux.seccomp"), "linux.seccomp.syscalls[].action": by("linux.seccomp"),
		"linux.seccomp.syscalls[].errnoRet": by("linux.seccomp"), "linux.seccomp.syscalls[].args": by("linux.seccomp"),
		"linux.seccomp.syscalls[].args[].index": by("linux.seccomp"), "linux.seccomp.syscalls[].args[].value": by("linux.seccomp"),
		"linux.seccomp.syscalls[].args[].valueTwo": by("linux.seccomp"), "linux.seccomp.syscalls[].args[].op": by("linux.seccomp"),
		"linux.rootfsPropagation": named("private or slave (runc's default), never shared: a shared root lets the container's mounts reach the host", checkRootfsPropagation),
		"linux.maskedPaths":       named("every compiled path (Narrow adds those Docker leaves out); more only narrow", checkMasked),
		"linux.readonlyPaths":     named("every compiled path (Narrow adds those Docker leaves out); more only narrow", checkReadonlyPaths),
		"linux.mountLabel":        same,
		"linux.intelRdt":          same,
		"linux.memoryPolicy":      same,
		"linux.personality":       same,
		"linux.timeOffsets":       same,

		"solaris": same,
		"windows": same,
		"vm":      same,
		"zos":     same,
		"freebsd": same,
	}
}

// comparison is one Check: the facts the host gathered, whether it is a `runc update` (a field
// left unset keeps the container's current value) or a `runc exec`.
type comparison struct {
	want   *specs.Spec // the whole compiled spec, for rules that read another of its fields
	facts  Facts
	update bool
	exec   bool // a process joining a running container (`runc exec`)
}

// field applies field's rule to the two values. A field without a rule is refused when set.
func (c *comparison) field(field string, want, got reflect.Value) []Reason {
	if c.update && nilValue(got) {
		return nil
	}
	r, ok := rules[field]
	if !ok {
		if zero(got) {
			return nil
		}
		return []Reason{{Field: field, Want: "unset (the shim has no rule for this field)", Got: show(got)}}
	}
	switch r.kind {
	case walk:
		return c.walk(field, want, got)
	case narrower, engine:
		return r.check(c, field, want, got)
	}
	// equal, and within reached directly (a rule table TestRulesCoverTheSpec would refuse):
	// the compiled value or nothing.
	if sameValue(want, got) {
		return nil
	}
	return []Reason{{Field: field, Want: show(want), Got: show(got)}}
}

// walk applies each field's rule to a struct's fields. A nil pointer is its zero value.
func (c *comparison) walk(prefix string, want, got reflect.Value) []Reason {
	want, got = deref(want), deref(got)
	var out []Reason
	t := got.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		name := jsonName(f)
		switch {
		case name == "-":
		case f.Anonymous && name == "":
			out = append(out, c.walk(prefix, want.Field(i), got.Field(i))...)
		default:
			out = append(out, c.field(join(prefix, name), want.Field(i), got.Field(i))...)
		}
	}
	return out
}

func join(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}

// jsonName is the field's JSON key, "" for an untagged embedded struct (its fields are promoted).
func jsonName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	if name == "" && !f.Anonymous {
		return f.Name
	}
	return name
}

func deref(v reflect.Value) reflect.Value {
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return reflect.Zero(v.Type().Elem())
		}
		v = v.Elem()
	}
	return v
}

func nilValue(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Map, reflect.Interface:
		return v.IsNil()
	}
	return false
}

// zero reports whether v holds nothing: nil, empty, or zero all the way down. A pointer to a
// zero value is not nothing: runc sets what it points to (a umask of 0), and leaves unset what a
// nil pointer leaves.
func zero(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		return v.IsNil()
	case reflect.Slice, reflect.Map:
		return v.Len() == 0
	case reflect.Struct:
		for i := range v.NumField() {
			if !zero(v.Field(i)) {
				return false
			}
		}
		return true
	}
	return v.IsZero()
}

// sameValue compares two values of one type the way runc reads them: nil and empty slices and
// maps alike; a nil pointer is not a pointer to a zero value (zero).
func sameValue(a, b reflect.Value) bool {
	if zero(a) || zero(b) {
		return zero(a) && zero(b)
	}
	switch a.Kind() {
	case reflect.Pointer, reflect.Interface:
		return sameValue(a.Elem(), b.Elem())
	case reflect.Struct:
		for i := range a.NumField() {
			if !sameValue(a.Field(i), b.Field(i)) {
				return false
			}
		}
		return true
	case reflect.Slice:
		if a.Len() != b.Len() {
			return false
		}
		for i := range a.Len() {
			if !sameValue(a.Index(i), b.Index(i)) {
				return false
			}
		}
		return true
	case reflect.Map:
		if a.Len() != b.Len() {
			return false
		}
		for _, k := range a.MapKeys() {
			if bv := b.MapIndex(k); !bv.IsValid() || !sameValue(a.MapIndex(k), bv) {
				return false
			}
		}
		return true
	}
	return a.Interface() == b.Interface()
}

// maxShown caps a value in a refusal: docker prints the whole message, and an environment
// variable can hold a certificate.
const maxShown = 160

// show is a value as a refusal names it: its JSON, or "unset".
func show(v reflect.Value) string {
	if zero(v) {
		return "unset"
	}
	b, err := json.Marshal(v.Interface())
	if err != nil {
		return "a value the shim cannot print"
	}
	return clip(string(b))
}

func clip(s string) string {
	if len(s) > maxShown {
		return s[:maxShown] + "…"
	}
	return s
}
