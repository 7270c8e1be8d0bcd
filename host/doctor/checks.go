package doctor

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math/bits"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/sharness-ai/sharness/policies/pbp"
)

// The host files the checks read.
const (
	PathStatus         = "/proc/self/status"
	PathMaxUserNS      = "/proc/sys/user/max_user_namespaces"
	PathUsernsClone    = "/proc/sys/kernel/unprivileged_userns_clone"             // Debian and Ubuntu kernels
	PathAppArmorUserns = "/proc/sys/kernel/apparmor_restrict_unprivileged_userns" // Ubuntu 23.10+
	PathCgroup2        = "/sys/fs/cgroup/cgroup.controllers"
	PathCgroups        = "/proc/cgroups"
	PathRoutes         = "/proc/net/route"
	PathResolv         = "/etc/resolv.conf"
	PathResolvUpstream = "/run/systemd/resolve/resolv.conf" // what Docker reads behind systemd-resolved's stub
)

// Paths are the host files the checks read, for the gatherer.
var Paths = []string{PathStatus, PathMaxUserNS, PathUsernsClone, PathAppArmorUserns, PathCgroup2, PathCgroups, PathRoutes, PathResolv, PathResolvUpstream}

// checks are the report's lines, in order; kms adds one line per hygiene entry.
var checks = []struct {
	name string
	fn   func(Facts) (Status, string)
}{
	{"engine", engineCheck}, {"compose", composeCheck}, {"runtime", runtimeCheck}, {"seccomp", seccompCheck},
	{"userns", usernsCheck}, {"landlock", landlockCheck}, {"cgroups", cgroupsCheck},
	{"memfd_secret", memfdSecretCheck}, {"edge-pool", edgePoolCheck}, {"kms", nil}, {"policy", policyCheck}, {"dns-leak", dnsLeakCheck},
}

// version is a Moby or compose version; pre marks a pre-release (26.0.0-rc1 comes before 26.0.0).
type version struct {
	n   [3]int
	pre bool
}

var versionRE = regexp.MustCompile(`^v?(\d+)\.(\d+)(?:\.(\d+))?(-[^+]*)?(\+.*)?$`)

func parseVersion(s string) (v version, ok bool) {
	m := versionRE.FindStringSubmatch(strings.TrimSpace(s))
	for i := 0; m != nil && i < 3; i++ {
		v.n[i], _ = strconv.Atoi(m[i+1])
	}
	return version{v.n, m != nil && m[4] != ""}, m != nil
}

func (v version) below(w ...int) bool {
	if c := slices.Compare(v.n[:], w); c != 0 {
		return c < 0
	}
	return v.pre
}

// leaky says whether Moby v has CVE-2024-29018 (GHSA-mq39-4gv4-mvpx): an internal network's
// embedded DNS forwards to a loopback resolver of the host's resolv.conf from the host's
// namespace. Fixed in 26.0.0, 25.0.5 and 23.0.11; the 24 line never got the fix.
func leaky(v version) bool {
	switch {
	case !v.below(26, 0, 0):
		return false
	case v.n[0] == 25:
		return v.below(25, 0, 5)
	case v.n[0] == 23:
		return v.below(23, 0, 11)
	}
	return true
}

// loopbackResolvers are the IPv4 loopback nameservers of the resolv.conf Docker reads: the
// upstream list when /etc/resolv.conf names only systemd-resolved's stub, as Moby does.
func loopbackResolvers(files map[string]string) []string {
	ns := nameservers(files[PathResolv])
	if up, ok := files[PathResolvUpstream]; ok && slices.Equal(ns, []string{"127.0.0.53"}) {
		ns = nameservers(up)
	}
	return slices.DeleteFunc(ns, func(s string) bool { a, err := netip.ParseAddr(s); return err != nil || !a.Is4() || !a.IsLoopback() })
}

func nameservers(resolvConf string) (ns []string) {
	for line := range strings.Lines(resolvConf) {
		if f := strings.Fields(line); len(f) > 1 && f[0] == "nameserver" {
			ns = append(ns, f[1])
		}
	}
	return ns
}

