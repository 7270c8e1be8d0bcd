// Seccomp profile compiler: Docker's default profile (moby/profiles), resolved at
// compile time for x86_64 and narrowed by the design's floor (seccompFloor). x86_64 alone: an
// i386 or x32 entry would reopen socketcall, which bypasses the socket-family filters
// (docs/pitfalls.md, "Seccomp sub-architectures").
//
// What it does not guarantee: seccomp sees syscall numbers and register arguments
// only. It cannot look behind pointers (clone3's flags, paths, socket addresses),
// so anything decided by such arguments is for Landlock, capabilities and the
// network layer to enforce.

package compile

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/moby/profiles/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// SeccompInput is what a component's effective policy says about syscalls.
type SeccompInput struct {
	Capabilities []string // e.g. "CAP_NET_BIND_SERVICE"; usually empty
	Allow        []string // syscalls the policy explicitly re-allows, plus the pseudo-name CloneNamespaces
	Deny         []string // extra syscalls the policy removes
}

// CloneNamespaces is a pseudo-syscall name for SeccompInput.Allow. Docker's default
// allows clone(2) only while its flags hold no CLONE_NEW* bit (a register argument,
// so seccomp can test it) and answers clone3(2) with ENOSYS, because clone3 passes
// its flags in a struct that seccomp cannot read. Naming CloneNamespaces allows clone
// and clone3 without that filter, so the component may create namespaces (bash's
// sandboxes). "clone" and "clone3" themselves are refused in Allow (allowing them
// by name would either do nothing or silently mean the same thing), and "clone3"
// in Deny (EPERM would stop glibc ≥ 2.34 from falling back to clone: no threads).
const CloneNamespaces = "clone_namespaces"

// Errnos. The default action answers ENOSYS: a syscall nobody listed looks like
// one this kernel lacks, so libc and language runtimes take their fallback path
// (glibc retries clone3 as clone, newer *at2 calls fall back to older ones) instead
// of failing. Every syscall the policy removes by name answers EPERM instead, from
// one explicit rule, so a test or a person reading strace can tell a deliberate
// policy refusal from an unknown syscall (docs/architecture.md, "Decisions worth knowing").
//
// Docker 20.10 ignores defaultErrnoRet (moby#42604 landed in 23.0; measured on
// 20.10.24): there the default answers EPERM. Moby's explicit "clone3 → ENOSYS"
// rule is therefore kept even though it repeats our default: per-rule errnoRet is
// honoured by 20.10 (measured), and runc ≥ 1.0.2 skips a rule equal to the default
// action (measured with runc 1.1.5 and this profile in config.json).
// To get the ENOSYS default under Docker 20.10, install the OCI profile into
// config.json (the runtime shim) rather than passing the JSON to dockerd.
const (
	errnoEPERM  uint = 1
	errnoENOSYS uint = 38
)

// seccompArch is the only target: native x86_64 with no sub-architectures. Moby
// adds x86 and x32 as sub-architectures; through them a 64-bit process can enter
// the i386 ABI (int 0x80), where socketcall(2) hides socket's arguments behind a
// pointer and bypasses the socket-family filters. With x86_64 alone, i386 and x32
// calls fail the filter's architecture check, and runc's libseccomp then kills the
// calling thread (measured, runc 1.1.5). A Go process whose main thread dies that
// way hangs as a zombie leader that Docker 20.10 cannot `rm -f` unless the
// container runs an init (--init); kill(2) from the host still ends it.
const (
	seccompArch = specs.ArchX86_64
	mobyArch    = "amd64" // how moby's Filter.Arches names x86_64
)

