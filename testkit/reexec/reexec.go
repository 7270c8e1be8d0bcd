// Package reexec makes the attempts that could stop, replace or exhaust a process, in a
// re-executed copy of the current binary where that is needed (the pattern of moby's
// pkg/reexec and go-landlock's tests): ptrace(PTRACE_TRACEME), exec from a memfd or from a
// noexec tmpfs, a fork bomb, memory and tmpfs exhaustion. Each attempt returns (got, note) for
// a sidedoor.Door. A binary that uses it calls
// Init first thing in main.
//
// It guarantees nothing about the limits it hits; it reports what the kernel answered. A fork
// bomb or a memory hog disturbs the whole container while it runs (threads cannot start, the
// OOM killer may pick another process), so run these attempts last and one at a time.
package reexec

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/sharness-ai/sharness/testkit/sidedoor"
)

// Env names the child mode a re-executed copy runs.
const Env = "SHARNESS_REEXEC"

func init() {
	if os.Getenv(Env) == "ptrace" {
		runtime.LockOSThread() // keep main on the thread group leader: see traceme
	}
}

// Init runs the child mode named by Env, if any, and exits; otherwise it returns.
func Init() {
	mode := os.Getenv(Env)
	if mode == "" {
		return
	}
	switch mode {
	case "alive", "executed":
		fmt.Println(mode)
	case "ptrace":
		traceme()
	case "execveat":
		execveat()
	case "forkbomb":
		n, _ := strconv.Atoi(os.Getenv(Env + "_MAX"))
		made, errno := bomb(n)
		fmt.Printf("made=%d errno=%d\n", made, int(errno))
	case "memhog":
		if err := hog(2048); err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
	default:
		fmt.Fprintf(os.Stderr, "reexec: unknown child mode %q\n", mode)
		os.Exit(2)
	}
	os.Exit(0)
}

// run starts this binary in child mode and returns what it printed.
func run(ctx context.Context, mode string, attr *syscall.SysProcAttr, env ...string) (string, *os.ProcessState, error) {
	cmd := exec.CommandContext(ctx, "/proc/self/exe")
	cmd.Env = append([]string{Env + "=" + mode, "GOMAXPROCS=1", "GOGC=off"}, env...)
	cmd.SysProcAttr = attr
	out, err := cmd.Output()
	return string(out), cmd.ProcessState, err
}

// Traceme calls ptrace(PTRACE_TRACEME) in a child: allowed, it would make the child the tracee
// of its parent, the first step to tracing, hence reading and steering, other processes.
func Traceme(ctx context.Context) (got, note string) { return childErrno(run(ctx, "ptrace", nil)) }

// MemfdExecveat fills a memfd with this binary in a child and runs it with execveat(fd, "",
// AT_EMPTY_PATH): code that never touched a file system.
func MemfdExecveat(ctx context.Context) (got, note string) {
	return childErrno(run(ctx, "execveat", nil))
}

// childErrno reads a child's "errno=N step=S", or "executed" if the new program ran.
func childErrno(out string, _ *os.ProcessState, err error) (string, string) {
	f := sidedoor.Fields(out)
	n, convErr := strconv.Atoi(f["errno"])
	switch {
	case strings.TrimSpace(out) == "executed":
		return "executed", "the child ran a new program"
	case convErr != nil:
		return "child failed", fmt.Sprintf("%v, output %q", err, out)
	case n == 0:
		return "succeeded", f["step"]
	}
	return sidedoor.Kind(unix.Errno(n)), strings.TrimSpace(out)
}

// SealedMemfdExec makes a memfd the way a policy requiring MFD_NOEXEC_SEAL allows, fills it
// with this binary and runs it through /proc/self/fd (fexecve): the seal must forbid it.
func SealedMemfdExec(ctx context.Context) (got, note string) {
	fd, err := unix.MemfdCreate("sharness-reexec", unix.MFD_CLOEXEC|unix.MFD_NOEXEC_SEAL)
	if err != nil {
		return "memfd_create " + sidedoor.Kind(err), ""
	}
	f := os.NewFile(uintptr(fd), "memfd")
	defer f.Close()
	if err := copySelf(f); err != nil {
		return "write " + sidedoor.Kind(err), ""
	}
	return execute(ctx, "/proc/self/fd/3", f)
}