// engineCheck judges the engine by what the stack needs. An engine that predates the fix of
// CVE-2024-29018 is ok for the stack: its containers on internal networks are given dns 0.0.0.0
// (compose.NoDNS), which that engine never forwards from the host's namespace, and the e2e suite
// holds that with the leak's condition in place (TestWall: a resolver on the host's loopback that
// the control container's query reaches on Engine 20.10, and that none of the agent's reach). It
// is not ok when the live probe saw this engine forward what 20.10 does not: that engine is not
// the one the design was tested on. Other containers of such an engine can still leak, which
// the line says when the host's resolv.conf names a loopback resolver.
func engineCheck(f Facts) (Status, string) {
	e := f.Engine
	v, ok := parseVersion(e.Version)
	const design = "closed by its own DNS design: its containers on internal networks get dns 0.0.0.0, which the engine never forwards from the host's namespace (e2e TestWall, on Engine 20.10 with the leak's condition in place)"
	const fixed = "26.0.0, 25.0.5, 23.0.11"
	switch lo := loopbackResolvers(f.Files); {
	case e.Version == "":
		return Fail, fmt.Sprintf("no Docker engine answered (%v): start one (hack/engine.sh start)", e.Err)
	case !ok:
		return Degraded, fmt.Sprintf("Docker Engine %q: not a version doctor can compare, so whether CVE-2024-29018 applies is unknown; the stack's DNS design closes it where it does (e2e TestWall)", e.Version)
	case !leaky(v):
		return OK, fmt.Sprintf("Docker Engine %s (has the CVE-2024-29018 fix)", e.Version)
	case f.Live.Ran && len(f.Live.Leaked) > 0:
		return Degraded, fmt.Sprintf("Docker Engine %s predates the CVE-2024-29018 fix (%s), and the live probe saw it forward a query to the host's loopback (the dns-leak line): it leaks more than the engine the stack's DNS design was tested on (e2e TestWall, Engine 20.10); upgrade the engine", e.Version, fixed)
	case len(lo) > 0:
		return OK, fmt.Sprintf("Docker Engine %s predates the CVE-2024-29018 fix (%s): ok for the stack, %s. Other containers on this engine's internal networks with default DNS do reach the host's loopback resolver (%s)", e.Version, fixed, design, strings.Join(lo, ", "))
	default:
		return OK, fmt.Sprintf("Docker Engine %s predates the CVE-2024-29018 fix (%s): ok for the stack, %s", e.Version, fixed, design)
	}
}

func composeCheck(f Facts) (Status, string) {
	var v version
	var raw string
	ok := false
	for _, field := range strings.Fields(f.Compose.Output) { // "Docker Compose version v2.40.3"; v1: "docker-compose version 1.29.2, build …"
		if v, ok = parseVersion(strings.TrimSuffix(field, ",")); ok {
			raw = strings.TrimSuffix(field, ",")
			break
		}
	}
	switch {
	case f.Compose.Err != nil || !ok:
		return Fail, fmt.Sprintf("no docker compose v2 (%v): hack/engine.sh install builds it from the Go module proxy", orText(f.Compose.Err, fmt.Sprintf("output %q", f.Compose.Output)))
	case v.n[0] < 2:
		return Fail, fmt.Sprintf("docker compose %s is v1, which cannot run the stack's compose files: hack/engine.sh install builds v2", raw)
	}
	return OK, "docker compose " + raw
}

func orText(err error, text string) any {
	if err != nil {
		return err
	}
	return text
}

func runtimeCheck(f Facts) (Status, string) {
	e := f.Engine
	switch registered := slices.Contains(e.Runtimes, "sharness"); {
	case e.Version == "" || e.InfoErr != nil:
		return Skipped, fmt.Sprintf("docker info failed: %v", orText(e.InfoErr, "no engine"))
	case registered && e.DefaultRuntime == "sharness":
		return OK, "the sharness runtime is registered and is the default runtime"
	case registered: // anyone with the Docker API can pick another runtime (docs/architecture.md, --runtime runc)
		return Degraded, fmt.Sprintf("the sharness runtime is registered but the default is %s: anyone with the Docker API can choose another runtime; make it the default (daemon.json \"default-runtime\": \"sharness\")", e.DefaultRuntime)
	}
	return Fail, fmt.Sprintf("no sharness runtime registered (default %s): the stack's services ask for runtime sharness and will not start; install it (hack/runtime.sh install) and register it (hack/engine.sh starts dockerd with it, or daemon.json \"runtimes\" and \"default-runtime\")", e.DefaultRuntime)
}

