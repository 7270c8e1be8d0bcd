// Package hygiene is the memory hygiene of a process that holds keys (kms): it makes the process
// undumpable, forbids core files, locks its memory where the limits allow, and maps a page for a
// key where the kernel keeps it even from itself (memfd_secret). It reports what it got rather
// than stopping, so the report can travel in the kms bundle and be shown by the CLI.
//
// What it does not guarantee: anything against root or the kernel beyond what memfd_secret
// gives; that copies of key material the Go runtime or its crypto make elsewhere (the heap,
// registers, stacks) are locked or scrubbed. A degraded measure is reported, never silent.
package hygiene

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Report maps each measure to "ok" or "degraded: <why>".
type Report map[string]string

// Harden applies the process-wide memory hygiene the kernel allows and says what it got. It is
// meant for a binary's start, before it holds a key; tests run it in a child process (it makes
// the process undumpable and may lock all its memory).
//
//   - not_dumpable: prctl(PR_SET_DUMPABLE, 0), so no ptrace by the same user and no core file.
//   - no_core: RLIMIT_CORE 0, in case something makes the process dumpable again.
//   - mlockall: MCL_CURRENT|MCL_FUTURE, so nothing is swapped out; only when the memlock limit is
//     unlimited or the process holds CAP_IPC_LOCK, because under a finite limit every later
//     mapping beyond it fails and the Go runtime dies of it.
func Harden() Report {
	h := Report{}
	h["not_dumpable"] = status(unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0))
	h["no_core"] = status(unix.Setrlimit(unix.RLIMIT_CORE, &unix.Rlimit{}))
	var lim unix.Rlimit
	switch err := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &lim); {
	case err != nil:
		h["mlockall"] = status(err)
	case lim.Cur != unix.RLIM_INFINITY && !hasIPCLock():
		h["mlockall"] = fmt.Sprintf("degraded: memlock limit %d bytes and no CAP_IPC_LOCK (the shipped policy grants kms CAP_IPC_LOCK and the runtime shim makes it ambient: a kms without it runs under another policy or runtime)", lim.Cur)
	default:
		h["mlockall"] = status(unix.Mlockall(unix.MCL_CURRENT | unix.MCL_FUTURE))
	}
	return h
}

// hasIPCLock reads CAP_IPC_LOCK (bit 14) from the effective set in /proc/self/status.
func hasIPCLock() bool {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err == nil && caps&(1<<unix.CAP_IPC_LOCK) != 0
		}
	}
	return false
}

// SecretPage maps at least n bytes (whole pages, one at least) for a key or an opened secret where the kernel keeps it even from itself:
// memfd_secret (Linux 5.14+; some kernels need secretmem.enable=1; seccomp may refuse it
// with EPERM). Failing that, a private anonymous page, locked, left out of core dumps and wiped
// in a forked child. The status says which one it got.
func SecretPage(n int) ([]byte, string, error) {
	page := os.Getpagesize()
	size := max(page, (n+page-1)/page*page)
	fd, _, errno := unix.Syscall(unix.SYS_MEMFD_SECRET, unix.O_CLOEXEC, 0, 0)
	if errno == 0 {
		mem, err := mapSecret(int(fd), size)
		if err == nil {
			return mem, "ok", nil
		}
		errno = errorsErrno(err)
	}
	why := "degraded: " + errnoText(errno) + "; the key is in locked anonymous memory"
	mem, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, why, fmt.Errorf("map key memory: %w", err)
	}
	var lost []string
	for name, err := range map[string]error{
		"mlock":      unix.Mlock(mem),
		"dontdump":   unix.Madvise(mem, unix.MADV_DONTDUMP),
		"wipeonfork": unix.Madvise(mem, unix.MADV_WIPEONFORK),
	} {
		if err != nil {
			lost = append(lost, name+" "+errnoText(errorsErrno(err)))
		}
	}
	if len(lost) > 0 {
		why += ", without " + strings.Join(lost, ", ")
	}
	return mem, why, nil
}

func mapSecret(fd, size int) ([]byte, error) {
	defer unix.Close(fd)
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		return nil, err
	}
	return unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
}

// Free scrubs and unmaps what SecretPage mapped.
func Free(mem []byte) {
	clear(mem)
	_ = unix.Munmap(mem)
}

func status(err error) string {
	if err == nil {
		return "ok"
	}
	return "degraded: " + errnoText(errorsErrno(err))
}

func errorsErrno(err error) unix.Errno {
	var e unix.Errno
	if errors.As(err, &e) {
		return e
	}
	return unix.EINVAL
}

// errnoText names an errno the way the man pages do (ENOSYS: function not implemented).
func errnoText(e unix.Errno) string {
	if name := unix.ErrnoName(e); name != "" {
		return name + ": " + e.Error()
	}
	return e.Error()
}