// TmpExec copies this binary into dir and runs it: a noexec mount must forbid it.
func TmpExec(ctx context.Context, dir string) (got, note string) {
	f, err := os.CreateTemp(dir, "sharness-reexec-")
	if err != nil {
		return "create " + sidedoor.Kind(err), dir
	}
	defer os.Remove(f.Name())
	err = copySelf(f)
	if err == nil {
		err = f.Chmod(0o755)
	}
	if cerr := f.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return "write " + sidedoor.Kind(err), f.Name()
	}
	return execute(ctx, f.Name(), nil)
}

// execute starts path (this binary, in mode "executed") and names the outcome: the Kind of the
// exec's error, or "executed" when the program ran.
func execute(ctx context.Context, path string, extra *os.File) (string, string) {
	cmd := exec.CommandContext(ctx, path)
	cmd.Env = []string{Env + "=executed"}
	if extra != nil {
		cmd.ExtraFiles = []*os.File{extra}
	}
	if err := cmd.Start(); err != nil {
		return sidedoor.Kind(err), path
	}
	cmd.Wait()
	return "executed", path
}

// ForkBomb forks in a child, in a process group of its own, until the kernel refuses; got is
// the errno (EAGAIN from a pids limit), or "no limit" or "stopped at or above max" when the
// child made max processes. The group is killed afterwards.
func ForkBomb(ctx context.Context, max int) (got, note string) {
	// Orphans of the bomb come back to this process, not to the container's PID 1 (which may
	// never reap them and so hold pids): kill its whole group, then reap every member.
	unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
	out, st, err := run(ctx, "forkbomb", &syscall.SysProcAttr{Setpgid: true}, Env+"_MAX="+strconv.Itoa(4*max))
	if st != nil {
		syscall.Kill(-st.Pid(), syscall.SIGKILL)
		for {
			if _, err := unix.Wait4(-st.Pid(), nil, 0, nil); err != nil {
				break // ECHILD: the group is gone
			}
		}
	}
	f := sidedoor.Fields(out)
	made, convErr := strconv.Atoi(f["made"])
	n, _ := strconv.Atoi(f["errno"])
	note = fmt.Sprintf("made %d processes", made)
	switch {
	case convErr != nil:
		return "child failed", fmt.Sprintf("%v, output %q", err, out)
	case n == 0:
		return "no limit", note
	case made >= max:
		return "stopped at or above " + strconv.Itoa(max), note
	}
	return sidedoor.Kind(unix.Errno(n)), note
}

// MemoryExhaustion allocates in a child until something stops it: got is the signal that
// killed it (SIGKILL from a memory limit), or how it exited.
func MemoryExhaustion(ctx context.Context) (got, note string) {
	out, st, err := run(ctx, "memhog", nil)
	note = "allocated MiB " + sidedoor.Fields(out)["mib"]
	if ctx.Err() != nil {
		return "timeout", note
	}
	if st == nil {
		return "child failed", sidedoor.Kind(err)
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return unix.SignalName(ws.Signal()), note
	}
	return "exited " + strconv.Itoa(st.ExitCode()), note
}

// Alive starts a child that only answers "alive": after the limits were hit, the process must
// still be able to start one.
func Alive(ctx context.Context) (got, note string) {
	out, _, err := run(ctx, "alive", nil)
	return strings.TrimSpace(out), sidedoor.Kind(err)
}

// Fill writes to a file in dir until the file system is full, up to maxMiB, then removes it:
// got is the error's Kind (ENOSPC from a sized tmpfs), or "no limit".
func Fill(ctx context.Context, dir string, maxMiB int) (got, note string) {
	f, err := os.CreateTemp(dir, "sharness-fill-")
	if err != nil {
		return sidedoor.Kind(err), "create"
	}
	defer os.Remove(f.Name())
	defer f.Close()
	chunk := make([]byte, 1<<20)
	for mib := 0; mib < maxMiB && ctx.Err() == nil; mib++ {
		if _, err := f.Write(chunk); err != nil {
			return sidedoor.Kind(err), fmt.Sprintf("%d MiB written", mib)
		}
	}
	return "no limit", fmt.Sprintf("%d MiB written, or out of time", maxMiB)
}
