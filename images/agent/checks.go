package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/sharness-ai/sharness/testkit/reexec"
)

// result is one line of the self-report.
type result struct {
	Check    string `json:"check"`
	Expected string `json:"expected"`
	Got      string `json:"got"`
	OK       bool   `json:"ok"`
	Skipped  bool   `json:"skipped,omitempty"`
	Reason   string `json:"reason"`
}

// judge makes a result; reason says what the check guards against, or why it could not run.
func judge(check, expected, got string, ok bool, reason string) result {
	return result{Check: check, Expected: expected, Got: got, OK: ok, Reason: reason}
}

func skip(check, expected, reason string) result {
	return result{Check: check, Expected: expected, Got: "not checked", OK: true, Skipped: true, Reason: reason}
}

func statusChecks() []result {
	text, err := os.ReadFile("/proc/self/status")
	var s procStatus
	if err == nil {
		s, err = parseStatus(string(text))
	}
	if err != nil {
		return []result{judge("proc_status", "readable", "error", false, err.Error())}
	}
	ids := func(check string, v [4]uint64) result {
		return judge(check, "non-zero", fmt.Sprint(v[0], v[1], v[2], v[3]), !slices.Contains(v[:], 0),
			"no id of the process (real, effective, saved, fs) may be root")
	}
	capSet := func(check string, v uint64) result {
		return judge(check, "0000000000000000", fmt.Sprintf("%016x", v), v == 0, "the capability set must be empty")
	}
	return []result{
		ids("uid", s.uid),
		ids("gid", s.gid),
		capSet("cap_eff", s.capEff),
		capSet("cap_prm", s.capPrm),
		capSet("cap_bnd", s.capBnd),
		judge("no_new_privs", "1", fmt.Sprint(s.noNewPrivs), s.noNewPrivs == 1,
			"without no_new_privs, setuid binaries could raise privileges"),
		judge("seccomp", "2", fmt.Sprint(s.seccomp), s.seccomp == 2,
			"a seccomp filter must be installed (0 off, 1 strict, 2 filter)"),
	}
}

// rootReadOnly creates a file at the root: a read-only root file system answers EROFS, which
// the kernel checks before directory permissions, so a non-root user still sees EROFS.
func rootReadOnly() result {
	const name = "/.sharness-agent-probe"
	f, err := os.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err == nil {
		f.Close()
		os.Remove(name)
		return judge("rootfs_read_only", "EROFS", "created", false, "the root file system is writable")
	}
	return judge("rootfs_read_only", "EROFS", errnoName(err), errors.Is(err, unix.EROFS), err.Error())
}

// tmpWritable checks that /tmp is a writable tmpfs when one is mounted there.
func tmpWritable() result {
	const check, want = "tmp_writable", "tmpfs, writable"
	var fs unix.Statfs_t
	switch err := unix.Statfs("/tmp", &fs); {
	case errors.Is(err, unix.ENOENT):
		return skip(check, want, "/tmp does not exist")
	case err != nil:
		return judge(check, want, errnoName(err), false, fmt.Sprintf("statfs /tmp: %v", err))
	case fs.Type != unix.TMPFS_MAGIC:
		return skip(check, want, fmt.Sprintf("/tmp is not a tmpfs (type %#x)", fs.Type))
	}
	f, err := os.CreateTemp("/tmp", "sharness-agent-probe-")
	if err != nil {
		return judge(check, want, "tmpfs, "+errnoName(err), false, err.Error())
	}
	f.Close()
	os.Remove(f.Name())
	return judge(check, want, want, true, fmt.Sprintf("tmpfs of %d bytes", fs.Blocks*uint64(fs.Bsize)))
}

// deniedSyscalls calls each syscall the policy denies, with arguments chosen so that the kernel
// would answer something other than EPERM (success, EINVAL, EOPNOTSUPP) if the call reached it:
// EPERM then proves the seccomp filter, not a sysctl, refused it.
func deniedSyscalls() []result {
	var params [120]byte   // struct io_uring_params
	const userModeOnly = 1 // UFFD_USER_MODE_ONLY: allowed even with vm.unprivileged_userfaultfd=0
	return []result{
		denied("io_uring_setup", true, unix.SYS_IO_URING_SETUP, 1, uintptr(unsafe.Pointer(&params)), 0),
		// Go processes are multithreaded: unshare(CLONE_NEWUSER) past seccomp answers EINVAL.
		denied("unshare_newuser", false, unix.SYS_UNSHARE, unix.CLONE_NEWUSER, 0, 0),
		ptraceTraceme(),
		denied("keyctl", false, unix.SYS_KEYCTL, 0xffff, 0, 0), // unknown operation: EOPNOTSUPP
		denied("bpf", false, unix.SYS_BPF, 0xffff, 0, 0),       // unknown command: EINVAL (kernel ≥ 6.5)
		denied("userfaultfd", true, unix.SYS_USERFAULTFD, userModeOnly|unix.O_CLOEXEC, 0, 0),
	}
}

func denied(check string, returnsFD bool, trap, a1, a2, a3 uintptr) result {
	r, _, errno := unix.Syscall(trap, a1, a2, a3)
	return deniedResult(check, returnsFD, r, errno)
}

func deniedResult(check string, returnsFD bool, r uintptr, errno unix.Errno) result {
	switch {
	case errno == 0:
		if returnsFD {
			unix.Close(int(r))
		}
		return judge(check, "EPERM", "succeeded", false, "the syscall is allowed")
	case errno != unix.EPERM:
		return judge(check, "EPERM", errnoName(errno), false, "the syscall reached the kernel: "+errno.Error())
	}
	return judge(check, "EPERM", "EPERM", true, "denied by the seccomp filter")
}

// ptraceTraceme runs PTRACE_TRACEME in a re-executed child (testkit/reexec): were it allowed,
// the agent would become the tracee of whatever started it.
func ptraceTraceme() result {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got, note := reexec.Traceme(ctx)
	return judge("ptrace_traceme", "EPERM", got, got == "EPERM", note)
}

func errnoName(err error) string {
	var errno unix.Errno
	if errors.As(err, &errno) {
		if name := unix.ErrnoName(errno); name != "" {
			return name
		}
	}
	return "error"
}