// seccompFloor is removed from every component unless its policy names a syscall
// in Allow, which pbp's design rules permit per kind: kernel attack surface (io_uring, userfaultfd, bpf,
// keyrings, perf), other processes (ptrace, process_vm_*, kcmp, page migration),
// namespaces and mounts, modules and kexec, host clocks and accounting, ancient
// ABIs. memfd_create and memfd_secret stay allowed (the Go runtime and kms use
// them); clone keeps moby's namespace filter (see CloneNamespaces).
//
// execveat is here to close the memfd exec attack (memfd_create + execveat or
// fexecve, which glibc implements with execveat) that Docker 20.10's default
// leaves open. Plain execve("/proc/self/fd/N") of a memfd is closed by sealedMemfd,
// not by Landlock: a memfd lives on a kernel-internal mount that a Landlock domain
// does not restrict (measured with sharness-landlock and a one-binary domain).
var seccompFloor = []string{
	"acct", "add_key", "adjtimex", "bpf", "chroot", "clock_adjtime", "clock_settime",
	"create_module", "delete_module", "execveat", "fanotify_init", "finit_module",
	"fsconfig", "fsmount", "fsopen", "fspick", "get_kernel_syms", "init_module",
	"io_uring_enter", "io_uring_register", "io_uring_setup", "ioperm", "iopl",
	"kcmp", "kexec_file_load", "kexec_load", "keyctl", "lookup_dcookie",
	"migrate_pages", "mount", "mount_setattr", "move_mount", "move_pages",
	"name_to_handle_at", "nfsservctl", "open_by_handle_at", "open_tree",
	"perf_event_open", "personality", "pivot_root", "process_vm_readv",
	"process_vm_writev", "ptrace", "query_module", "quotactl", "quotactl_fd",
	"reboot", "request_key", "setns", "settimeofday", "swapoff", "swapon", "syslog",
	"umount", "umount2", "unshare", "uselib", "userfaultfd", "vhangup", "vm86",
	"vm86old",
}

// Seccomp returns the profile in Docker's JSON format (what `docker run
// --security-opt seccomp=FILE`, containerd and Kubernetes Localhost profiles load)
// and the same profile as an OCI runtime-spec LinuxSeccomp for config.json. The
// output depends only on in and the moby/profiles version: no host kernel, arch or
// capability set is consulted, and the same input gives the same bytes.
//
// Resolution of moby's conditional rules: Includes/Excludes.Arches against x86_64,
// Includes/Excludes.Caps against in.Capabilities. A rule conditional on MinKernel
// (either side) depends on the host kernel, so it is dropped: fail closed. Today
// that is only ptrace and process_vm_{readv,writev}, which the floor removes anyway;
// a policy that re-allows all of a dropped rule's syscalls gets them back through
// Allow, which adds each name to the plain allow rule.
//
// Allow means allow without argument filter. Deny and the floor remove a name from
// every rule, including rules with argument filters, and add it to the EPERM rule.
// Unknown names and a name in both lists are errors.
func Seccomp(in SeccompInput) (docker []byte, oci *specs.LinuxSeccomp, err error) {
	base := seccomp.DefaultProfile()
	known := make(map[string]bool)
	for _, n := range seccompFloor {
		known[n] = true
	}
	for _, r := range base.Syscalls {
		for _, n := range r.Names {
			known[n] = true
		}
	}
	allowed := make(map[string]bool) // names that get a plain allow
	for _, n := range in.Allow {
		switch {
		case n == CloneNamespaces:
			allowed["clone"], allowed["clone3"] = true, true
		case n == "clone" || n == "clone3":
			return nil, nil, fmt.Errorf("compile seccomp: allow %q: name %q to allow clone with namespace flags", n, CloneNamespaces)
		case !known[n]:
			return nil, nil, fmt.Errorf("compile seccomp: allow %q: unknown syscall", n)
		default:
			allowed[n] = true
		}
	}
	removed := make(map[string]bool) // names that go to the EPERM rule
	for _, n := range in.Deny {
		if n == "clone3" {
			return nil, nil, fmt.Errorf("compile seccomp: deny %q: it answers ENOSYS already; EPERM would stop glibc falling back to clone", n)
		}
		if !known[n] {
			return nil, nil, fmt.Errorf("compile seccomp: deny %q: unknown syscall", n)
		}
		if allowed[n] {
			return nil, nil, fmt.Errorf("compile seccomp: %q is both allowed and denied", n)
		}
		removed[n] = true
	}
	for _, n := range seccompFloor {
		if !allowed[n] {
			removed[n] = true
		}
	}
	caps := make(map[string]bool)
	for _, c := range in.Capabilities {
		caps[c] = true
	}

	plain := slices.Sorted(maps.Keys(allowed))
	var filtered []specs.LinuxSyscall
	for _, r := range base.Syscalls {
		if !seccompIncluded(r, caps) {
			continue
		}
		var names []string
		for _, n := range r.Names {
			if !removed[n] && !allowed[n] {
				names = append(names, n)
			}
		}
		if i := slices.Index(names, "memfd_create"); i >= 0 && r.Action == specs.ActAllow && len(r.Args) == 0 {
			names = slices.Delete(names, i, i+1)
			filtered = append(filtered, sealedMemfd()...)
		}
		switch {
		case len(names) == 0:
		case r.Action == specs.ActAllow && len(r.Args) == 0:
			plain = append(plain, names...)
		default:
			slices.Sort(names)
			filtered = append(filtered, specs.LinuxSyscall{
				Names: names, Action: r.Action, ErrnoRet: copyUint(r.ErrnoRet), Args: slices.Clone(r.Args),
			})
		}
	}
	// Stable order: one plain allow rule, the argument-filtered rules ordered by
	// name (moby's order, which is by argument value, within a name), then the
	// EPERM rule.
	slices.SortStableFunc(filtered, func(a, b specs.LinuxSyscall) int { return slices.Compare(a.Names, b.Names) })
	slices.Sort(plain)
	rules := []specs.LinuxSyscall{{Names: slices.Compact(plain), Action: specs.ActAllow}}
	rules = append(rules, filtered...)
	eperm := errnoEPERM
	rules = append(rules, specs.LinuxSyscall{
		Names: slices.Sorted(maps.Keys(removed)), Action: specs.ActErrno, ErrnoRet: &eperm,
	})

	enosys := errnoENOSYS
	oci = &specs.LinuxSeccomp{
		DefaultAction:   specs.ActErrno,
		DefaultErrnoRet: &enosys,
		Architectures:   []specs.Arch{seccompArch},
		Syscalls:        rules,
	}
	// Docker's format names the architecture through archMap. subArchitectures is
	// written as [] rather than null: both load the same in Docker 20.10 and later
	// (Go decodes either into an empty slice), and [] reads as "none, on purpose".
	prof := seccomp.Seccomp{
		LinuxSeccomp: specs.LinuxSeccomp{DefaultAction: oci.DefaultAction, DefaultErrnoRet: oci.DefaultErrnoRet},
		ArchMap:      []seccomp.Architecture{{Arch: seccompArch, SubArches: []specs.Arch{}}},
	}
	for _, r := range rules {
		prof.Syscalls = append(prof.Syscalls, &seccomp.Syscall{LinuxSyscall: r})
	}
	docker, err = json.MarshalIndent(&prof, "", "  ")
	if err != nil {
		return nil, nil, fmt.Errorf("compile seccomp: encode profile: %w", err)
	}
	return append(docker, '\n'), oci, nil
}

