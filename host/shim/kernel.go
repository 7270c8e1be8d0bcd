package shim

import (
	"fmt"
	"path"
	"slices"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// engineNetns are the folders where Docker's libnetwork keeps the network namespaces it creates
// for its networks, each named by the first 12 hex digits of a sandbox id. Joining one of them is
// how an engine can attach a container to its networks (Docker 20.10 does it in its prestart
// hook instead: the fixtures join none); any other path (/proc/1/ns/net is the host's,
// /proc/<pid>/ns/net another container's, as `network_mode: container:x` asks) joins a namespace
// the policy did not make. One name there is the host's own: libnetwork's "default", which
// `network_mode: host` joins (measured, Engine 20.10); it is not hex.
var engineNetns = []string{"/var/run/docker/netns/", "/run/docker/netns/"}

// checkNamespaces refuses a compiled namespace got lacks (the host's is shared), a namespace the
// policy does not have (a user namespace maps ids the policy never saw; a time namespace joined
// by path is not the policy's either), a type named twice, and a namespace joined by path (except
// a network one in engineNetns). A new time namespace is the engine's own (Engine 29 gives every
// container one where the kernel has them, measured; Docker 20.10 none): it only narrows, as its
// clock offsets are zero unless linux.timeOffsets sets them, which must equal the compiled (none).
func checkNamespaces(_ *comparison, _ string, want, got []specs.LinuxNamespace) []Reason {
	var out []Reason
	has := func(l []specs.LinuxNamespace, t specs.LinuxNamespaceType) bool {
		return slices.ContainsFunc(l, func(n specs.LinuxNamespace) bool { return n.Type == t })
	}
	for _, n := range want {
		if !has(got, n.Type) {
			out = append(out, Reason{Field: "linux.namespaces." + string(n.Type), Want: presence(n.Type), Got: "the host's"})
		}
	}
	seen := map[specs.LinuxNamespaceType]bool{}
	for _, n := range got {
		field := "linux.namespaces." + string(n.Type)
		switch {
		case seen[n.Type]:
			out = append(out, Reason{Field: field, Want: "once", Got: "twice"})
		case n.Type == specs.TimeNamespace && n.Path == "" && !has(want, n.Type):
		case !has(want, n.Type):
			out = append(out, Reason{Field: field, Want: "none", Got: presence(n.Type)})
		case n.Path != "" && !joinAllowed(n):
			out = append(out, Reason{Field: field, Want: "new", Got: "joined " + n.Path})
		}
		seen[n.Type] = true
	}
	return out
}

func joinAllowed(n specs.LinuxNamespace) bool {
	if n.Type != specs.NetworkNamespace {
		return false
	}
	p := path.Clean(n.Path)
	return slices.ContainsFunc(engineNetns, func(dir string) bool {
		name, ok := strings.CutPrefix(p, dir)
		return ok && hex12.MatchString(name)
	})
}

func presence(t specs.LinuxNamespaceType) string {
	if t == specs.UserNamespace {
		return "a user namespace"
	}
	return "new"
}

// effect is what a seccomp action does to the syscalls it matches.
type effect int

const (
	denies effect = iota // fails without running: an errno, a signal, a kill
	fakes                // SCMP_ACT_ERRNO with errno 0: returns success without running, so a
	// process believes it dropped a privilege or applied a Landlock domain it did not
	runs // allow, log, a tracer or a notifier that may let it run, and any action the shim does not know
)

func effectOf(a specs.LinuxSeccompAction, errno *uint) effect {
	switch a {
	case specs.ActKill, specs.ActKillThread, specs.ActKillProcess, specs.ActTrap:
		return denies
	case specs.ActErrno:
		if errno != nil && *errno == 0 {
			return fakes
		}
		return denies
	}
	return runs
}

// checkSeccomp compares the profile rule by rule, with argument filters. It refuses a missing
// profile, a default action that does not deny, an architecture want does not list (an i386 or
// x32 sub-architecture reopens socketcall, which would bypass socket-family filters:
// docs/architecture.md, "Decisions worth knowing"), a flag want lacks (SPEC_ALLOW turns off the
// kernel's speculation mitigation), a user-space listener, and every rule got has that runs or
// fakes a syscall unless want has a rule with the same effect on that syscall whose argument
// conditions are a subset of got's (conditions are ANDed: more only narrow). A conditional denial
// of want's (memfd_create without MFD_ALLOW_SEALING) must be kept where got lets that syscall run
// otherwise (carvesOut), so that it cannot be undone by a broader rule.
func checkSeccomp(_ *comparison, field string, want, got *specs.LinuxSeccomp) []Reason {
	switch {
	case got == nil:
		return []Reason{{Field: field, Want: "the compiled profile", Got: "none (unconfined)"}}
	case want == nil:
		return []Reason{{Field: field, Want: "a compiled profile", Got: "a policy without one"}}
	}
	var out []Reason
	def := got.DefaultAction
	if effectOf(def, got.DefaultErrnoRet) != denies {
		out = append(out, Reason{Field: field + ".defaultAction", Want: string(want.DefaultAction), Got: actionText(def, got.DefaultErrnoRet)})
	}
	var arches []string
	for _, a := range got.Architectures {
		if !slices.Contains(want.Architectures, a) {
			arches = append(arches, string(a))
		}
	}
	if len(arches) > 0 {
		out = append(out, Reason{Field: field + ".architectures", Want: archList(want.Architectures), Got: strings.Join(arches, ",")})
	}
	var flags []string
	for _, f := range got.Flags {
		if !slices.Contains(want.Flags, f) {
			flags = append(flags, string(f))
		}
	}
	if len(flags) > 0 {
		out = append(out, Reason{Field: field + ".flags", Want: listOrNone(flagNames(want.Flags)), Got: strings.Join(flags, ",")})
	}
	if got.ListenerPath != want.ListenerPath || got.ListenerMetadata != want.ListenerMetadata {
		out = append(out, Reason{Field: field + ".listenerPath", Want: orNone(want.ListenerPath), Got: got.ListenerPath})
	}
	wantRules, gotRules := asRuncAdds(want.Syscalls), asRuncAdds(got.Syscalls)
	var extra []string
	for _, g := range gotRules {
		e := effectOf(g.Action, g.ErrnoRet)
		if e == denies {
			continue
		}
		for _, n := range g.Names {
			if !covered(wantRules, n, e, g.Args) && !slices.Contains(extra, syscallText(n, e, g.Args)) {
				extra = append(extra, syscallText(n, e, g.Args))
			}
		}
	}
	for _, w := range wantRules {
		if len(w.Args) == 0 || effectOf(w.Action, w.ErrnoRet) != denies {
			continue
		}
		for _, n := range w.Names {
			if carvesOut(wantRules, n, w.Args) && runsIn(gotRules, n) && !deniedIn(gotRules, n, w.Args) {
				extra = append(extra, n+" without its denial when "+argsText(w.Args))
			}
		}
	}
	if len(extra) > 0 {
		slices.Sort(extra)
		out = append(out, Reason{Field: field + ".syscalls", Want: "only the compiled profile's", Got: strings.Join(extra, ",")})
	}
	return out
}

// covered: want has a rule with effect e on name whose conditions are all among args.
func covered(want []specs.LinuxSyscall, name string, e effect, args []specs.LinuxSeccompArg) bool {
	return slices.ContainsFunc(want, func(w specs.LinuxSyscall) bool {
		return effectOf(w.Action, w.ErrnoRet) == e && slices.Contains(w.Names, name) &&
			!slices.ContainsFunc(w.Args, func(a specs.LinuxSeccompArg) bool { return !slices.Contains(args, a) })
	})
}

// carvesOut: the denial of name under args is cut out of a broader permission of want's (one
// whose conditions are all among args), so it only holds while it is there. A denial beside a
// permission under other conditions (memfd_create with and without MFD_ALLOW_SEALING) needs no
// keeping: without it the default action denies.
func carvesOut(want []specs.LinuxSyscall, name string, args []specs.LinuxSeccompArg) bool {
	return slices.ContainsFunc(want, func(r specs.LinuxSyscall) bool {
		return effectOf(r.Action, r.ErrnoRet) != denies && slices.Contains(r.Names, name) &&
			!slices.ContainsFunc(r.Args, func(a specs.LinuxSeccompArg) bool { return !slices.Contains(args, a) })
	})
}

func runsIn(rules []specs.LinuxSyscall, name string) bool {
	return slices.ContainsFunc(rules, func(r specs.LinuxSyscall) bool {
		return effectOf(r.Action, r.ErrnoRet) != denies && slices.Contains(r.Names, name)
	})
}

func deniedIn(rules []specs.LinuxSyscall, name string, args []specs.LinuxSeccompArg) bool {
	return slices.ContainsFunc(rules, func(r specs.LinuxSyscall) bool {
		return effectOf(r.Action, r.ErrnoRet) == denies && slices.Contains(r.Names, name) && len(r.Args) == len(args) &&
			!slices.ContainsFunc(args, func(a specs.LinuxSeccompArg) bool { return !slices.Contains(r.Args, a) })
	})
}

// asRuncAdds is a profile's rules as runc adds them to the filter: a rule with two conditions on
// one argument becomes one rule per condition (libseccomp cannot AND them; runc's
// seccomp_linux.go falls back so), which ORs them. Compared as written, {arg0 == A, arg0 == B}
// would look narrower than {arg0 == A} while it lets B through too.
func asRuncAdds(rules []specs.LinuxSyscall) []specs.LinuxSyscall {
	var out []specs.LinuxSyscall
	for _, r := range rules {
		seen, repeats := map[uint]bool{}, false
		for _, a := range r.Args {
			repeats = repeats || seen[a.Index]
			seen[a.Index] = true
		}
		if !repeats {
			out = append(out, r)
			continue
		}
		for _, a := range r.Args {
			one := r
			one.Args = []specs.LinuxSeccompArg{a}
			out = append(out, one)
		}
	}
	return out
}

func syscallText(name string, e effect, args []specs.LinuxSeccompArg) string {
	s := name
	if e == fakes {
		s += " (faked success)"
	}
	if len(args) > 0 {
		s += " when " + argsText(args)
	}
	return s
}

func argsText(args []specs.LinuxSeccompArg) string {
	var s []string
	for _, a := range args {
		x := fmt.Sprintf("arg%d %s %d", a.Index, strings.TrimPrefix(string(a.Op), "SCMP_CMP_"), a.Value)
		if a.Op == specs.OpMaskedEqual {
			x += fmt.Sprintf("/%d", a.ValueTwo)
		}
		s = append(s, x)
	}
	return "[" + strings.Join(s, " and ") + "]"
}

func actionText(a specs.LinuxSeccompAction, errno *uint) string {
	if a == specs.ActErrno && errno != nil {
		return fmt.Sprintf("%s(%d)", a, *errno)
	}
	return string(a)
}

func archList(a []specs.Arch) string {
	var s []string
	for _, x := range a {
		s = append(s, string(x))
	}
	return listOrNone(s)
}

func flagNames(f []specs.LinuxSeccompFlag) []string {
	var s []string
	for _, x := range f {
		s = append(s, string(x))
	}
	return s
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
