package shim

import (
	"path"
	"slices"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// engineNetns are the folders where Docker's libnetwork keeps the network namespaces it creates
// for its networks. Joining one of them is how an engine attaches a container to its networks;
// any other path (/proc/1/ns/net is the host's, /proc/<pid>/ns/net another container's, as
// `network_mode: container:x` asks) joins a namespace the policy did not make. One name in them
// is the host's own: libnetwork's "default", which `network_mode: host` joins (measured, Engine
// 20.10).
var engineNetns = []string{"/var/run/docker/netns/", "/run/docker/netns/"}

// checkNamespaces refuses a namespace of want's that got lacks (the host's is shared), a namespace
// joined by path (except a network one in engineNetns), and a user namespace on one side only.
func checkNamespaces(want, got []specs.LinuxNamespace) []Reason {
	var out []Reason
	has := func(l []specs.LinuxNamespace, t specs.LinuxNamespaceType) bool {
		return slices.ContainsFunc(l, func(n specs.LinuxNamespace) bool { return n.Type == t })
	}
	for _, n := range want {
		if n.Type != specs.UserNamespace && !has(got, n.Type) {
			out = append(out, Reason{Field: "linux.namespaces." + string(n.Type), Want: "new", Got: "the host's"})
		}
	}
	for _, n := range got {
		if n.Path != "" && !joinAllowed(n) {
			out = append(out, Reason{Field: "linux.namespaces." + string(n.Type), Want: "new", Got: "joined " + n.Path})
		}
	}
	if w, g := has(want, specs.UserNamespace), has(got, specs.UserNamespace); w != g {
		out = append(out, Reason{Field: "linux.namespaces.user", Want: presence(w), Got: presence(g)})
	}
	return out
}

func joinAllowed(n specs.LinuxNamespace) bool {
	if n.Type != specs.NetworkNamespace {
		return false
	}
	p := path.Clean(n.Path)
	return slices.ContainsFunc(engineNetns, func(dir string) bool {
		name := strings.TrimPrefix(p, dir)
		return strings.HasPrefix(p, dir) && name != "" && name != hostNetns && !strings.Contains(name, "/")
	})
}

// hostNetns is libnetwork's name for the host's network namespace in engineNetns.
const hostNetns = "default"

func presence(b bool) string {
	if b {
		return "a user namespace"
	}
	return "none"
}

// permits reports whether a seccomp action lets the syscall run, or may (a tracer, a user-space
// notifier). Unknown actions count as permitting: fail closed.
func permits(a specs.LinuxSeccompAction) bool {
	switch a {
	case specs.ActErrno, specs.ActKill, specs.ActKillThread, specs.ActKillProcess, specs.ActTrap:
		return false
	}
	return true
}

// checkSeccomp refuses a missing profile, a permitting default action, an architecture want does
// not list (an i386 or x32 sub-architecture reopens socketcall, which would bypass socket-family
// filters: docs/architecture.md, "Decisions worth knowing") and every syscall got permits in some
// rule that want permits in none.
//
// Limitation: names are compared, not argument filters. A syscall that want permits only with an
// argument filter (clone without CLONE_NEW* flags, memfd_create with MFD_ALLOW_SEALING) is
// accepted when got permits it without one. That widening needs a profile the engine is asked to
// load by name (`security_opt: seccomp=FILE`); closing it means comparing the rules themselves.
func checkSeccomp(want, got *specs.LinuxSeccomp) []Reason {
	switch {
	case got == nil:
		return []Reason{{Field: "linux.seccomp", Want: "the compiled profile", Got: "none (unconfined)"}}
	case want == nil:
		return []Reason{{Field: "linux.seccomp", Want: "a compiled profile", Got: "a policy without one"}}
	}
	var out []Reason
	if permits(got.DefaultAction) {
		out = append(out, Reason{Field: "linux.seccomp.defaultAction", Want: string(want.DefaultAction), Got: string(got.DefaultAction)})
	}
	var arches []string
	for _, a := range got.Architectures {
		if !slices.Contains(want.Architectures, a) {
			arches = append(arches, string(a))
		}
	}
	if len(arches) > 0 {
		out = append(out, Reason{Field: "linux.seccomp.architectures", Want: archList(want.Architectures), Got: strings.Join(arches, ",")})
	}
	allowed := make(map[string]bool)
	for _, r := range want.Syscalls {
		if permits(r.Action) {
			for _, n := range r.Names {
				allowed[n] = true
			}
		}
	}
	var extra []string
	for _, r := range got.Syscalls {
		if !permits(r.Action) {
			continue
		}
		for _, n := range r.Names {
			if !allowed[n] && !slices.Contains(extra, n) {
				extra = append(extra, n)
			}
		}
	}
	if len(extra) > 0 {
		slices.Sort(extra)
		out = append(out, Reason{Field: "linux.seccomp.syscalls", Want: "only the compiled profile's", Got: strings.Join(extra, ",")})
	}
	return out
}

func archList(a []specs.Arch) string {
	var s []string
	for _, x := range a {
		s = append(s, string(x))
	}
	return listOrNone(s)
}
