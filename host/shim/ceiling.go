package shim

import (
	"maps"
	"slices"
	"strconv"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// fixtureSysctls are the only kernel settings a test fixture may have, both of its own network
// namespace: the world and the model serve on ports below 1024 without a capability
// (compose/world.yml), and Docker (20.10 and later) sets ping_group_range on every container so
// that ping needs no CAP_NET_RAW (measured: "0 2147483647").
var fixtureSysctls = []string{"net.ipv4.ip_unprivileged_port_start", "net.ipv4.ping_group_range"}

// fixtureNamespaces are the namespaces a fixture must have of its own (joined ones are judged by
// unmarkedNamespaces): without one, it shares the host's.
var fixtureNamespaces = []specs.LinuxNamespaceType{
	specs.PIDNamespace, specs.NetworkNamespace, specs.IPCNamespace, specs.UTSNamespace, specs.MountNamespace,
}

// FixtureCeiling is what a container claiming a test fixture may be at most, whatever its
// compose file says: the fixtures have no compiled spec to be held to, so without a ceiling a
// fixture claim (an image of anyone's, on a host where a test-world policy is installed) would
// get root, capabilities, seccomp unconfined or the host's namespaces past the shim (an attack on
// the running stack found it). The ceiling is compose/world.yml's own settings: no capability in
// any set, not root, no new privileges, a read-only root, a seccomp filter, every namespace of
// its own, the engine's masked paths, no device, no kernel setting but fixtureSysctls, and
// the engine's cgroup for this container id (checkCgroupsPath, as a component's).
func FixtureCeiling(id string, s *specs.Spec) []Reason {
	if s.Process == nil {
		return []Reason{{Field: "process", Want: "a process", Got: "none"}}
	}
	out := fixtureProcess("process", s.Process)
	if s.Root == nil || !s.Root.Readonly {
		out = append(out, Reason{Field: "root.readonly", Want: "true", Got: "false"})
	}
	l := s.Linux
	if l == nil {
		return append(out, Reason{Field: "linux", Want: "the engine's Linux settings", Got: "none"})
	}
	switch {
	case l.Seccomp == nil:
		out = append(out, Reason{Field: "linux.seccomp", Want: "a seccomp filter (the engine's default)", Got: "none (unconfined)"})
	case l.Seccomp.DefaultAction == specs.ActAllow || l.Seccomp.DefaultAction == specs.ActLog || l.Seccomp.DefaultAction == specs.ActNotify:
		// --security-opt seccomp=FILE with a profile that lets what it does not name through.
		out = append(out, Reason{Field: "linux.seccomp.defaultAction", Want: "a refusal (errno, kill or trap) for what the filter does not name", Got: string(l.Seccomp.DefaultAction)})
	}
	for _, t := range fixtureNamespaces {
		if !slices.ContainsFunc(l.Namespaces, func(n specs.LinuxNamespace) bool { return n.Type == t }) {
			out = append(out, Reason{Field: "linux.namespaces." + string(t), Want: "its own", Got: "the host's"})
		}
	}
	if len(l.MaskedPaths) == 0 || len(l.ReadonlyPaths) == 0 { // --security-opt systempaths=unconfined
		out = append(out, Reason{Field: "linux.maskedPaths", Want: "the engine's masked and read-only /proc and /sys paths", Got: "none"})
	}
	out = append(out, checkCgroupsPath(&comparison{facts: Facts{ID: id}}, "linux.cgroupsPath", "", l.CgroupsPath)...)
	if len(l.Devices) > 0 {
		out = append(out, Reason{Field: "linux.devices", Want: "none", Got: l.Devices[0].Path})
	}
	for _, k := range slices.Sorted(maps.Keys(l.Sysctl)) {
		if !slices.Contains(fixtureSysctls, k) {
			out = append(out, Reason{Field: "linux.sysctl[" + k + "]", Want: "only " + strings.Join(fixtureSysctls, ", "), Got: strconv.Quote(l.Sysctl[k])})
		}
	}
	return out
}

// fixtureProcess is FixtureCeiling's part for a process, the container's (field "process") or
// one exec'd into it: no capability in any set, not root, no new privileges. An exec is held to
// it too, as `docker exec --privileged` or `-u 0` into a fixture would otherwise get what its
// container may not.
func fixtureProcess(field string, p *specs.Process) []Reason {
	var out []Reason
	if c := p.Capabilities; c != nil {
		for _, set := range []struct {
			name string
			caps []string
		}{{"bounding", c.Bounding}, {"effective", c.Effective}, {"inheritable", c.Inheritable}, {"permitted", c.Permitted}, {"ambient", c.Ambient}} {
			if len(set.caps) > 0 {
				out = append(out, Reason{Field: field + ".capabilities." + set.name, Want: "none (a fixture drops every capability)", Got: strings.Join(set.caps, ",")})
			}
		}
	}
	if p.User.UID == 0 || p.User.GID == 0 || slices.Contains(p.User.AdditionalGids, 0) {
		out = append(out, Reason{Field: field + ".user", Want: "not root (uid, gid and groups other than 0)", Got: "uid " + strconv.FormatUint(uint64(p.User.UID), 10) + " gid " + strconv.FormatUint(uint64(p.User.GID), 10)})
	}
	if !p.NoNewPrivileges {
		out = append(out, Reason{Field: field + ".noNewPrivileges", Want: "true", Got: "false"})
	}
	return out
}
