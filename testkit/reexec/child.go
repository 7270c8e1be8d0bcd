package reexec

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// traceme runs on the main thread (locked in init), so that a traced thread would be the thread
// group leader; with every signal blocked, a stop cannot leave it hanging.
func traceme() {
	all := unix.Sigset_t{Val: [16]uint64{^uint64(0)}}
	unix.PthreadSigmask(unix.SIG_BLOCK, &all, nil)
	_, _, errno := unix.RawSyscall(unix.SYS_PTRACE, unix.PTRACE_TRACEME, 0, 0)
	fmt.Printf("step=ptrace errno=%d\n", int(errno))
}

// execveat asks for an executable memfd first (MFD_EXEC), then for a sealed one, which a policy
// requiring MFD_NOEXEC_SEAL lets through; execveat itself must then be refused.
func execveat() {
	how := "exec"
	fd, err := unix.MemfdCreate("sharness-reexec", unix.MFD_CLOEXEC|unix.MFD_EXEC)
	if err != nil {
		how = "noexec-seal"
		fd, err = unix.MemfdCreate("sharness-reexec", unix.MFD_CLOEXEC|unix.MFD_NOEXEC_SEAL)
	}
	if err != nil {
		fmt.Printf("memfd=%s step=memfd_create errno=%d\n", how, int(err.(unix.Errno)))
		return
	}
	if err := copySelf(os.NewFile(uintptr(fd), "memfd")); err != nil {
		fmt.Printf("memfd=%s step=write errno=%d\n", how, int(unix.EIO))
		return
	}
	empty, argv, envv := cstring(""), []*byte{cstring("sharness-reexec"), nil}, []*byte{cstring(Env + "=executed"), nil}
	_, _, errno := unix.Syscall6(unix.SYS_EXECVEAT, uintptr(fd), uintptr(unsafe.Pointer(empty)),
		uintptr(unsafe.Pointer(&argv[0])), uintptr(unsafe.Pointer(&envv[0])), unix.AT_EMPTY_PATH, 0)
	runtime.KeepAlive(argv)
	runtime.KeepAlive(envv)
	fmt.Printf("memfd=%s step=execveat errno=%d\n", how, int(errno))
}

func cstring(s string) *byte {
	p, _ := unix.BytePtrFromString(s) // constant strings without NUL
	return p
}

func copySelf(w io.Writer) error {
	f, err := os.Open("/proc/self/exe")
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(w, f)
	return err
}

// nap is how long a process of bomb sleeps; it is killed long before.
var nap = unix.Timespec{Sec: 3600}

// bomb forks with the raw clone system call until the kernel refuses or max processes exist,
// then kills and reaps them all. The children touch nothing of the Go runtime: they only sleep.
func bomb(max int) (made int, errno unix.Errno) {
	pids := make([]int, 0, max)
	defer func() {
		for _, p := range pids {
			unix.Kill(p, unix.SIGKILL)
		}
		for _, p := range pids {
			unix.Wait4(p, nil, 0, nil)
		}
	}()
	for len(pids) < max {
		pid, _, e := unix.RawSyscall6(unix.SYS_CLONE, uintptr(unix.SIGCHLD), 0, 0, 0, 0, 0)
		if e != 0 {
			return len(pids), e
		}
		if pid == 0 {
			for {
				unix.RawSyscall(unix.SYS_NANOSLEEP, uintptr(unsafe.Pointer(&nap)), 0, 0)
			}
		}
		pids = append(pids, int(pid))
	}
	return len(pids), 0
}

// hog maps and touches memory 16 MiB at a time up to maxMiB, printing "mib=N" after each step,
// and asks to be the OOM killer's first choice.
func hog(maxMiB int) error {
	os.WriteFile("/proc/self/oom_score_adj", []byte("1000"), 0)
	const chunk = 16 << 20
	for mib := chunk >> 20; mib <= maxMiB; mib += chunk >> 20 {
		b, err := unix.Mmap(-1, 0, chunk, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		if err != nil {
			return fmt.Errorf("mmap after %d MiB: %w", mib, err)
		}
		for i := 0; i < chunk; i += 4096 {
			b[i] = 1
		}
		fmt.Printf("mib=%d\n", mib)
	}
	return nil
}