func seccompCheck(f Facts) (Status, string) {
	status, readable := f.Files[PathStatus]
	i := slices.IndexFunc(f.Engine.SecurityOptions, func(o string) bool { return strings.HasPrefix(o, "name=seccomp") })
	switch {
	case !readable:
		return Skipped, "cannot read " + PathStatus
	case !strings.Contains("\n"+status, "\nSeccomp:"):
		return Fail, "the kernel has no seccomp (no Seccomp field in " + PathStatus + "): containers would run without their syscall filters; use a kernel with CONFIG_SECCOMP_FILTER"
	case f.Engine.Version == "" || f.Engine.InfoErr != nil:
		return Skipped, "the kernel has seccomp; no engine to ask whether it applies it"
	case i < 0:
		return Fail, fmt.Sprintf("the engine lists no seccomp in its security options %q: it would run containers without the compiled profiles; use an engine built with seccomp", f.Engine.SecurityOptions)
	}
	return OK, "kernel and engine have seccomp (" + f.Engine.SecurityOptions[i] + ")"
}

func usernsCheck(f Facts) (Status, string) {
	raw, ok := f.Files[PathMaxUserNS]
	n, err := strconv.Atoi(strings.TrimSpace(raw))
	const need = ": bash sandboxes need unprivileged user namespaces"
	switch {
	case !ok:
		return Degraded, "no " + PathMaxUserNS + " (a kernel without user namespaces)" + need
	case err != nil || n <= 0:
		return Degraded, fmt.Sprintf("user.max_user_namespaces = %s%s (sysctl user.max_user_namespaces=15000)", strings.TrimSpace(raw), need)
	case strings.TrimSpace(f.Files[PathUsernsClone]) == "0":
		return Degraded, "kernel.unprivileged_userns_clone = 0" + need + " (sysctl kernel.unprivileged_userns_clone=1)"
	case strings.TrimSpace(f.Files[PathAppArmorUserns]) == "1":
		return Degraded, "kernel.apparmor_restrict_unprivileged_userns = 1" + need + " (an AppArmor profile allowing them for the bash image)"
	}
	return OK, fmt.Sprintf("user.max_user_namespaces = %d, unprivileged user namespaces allowed", n)
}

func landlockCheck(f Facts) (Status, string) {
	const need = ": bash sandboxes and the runtime shim will need it"
	switch abi, err := f.Landlock, f.LandlockErr; {
	case errors.Is(err, syscall.ENOSYS):
		return Degraded, "the kernel has no Landlock (ENOSYS; Linux 5.13+ with CONFIG_SECURITY_LANDLOCK)" + need
	case errors.Is(err, syscall.EOPNOTSUPP):
		return Degraded, "Landlock is built in but off (EOPNOTSUPP): add landlock to the lsm= boot parameter" + need
	case err != nil:
		return Degraded, fmt.Sprintf("landlock_create_ruleset: %v%s", err, need)
	case abi < 4:
		return Degraded, fmt.Sprintf("Landlock ABI %d: no TCP port rules (ABI 4) nor signal scoping (ABI 6); a newer kernel has them", abi)
	case abi < 6:
		return OK, fmt.Sprintf("Landlock ABI %d (signal scoping needs ABI 6)", abi)
	default:
		return OK, fmt.Sprintf("Landlock ABI %d", abi)
	}
}

func cgroupsCheck(f Facts) (Status, string) {
	v2, isV2 := f.Files[PathCgroup2]
	v1, isV1 := f.Files[PathCgroups]
	have := strings.Fields(v2)
	for line := range strings.Lines(v1) { // subsys_name hierarchy num_cgroups enabled
		if c := strings.Fields(line); !isV2 && len(c) == 4 && c[3] == "1" {
			have = append(have, c[0])
		}
	}
	missing := slices.DeleteFunc([]string{"memory", "pids"}, func(c string) bool { return slices.Contains(have, c) })
	switch {
	case !isV2 && !isV1:
		return Skipped, "cannot read " + PathCgroup2 + " nor " + PathCgroups
	case len(missing) > 0:
		return Fail, fmt.Sprintf("no %s cgroup controller: the stack's memory and pids limits would not hold", strings.Join(missing, " nor "))
	case !isV2:
		return Degraded, "cgroup v1 (the memory and pids controllers are there, so the stack's limits hold); v2 is what rootless engines and the runtime shim expect: boot with systemd.unified_cgroup_hierarchy=1"
	}
	return OK, "cgroup v2 with the memory and pids controllers"
}

