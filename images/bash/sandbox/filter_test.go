package sandbox

import (
	"encoding/binary"
	"testing"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// seccompData is a struct seccomp_data as the filter's 32-bit loads see it. The bpf VM loads
// big-endian words, the kernel native ones: each word is written in the VM's order, so that
// both read the same values.
func seccompData(nr, arch uint32, args ...uint64) []byte {
	b := make([]byte, 64)
	binary.BigEndian.PutUint32(b[0:], nr)
	binary.BigEndian.PutUint32(b[4:], arch)
	for i, a := range args {
		binary.BigEndian.PutUint32(b[16+8*i:], uint32(a))     // low half first (little endian)
		binary.BigEndian.PutUint32(b[20+8*i:], uint32(a>>32)) // then the high half
	}
	return b
}

func TestFilter(t *testing.T) {
	ins, err := assemble(program())
	if err != nil {
		t.Fatal(err)
	}
	vm, err := bpf.NewVM(ins)
	if err != nil {
		t.Fatalf("the filter is not valid BPF: %v", err)
	}
	const x86 = unix.AUDIT_ARCH_X86_64
	eperm, enosys := errno(unix.EPERM), errno(unix.ENOSYS)
	tests := []struct {
		name string
		data []byte
		want uint32
	}{
		{"read", seccompData(unix.SYS_READ, x86), retAllow},
		{"execve", seccompData(unix.SYS_EXECVE, x86), retAllow},
		{"i386 arch", seccompData(unix.SYS_READ, unix.AUDIT_ARCH_I386), retKill},
		{"aarch64 arch", seccompData(unix.SYS_READ, unix.AUDIT_ARCH_AARCH64), retKill},
		{"x32 syscall", seccompData(x32Bit|unix.SYS_UNSHARE, x86), retKill},
		{"x32 read", seccompData(x32Bit|unix.SYS_READ, x86), retKill},
		{"mount", seccompData(unix.SYS_MOUNT, x86), eperm},
		{"umount2", seccompData(unix.SYS_UMOUNT2, x86), eperm},
		{"pivot_root", seccompData(unix.SYS_PIVOT_ROOT, x86), eperm},
		{"chroot", seccompData(unix.SYS_CHROOT, x86), eperm},
		{"unshare", seccompData(unix.SYS_UNSHARE, x86, unix.CLONE_NEWUSER), eperm},
		{"unshare files", seccompData(unix.SYS_UNSHARE, x86, unix.CLONE_FILES), eperm},
		{"setns", seccompData(unix.SYS_SETNS, x86), eperm},
		{"ptrace", seccompData(unix.SYS_PTRACE, x86), eperm},
		{"process_vm_writev", seccompData(unix.SYS_PROCESS_VM_WRITEV, x86), eperm},
		{"fsopen", seccompData(unix.SYS_FSOPEN, x86), eperm},
		{"open_tree", seccompData(unix.SYS_OPEN_TREE, x86), eperm},
		{"move_mount", seccompData(unix.SYS_MOVE_MOUNT, x86), eperm},
		{"mount_setattr", seccompData(unix.SYS_MOUNT_SETATTR, x86), eperm},
		{"io_uring_setup", seccompData(unix.SYS_IO_URING_SETUP, x86), eperm},
		{"clone3", seccompData(unix.SYS_CLONE3, x86), enosys},
		{"fork by clone", seccompData(unix.SYS_CLONE, x86, uint64(unix.SIGCHLD)), retAllow},
		{"thread by clone", seccompData(unix.SYS_CLONE, x86, unix.CLONE_VM|unix.CLONE_FS|unix.CLONE_FILES|unix.CLONE_SIGHAND|unix.CLONE_THREAD|unix.CLONE_SYSVSEM), retAllow},
		{"vfork with pidfd", seccompData(unix.SYS_CLONE, x86, unix.CLONE_VM|unix.CLONE_VFORK|unix.CLONE_PIDFD|uint64(unix.SIGCHLD)), retAllow},
		{"clone newuser", seccompData(unix.SYS_CLONE, x86, unix.CLONE_NEWUSER|uint64(unix.SIGCHLD)), eperm},
		{"clone newns", seccompData(unix.SYS_CLONE, x86, unix.CLONE_NEWNS), eperm},
		{"clone newpid", seccompData(unix.SYS_CLONE, x86, unix.CLONE_NEWPID), eperm},
		{"clone newnet", seccompData(unix.SYS_CLONE, x86, unix.CLONE_NEWNET), eperm},
		{"clone newcgroup", seccompData(unix.SYS_CLONE, x86, unix.CLONE_NEWCGROUP), eperm},
		{"clone newipc", seccompData(unix.SYS_CLONE, x86, unix.CLONE_NEWIPC), eperm},
		{"clone newuts", seccompData(unix.SYS_CLONE, x86, unix.CLONE_NEWUTS), eperm},
		{"clone high bits only", seccompData(unix.SYS_CLONE, x86, 1<<40|uint64(unix.SIGCHLD)), retAllow},
		{"unix socket", seccompData(unix.SYS_SOCKET, x86, unix.AF_UNIX, unix.SOCK_STREAM, 0), retAllow},
		{"netlink socket", seccompData(unix.SYS_SOCKET, x86, unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_ROUTE), retAllow},
		{"tcp socket", seccompData(unix.SYS_SOCKET, x86, unix.AF_INET, unix.SOCK_STREAM, 0), retAllow},
		{"tcp6 socket", seccompData(unix.SYS_SOCKET, x86, unix.AF_INET6, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, unix.IPPROTO_TCP), retAllow},
		{"udp socket", seccompData(unix.SYS_SOCKET, x86, unix.AF_INET, unix.SOCK_DGRAM, unix.IPPROTO_UDP), retAllow},
		{"mptcp socket", seccompData(unix.SYS_SOCKET, x86, unix.AF_INET, unix.SOCK_STREAM, unix.IPPROTO_MPTCP), errno(unix.EPROTONOSUPPORT)},
		{"sctp socket", seccompData(unix.SYS_SOCKET, x86, unix.AF_INET6, unix.SOCK_STREAM, unix.IPPROTO_SCTP), errno(unix.EPROTONOSUPPORT)},
		{"icmp socket", seccompData(unix.SYS_SOCKET, x86, unix.AF_INET, unix.SOCK_DGRAM, unix.IPPROTO_ICMP), errno(unix.EPROTONOSUPPORT)},
		{"packet socket", seccompData(unix.SYS_SOCKET, x86, unix.AF_PACKET, unix.SOCK_RAW, 0), errno(unix.EAFNOSUPPORT)},
		{"vsock socket", seccompData(unix.SYS_SOCKET, x86, unix.AF_VSOCK, unix.SOCK_STREAM, 0), errno(unix.EAFNOSUPPORT)},
		{"tcp, protocol's high half set", seccompData(unix.SYS_SOCKET, x86, unix.AF_INET, unix.SOCK_STREAM, 1<<32|unix.IPPROTO_TCP), retAllow},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := vm.Run(tt.data)
			if err != nil {
				t.Fatalf("run: %v", err)
			}
			if uint32(got) != tt.want {
				t.Errorf("filter answers %#x, want %#x", got, tt.want)
			}
		})
	}
}

func TestAssemble(t *testing.T) {
	tests := []struct {
		name string
		p    []op
		ok   bool
	}{
		{"forward", []op{jeq(1, "a", ""), at("a", ret(0))}, true},
		{"missing label", []op{jeq(1, "b", ""), at("a", ret(0))}, false},
		{"backward", []op{at("a", ld(0)), jeq(1, "a", ""), ret(0)}, false},
		{"too far", append(append([]op{jeq(1, "far", "")}, make([]op, 256)...), at("far", ret(0))), false},
	}
	for _, tt := range tests {
		for i := range tt.p {
			if tt.p[i].ins == nil {
				tt.p[i].ins = bpf.RetConstant{}
			}
		}
		if _, err := assemble(tt.p); (err == nil) != tt.ok {
			t.Errorf("%s: assemble error = %v, want ok %v", tt.name, err, tt.ok)
		}
	}
}
