package sandbox

import (
	"cmp"
	"fmt"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// The seccomp filter of every sandbox, on top of the container's profile. That profile gives
// bash's server what it needs to build sandboxes (clone with CLONE_NEW* flags, clone3,
// unshare, setns, mount, umount2, pivot_root), so inside the sandbox they must be closed
// again: with a new user namespace a command would hold every capability there and could
// remount its way around the workspace's protections. It is written by hand with
// golang.org/x/net/bpf because libseccomp-golang needs cgo and our binaries are static.
//
// Only x86_64 is allowed (any other audit arch, and the x32 ABI's syscall numbers, kill the
// process): through int 0x80 a 64-bit process reaches the i386 table, whose numbers differ.
// clone3 answers ENOSYS, so libc falls back to clone, whose flags are a register seccomp can
// read; clone with any CLONE_NEW* flag answers EPERM. socket is limited to unix, netlink,
// IPv4 and IPv6, and for IP to TCP and UDP: Landlock's TCP rules do not see MPTCP or SCTP.

const (
	retAllow = unix.SECCOMP_RET_ALLOW
	retKill  = unix.SECCOMP_RET_KILL_PROCESS
	x32Bit   = 0x40000000 // __X32_SYSCALL_BIT
	// cloneNew is every CLONE_NEW* flag clone(2) takes (CLONE_NEWTIME only exists for clone3
	// and unshare, and its bit is CSIGNAL's in clone).
	cloneNew = unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC |
		unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET
)

// denied answer EPERM: mounts (old and new API), namespaces, root changes, other processes'
// memory, and io_uring (whose operations seccomp cannot see).
var denied = []uint32{
	unix.SYS_MOUNT, unix.SYS_UMOUNT2, unix.SYS_PIVOT_ROOT, unix.SYS_CHROOT, unix.SYS_UNSHARE, unix.SYS_SETNS,
	unix.SYS_FSOPEN, unix.SYS_FSCONFIG, unix.SYS_FSMOUNT, unix.SYS_FSPICK, unix.SYS_OPEN_TREE,
	unix.SYS_MOVE_MOUNT, unix.SYS_MOUNT_SETATTR, unix.SYS_PTRACE, unix.SYS_PROCESS_VM_READV,
	unix.SYS_PROCESS_VM_WRITEV, unix.SYS_IO_URING_SETUP, unix.SYS_IO_URING_ENTER, unix.SYS_IO_URING_REGISTER,
}

func errno(e unix.Errno) uint32 { return unix.SECCOMP_RET_ERRNO | uint32(e) }

// Offsets in struct seccomp_data: nr, arch, then the arguments' 64-bit slots (little endian,
// so the low 32 bits come first; the kernel reads clone's flags, socket's family and protocol
// as 32-bit values).
const (
	offNr, offArch, offArg0, offArg2 = 0, 4, 16, 32
)

// op is one instruction; a conditional jump names its targets by label ("" falls through).
type op struct {
	ins         bpf.Instruction
	label, t, f string
}

func ld(off uint32) op { return op{ins: bpf.LoadAbsolute{Off: off, Size: 4}} }
func ret(v uint32) op  { return op{ins: bpf.RetConstant{Val: v}} }
func at(label string, o op) op {
	o.label = label
	return o
}

func jump(c bpf.JumpTest, v uint32, t, f string) op {
	return op{ins: bpf.JumpIf{Cond: c, Val: v}, t: t, f: f}
}
func jeq(v uint32, t, f string) op { return jump(bpf.JumpEqual, v, t, f) }

// program is the filter, before assembly.
func program() []op {
	p := []op{
		ld(offArch), jeq(unix.AUDIT_ARCH_X86_64, "", "kill"),
		ld(offNr), jump(bpf.JumpGreaterOrEqual, x32Bit, "kill", ""),
		jeq(unix.SYS_CLONE3, "enosys", ""),
		jeq(unix.SYS_CLONE, "clone", ""),
		jeq(unix.SYS_SOCKET, "socket", ""),
	}
	for _, nr := range denied {
		p = append(p, jeq(nr, "eperm", ""))
	}
	return append(p,
		ret(retAllow),
		at("clone", ld(offArg0)), jump(bpf.JumpBitsSet, cloneNew, "eperm", "allow"),
		at("socket", ld(offArg0)),
		jeq(unix.AF_UNIX, "allow", ""), jeq(unix.AF_NETLINK, "allow", ""),
		jeq(unix.AF_INET, "ip", ""), jeq(unix.AF_INET6, "ip", ""),
		ret(errno(unix.EAFNOSUPPORT)),
		at("ip", ld(offArg2)),
		jeq(0, "allow", ""), jeq(unix.IPPROTO_TCP, "allow", ""), jeq(unix.IPPROTO_UDP, "allow", ""),
		ret(errno(unix.EPROTONOSUPPORT)),
		at("allow", ret(retAllow)),
		at("eperm", ret(errno(unix.EPERM))),
		at("enosys", ret(errno(unix.ENOSYS))),
		at("kill", ret(retKill)),
	)
}

// assemble resolves labels into forward skips; a label that is missing or behind its jump is
// an error, as is a skip beyond 255.
func assemble(p []op) ([]bpf.Instruction, error) {
	where := map[string]int{}
	for i, o := range p {
		if o.label != "" {
			where[o.label] = i
		}
	}
	skip := func(i int, label string) (uint8, error) {
		if label == "" {
			return 0, nil
		}
		j, ok := where[label]
		if !ok || j <= i || j-i-1 > 255 {
			return 0, fmt.Errorf("seccomp filter: bad jump from %d to %q", i, label)
		}
		return uint8(j - i - 1), nil
	}
	out := make([]bpf.Instruction, len(p))
	for i, o := range p {
		out[i] = o.ins
		if j, ok := o.ins.(bpf.JumpIf); ok {
			var err1, err2 error
			j.SkipTrue, err1 = skip(i, o.t)
			j.SkipFalse, err2 = skip(i, o.f)
			if err := cmp.Or(err1, err2); err != nil {
				return nil, err
			}
			out[i] = j
		}
	}
	return out, nil
}

// loadFilter installs the filter on every thread of this process (TSYNC); no_new_privs must
// be set already.
func loadFilter() error {
	ins, err := assemble(program())
	if err != nil {
		return err
	}
	raw, err := bpf.Assemble(ins)
	if err != nil {
		return fmt.Errorf("seccomp filter: %w", err)
	}
	f := make([]unix.SockFilter, len(raw))
	for i, r := range raw {
		f[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	prog := unix.SockFprog{Len: uint16(len(f)), Filter: &f[0]}
	// With TSYNC a positive return is the id of a thread that could not be synchronised.
	r, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&prog)))
	if e != 0 {
		return fmt.Errorf("load seccomp filter: %w", e)
	}
	if r != 0 {
		return fmt.Errorf("load seccomp filter: thread %d not synchronised", r)
	}
	return nil
}