// mfdNoExecSeal is MFD_NOEXEC_SEAL (Linux 6.3+, include/uapi/linux/memfd.h).
const mfdNoExecSeal = 0x0008

// sealedMemfd allows memfd_create only with MFD_NOEXEC_SEAL, whose memfd can never be made
// executable: this closes memfd exec through execve("/proc/self/fd/N"), which removing execveat
// alone leaves open. Without the flag the call answers EPERM (a named refusal). A kernel older
// than 6.3 refuses the flag with EINVAL, so memfd_create fails there: closed, not open. Unless
// the policy allows memfd_create by name (plain allow, as Allow always means).
func sealedMemfd() []specs.LinuxSyscall {
	eperm := errnoEPERM
	name := []string{"memfd_create"}
	return []specs.LinuxSyscall{
		{Names: name, Action: specs.ActAllow, Args: []specs.LinuxSeccompArg{{Index: 1, Value: mfdNoExecSeal, ValueTwo: mfdNoExecSeal, Op: specs.OpMaskedEqual}}},
		{Names: name, Action: specs.ActErrno, ErrnoRet: &eperm, Args: []specs.LinuxSeccompArg{{Index: 1, Value: mfdNoExecSeal, ValueTwo: 0, Op: specs.OpMaskedEqual}}},
	}
}

// seccompIncluded resolves a moby rule's conditions for x86_64 and caps.
func seccompIncluded(r *seccomp.Syscall, caps map[string]bool) bool {
	if inc := r.Includes; inc != nil {
		if inc.MinKernel != nil || len(inc.Arches) > 0 && !slices.Contains(inc.Arches, mobyArch) {
			return false
		}
		for _, c := range inc.Caps {
			if !caps[c] {
				return false
			}
		}
	}
	if exc := r.Excludes; exc != nil {
		if exc.MinKernel != nil || slices.Contains(exc.Arches, mobyArch) {
			return false
		}
		for _, c := range exc.Caps {
			if caps[c] {
				return false
			}
		}
	}
	return true
}

func copyUint(p *uint) *uint {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}