func memfdSecretCheck(f Facts) (Status, string) {
	const fallback = "; kms falls back to locked anonymous memory"
	switch err := f.MemfdSecretErr; {
	case err == nil:
		return OK, "memfd_secret works on this kernel: kms can keep keys out of the kernel's direct map (the kms lines say what it got)"
	case errors.Is(err, syscall.ENOSYS):
		return Degraded, "ENOSYS: a kernel without secretmem (CONFIG_SECRETMEM), or with it off (boot with secretmem.enable=1)" + fallback
	case errors.Is(err, syscall.EPERM):
		return Degraded, "EPERM: refused, likely by a seccomp filter around doctor itself (in a container?)" + fallback
	}
	return Degraded, fmt.Sprintf("memfd_secret: %v%s", f.MemfdSecretErr, fallback)
}

// edgePoolCheck: a host route into pbp.EdgePool, other than Docker's own bridges, would be
// shadowed by the stack's edge networks.
func edgePoolCheck(f Facts) (Status, string) {
	routes, ok := f.Files[PathRoutes]
	var clash []string
	for line := range strings.Lines(routes) { // Iface Destination Gateway Flags RefCnt Use Metric Mask ...
		c := strings.Fields(line)
		if len(c) < 8 || strings.HasPrefix(c[0], "br-") || strings.HasPrefix(c[0], "docker") {
			continue
		}
		dst, err1 := strconv.ParseUint(c[1], 16, 32) // network-order bytes printed as a native uint32
		mask, err2 := strconv.ParseUint(c[7], 16, 32)
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte(binary.NativeEndian.AppendUint32(nil, uint32(dst)))), bits.OnesCount32(uint32(mask)))
		if err1 == nil && err2 == nil && p.Bits() > 0 && p.Masked().Overlaps(pbp.EdgePool) {
			clash = append(clash, fmt.Sprintf("%s via %s", p.Masked(), c[0]))
		}
	}
	switch {
	case !ok:
		return Skipped, "cannot read " + PathRoutes
	case len(clash) > 0:
		return Fail, fmt.Sprintf("the host routes %s, inside the stack's edge pool %s: the edge networks would shadow it; free the range", strings.Join(clash, ", "), pbp.EdgePool)
	}
	return OK, "no host route into the edge pool " + pbp.EdgePool.String() + " besides Docker's bridges"
}

func kmsCheck(f Facts) []Result {
	k := f.KMS
	switch {
	case k.Bundle == nil && (k.Err == nil || errors.Is(k.Err, ErrNoStack)):
		return []Result{{"kms", Skipped, fmt.Sprintf("no kms bundle in the logs of project %q (%v): start the stack to see its memory hygiene", k.Project, orText(k.Err, ErrNoStack.Error()))}}
	case k.Bundle == nil:
		return []Result{{"kms", Fail, fmt.Sprintf("the kms of project %q printed a bundle doctor cannot read: %v", k.Project, k.Err)}}
	}
	h := k.Bundle.Hygiene()
	if len(h) == 0 {
		return []Result{{"kms", Degraded, fmt.Sprintf("kms %s (project %s) reports no memory hygiene", k.Bundle.Fingerprint(), k.Project)}}
	}
	var rs []Result
	for _, key := range slices.Sorted(maps.Keys(h)) {
		st := map[bool]Status{true: OK, false: Degraded}[h[key] == "ok"]
		rs = append(rs, Result{"kms/" + key, st, fmt.Sprintf("kms %s (project %s): %s", k.Bundle.Fingerprint(), k.Project, h[key])})
	}
	return rs
}

func dnsLeakCheck(f Facts) (Status, string) {
	switch l := f.Live; {
	case l.Skip != "":
		return Skipped, l.Skip
	case !l.Ran:
		return Skipped, "run with --live to probe whether a container on an internal network reaches a resolver on the host's loopback"
	case l.Err != nil:
		return Fail, fmt.Sprintf("the probe could not finish, so the leak is unmeasured: %v", l.Err)
	case len(l.Leaked) > 0:
		return Fail, fmt.Sprintf("a container on an internal network asked for %s and the query reached the host's 127.0.0.1:53: this engine leaks internal networks' DNS to the host's loopback (CVE-2024-29018). SHarness's stack gives its containers dns 0.0.0.0 and does not hit this (the e2e suite tests it); other containers do: upgrade the engine", strings.Join(l.Leaked, ", "))
	}
	return OK, "a container on an internal network with --dns 127.0.0.1: no query reached the host's 127.0.0.1:53 (Moby, 20.10 at least, takes --dns 127.0.0.x as the container's own loopback; the CVE's condition is a loopback resolver in the host's resolv.conf: see the engine line)"
}
