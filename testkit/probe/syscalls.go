package main

import (
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/sharness-ai/sharness/testkit/sidedoor"
)

// Arguments the kernel reads through pointers: package variables, alive for the whole run.
var (
	uringParams [120]byte // struct io_uring_params
	memfdName   = []byte("sharness-probe\x00")
)

// syscallDoors call what the compiled seccomp policy refuses with EPERM, with arguments chosen
// so that the kernel itself would answer something else (success, EINVAL, EOPNOTSUPP): EPERM
// then proves the filter. Sockets are refused by the kernel: raw ones for want of CAP_NET_RAW,
// ping ones by net.ipv4.ping_group_range "1 0".
func syscallDoors() []door {
	const userModeOnly = 1 // UFFD_USER_MODE_ONLY: allowed even with vm.unprivileged_userfaultfd=0
	const ethPAll = 0x0300 // htons(ETH_P_ALL)
	const surface = "a kernel interface the agent has no use for (attack surface)"
	return []door{
		sidedoor.Errno("icmp/ping-socket", "EACCES", "ICMP out of the container", socket(unix.AF_INET, unix.SOCK_DGRAM, unix.IPPROTO_ICMP)),
		sidedoor.Errno("icmp/ping6-socket", "EACCES|EAFNOSUPPORT", "ICMPv6 out of the container", socket(unix.AF_INET6, unix.SOCK_DGRAM, unix.IPPROTO_ICMPV6)),
		sidedoor.Errno("raw-socket/inet", "EPERM", "forged IP packets", socket(unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_ICMP)),
		sidedoor.Errno("raw-socket/packet", "EPERM", "forged Ethernet frames", socket(unix.AF_PACKET, unix.SOCK_RAW, ethPAll)),
		sidedoor.Errno("mount", "EPERM", "new file systems over the read-only view", func() error {
			return unix.Mount("none", "/nonexistent-sharness-probe", "tmpfs", 0, "") // the kernel: ENOENT
		}),
		// A Go process is multithreaded: past seccomp, unshare(CLONE_NEWUSER) answers EINVAL.
		sidedoor.Errno("unshare/user-mount", "EPERM", "user and mount namespaces, root inside them", func() error {
			return unix.Unshare(unix.CLONE_NEWUSER | unix.CLONE_NEWNS)
		}),
		sidedoor.Errno("setns", "EPERM", "joining another namespace", func() error {
			fd, err := unix.Open("/proc/self/ns/uts", unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err != nil {
				return err
			}
			defer unix.Close(fd)
			return unix.Setns(fd, 0)
		}),
		sidedoor.Errno("keyctl", "EPERM", surface, raw(false, unix.SYS_KEYCTL, 0xffff, 0, 0)), // unknown operation: EOPNOTSUPP
		sidedoor.Errno("bpf", "EPERM", surface, raw(false, unix.SYS_BPF, 0xffff, 0, 0)),       // unknown command: EINVAL
		sidedoor.Errno("io_uring/setup", "EPERM", surface, raw(true, unix.SYS_IO_URING_SETUP, 1, uintptr(unsafe.Pointer(&uringParams)), 0)),
		sidedoor.Errno("userfaultfd", "EPERM", surface, raw(true, unix.SYS_USERFAULTFD, userModeOnly|unix.O_CLOEXEC, 0, 0)),
		// The compiled policy lets memfd_create through only with MFD_NOEXEC_SEAL.
		sidedoor.Errno("memfd-exec/unsealed-create", "EPERM", "an executable file that is on no file system",
			raw(true, unix.SYS_MEMFD_CREATE, uintptr(unsafe.Pointer(&memfdName[0])), unix.MFD_CLOEXEC, 0)),
	}
}

func socket(domain, typ, proto int) func() error {
	return func() error {
		fd, err := unix.Socket(domain, typ|unix.SOCK_CLOEXEC, proto)
		if err == nil {
			unix.Close(fd)
		}
		return err
	}
}

// raw makes a system call; when fd says it returns a file descriptor, that is closed.
func raw(fd bool, trap, a1, a2, a3 uintptr) func() error {
	return func() error {
		r, _, errno := unix.Syscall(trap, a1, a2, a3)
		if errno == 0 && fd {
			unix.Close(int(r))
		}
		return errnoErr(errno)
	}
}

// errnoErr is nil for 0: a zero Errno is not a nil error.
func errnoErr(e unix.Errno) error {
	if e == 0 {
		return nil
	}
	return e
}
