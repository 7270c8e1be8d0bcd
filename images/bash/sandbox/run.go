package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// drain is how long Run keeps reading a command's output and the init's status once the init
// has died: only a process that smuggled a pipe end out of the sandbox can hold them open.
const drain = 250 * time.Millisecond

// settle is how long Run waits, once the init has died, for the output pipes to end by
// themselves (every writer is dead: only what they buffered is left to read) before it sets
// drain's deadline for a pipe end smuggled out of the sandbox.
const settle = 5 * time.Second

// pipeSize is the capacity asked of the output pipes (the kernel's default is 64 KiB): 256
// KiB keeps a user's 64 MiB of pipe buffers (fs.pipe-user-pages-soft) enough for 100
// sandboxes at once.
const pipeSize = 256 << 10

// Features is what Check found on this kernel, in this container.
type Features struct {
	Namespaces error // nil when a user namespace with pid, mount, net, IPC and UTS ones could be made
	ProcMount  error // nil when a fresh proc could be mounted in them
	Landlock   int   // the kernel's Landlock ABI, 0 without Landlock
	Root       bool  // this process is uid 0, which the kernel exempts from RLIMIT_NPROC
}

// Check tries what a sandbox needs: it starts an init in the namespaces of analyse, which
// mounts a fresh /proc and reports, and reads the Landlock ABI.
func Check(ctx context.Context) Features {
	f := Features{Landlock: landlockABI(), Root: os.Getuid() == 0}
	status, res, err := launch(ctx, initConfig{Probe: true}, "probe", 10*time.Second, 4096)
	switch {
	case err != nil:
		f.Namespaces = err
	case status == "ok":
	case strings.HasPrefix(status, "error "):
		f.ProcMount = errors.New(strings.TrimPrefix(status, "error "))
	default:
		f.ProcMount = fmt.Errorf("probe ended with %q (exit %d, %s)", status, res.ExitCode, res.Stderr)
	}
	return f
}

// Sandbox runs commands as Plan decided; make one with Plan.
type Sandbox struct {
	landlock int  // ABI level to enforce; 0 runs without Landlock (best effort only)
	keepProc bool // best effort: the container's /proc stays
}

// Plan decides how sandboxes run on what Check found. Without bestEffort every feature must
// be there (Landlock at MinLandlockABI or above, a non-root server); with it each missing one
// is a degradation, returned for the caller to log loudly. Namespaces are needed in every
// case: without them nothing would stand between a command and the container.
func Plan(f Features, bestEffort bool) (*Sandbox, []string, error) {
	if f.Namespaces != nil {
		return nil, nil, fmt.Errorf("create the sandbox's namespaces (user namespaces allowed? the container's seccomp profile must allow clone with namespace flags): %w", f.Namespaces)
	}
	s := &Sandbox{landlock: f.Landlock}
	var missing []string
	if f.ProcMount != nil {
		s.keepProc = true
		missing = append(missing, fmt.Sprintf("no fresh /proc (%v; a container needs security_opt systempaths=unconfined): commands see the container's processes", f.ProcMount))
	}
	if f.Root {
		missing = append(missing, "the server runs as root, which the kernel exempts from RLIMIT_NPROC: sandboxes have no process limit of their own (only the container's pids cgroup)")
	}
	for _, m := range []struct {
		abi  int
		what string
	}{{1, "no Landlock at all: files are limited by mounts and permissions only"},
		{4, "no Landlock TCP rules: build may connect to any port the container reaches"},
		{5, "no Landlock device ioctl rules"},
		{6, "no Landlock scoping: commands may signal and reach abstract unix sockets outside the sandbox"}} {
		if f.Landlock < m.abi {
			missing = append(missing, fmt.Sprintf("Landlock ABI %d < %d: %s", f.Landlock, m.abi, m.what))
		}
	}
	if len(missing) > 0 && !bestEffort {
		return nil, nil, fmt.Errorf("this host lacks what a sandbox needs (Landlock ABI %d or more, a fresh /proc, a non-root server): %s", MinLandlockABI, strings.Join(missing, "; "))
	}
	return s, missing, nil
}

// Run runs spec's command in a fresh sandbox and returns what it did. An error means the
// sandbox could not run it (a bad Spec, or a setup step that failed); a command that fails,
// is killed or times out is a Result.
//
// An admin command runs only with an Approval, and then exactly as build would: the approval
// is the only difference between them.
func (s *Sandbox) Run(ctx context.Context, spec Spec) (Result, error) {
	if spec.Profile == Admin && spec.Approval == "" {
		return Result{}, errors.New("profile admin: " + ReasonApproval)
	}
	spec, err := spec.normalize()
	if err != nil {
		return Result{}, err
	}
	c := initConfig{Profile: spec.Profile, Workspace: spec.Workspace, Cwd: spec.Cwd, Limits: spec.Limits,
		Landlock: s.landlock, KeepProc: s.keepProc, Hide: spec.Hide}
	if spec.Profile == Admin {
		c.Profile = Build
	}
	if c.Profile == Build {
		c.Port, _ = proxyPort(spec.ProxyAddr) // normalize checked it
		c.Proxy = "http://" + spec.ProxyAddr
	}
	status, res, err := launch(ctx, c, spec.Command, spec.Timeout, spec.Limits.Output)
	if err != nil {
		return res, err
	}
	return res, outcome(status, &res)
}

// outcome reads the init's status into res; a setup failure is an error.
func outcome(status string, res *Result) error {
	verb, arg, _ := strings.Cut(status, " ")
	n, convErr := strconv.Atoi(arg)
	switch {
	case verb == "exit" && convErr == nil:
		res.ExitCode, res.Signal = n, ""
	case verb == "signal" && convErr == nil:
		res.ExitCode, res.Signal = 128+n, unix.SignalName(syscall.Signal(n))
	case res.TimedOut || res.Signal != "":
		// the init was killed before bash ended: res says so already
	case verb == "error":
		return fmt.Errorf("sandbox setup: %s", arg)
	default:
		return fmt.Errorf("sandbox init ended without a status (exit %d): %q", res.ExitCode, res.Stderr)
	}
	return nil
}

// launch starts this binary as the init of c in new namespaces, with command, kills it after
// timeout, and returns its status line and the Result so far.
func launch(ctx context.Context, c initConfig, command string, timeout time.Duration, keep int64) (string, Result, error) {
	var res Result
	cfg, err := json.Marshal(c)
	if err != nil {
		return "", res, fmt.Errorf("encode the init's configuration: %w", err)
	}
	flags := uintptr(unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNS | unix.CLONE_NEWIPC | unix.CLONE_NEWUTS | unix.CLONE_NEWCGROUP)
	if c.Probe || c.Profile == Analyse {
		flags |= unix.CLONE_NEWNET
	}
	var pipes [3][2]*os.File // stdout, stderr, status: read and write ends
	defer func() {
		for _, p := range pipes {
			p[0].Close() // nil-safe
			p[1].Close()
		}
	}()
	for i := range pipes {
		if pipes[i][0], pipes[i][1], err = os.Pipe(); err != nil {
			return "", res, fmt.Errorf("make pipes: %w", err)
		}
		// Room for a command's output to flow without waiting for each wake-up of the reader;
		// a refusal (the user's pipe quota) only costs speed.
		if rc, err := pipes[i][0].SyscallConn(); err == nil {
			rc.Control(func(fd uintptr) { unix.FcntlInt(fd, unix.F_SETPIPE_SZ, pipeSize) })
		}
	}
	cmd := &exec.Cmd{Path: "/proc/self/exe", Args: []string{"sharness-sandbox", command},
		Stdout: pipes[0][1], Stderr: pipes[1][1], ExtraFiles: []*os.File{pipes[2][1]},
		// One P and no collector: the init allocates almost nothing, and starts faster. No stack
		// dumps into the command's output. A binary built with -race would otherwise sleep a
		// second in every exit (ThreadSanitizer's default).
		Env: []string{envInit + "=" + string(cfg), "GOMAXPROCS=1", "GOGC=off", "GOTRACEBACK=none", "GORACE=atexit_sleep_ms=0"},
		// The init is uid 1000, not root, in its user namespace: without an ambient capability
		// its execve would drop the capabilities it needs to mount. It drops them before bash.
		SysProcAttr: &syscall.SysProcAttr{Cloneflags: flags, Pdeathsig: syscall.SIGKILL, AmbientCaps: []uintptr{unix.CAP_SYS_ADMIN},
			UidMappings:                []syscall.SysProcIDMap{{ContainerID: 1000, HostID: os.Getuid(), Size: 1}},
			GidMappings:                []syscall.SysProcIDMap{{ContainerID: 1000, HostID: os.Getgid(), Size: 1}},
			GidMappingsEnableSetgroups: false}}
	start := time.Now()
	err = cmd.Start()
	for i := range pipes {
		pipes[i][1].Close() // the init holds them now
	}
	if err != nil {
		return "", res, fmt.Errorf("start the sandbox: %w", err)
	}
	stdout, stderr, status := &capture{keep: keep}, &capture{keep: keep}, &capture{keep: 4096}
	var wg sync.WaitGroup
	for i, c := range []*capture{stdout, stderr, status} {
		wg.Go(func() { c.drain(pipes[i][0]) })
	}
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	stop := context.AfterFunc(tctx, func() { cmd.Process.Kill() }) // the kernel then ends the pid namespace
	read, exited := make(chan struct{}), make(chan error, 1)
	go func() { wg.Wait(); close(read) }()
	go func() { exited <- cmd.Wait() }()
	var werr error
	var state *os.ProcessState
	select {
	case <-read:
		// Every stream is closed. When the status says how bash ended, the init has killed and
		// reaped everything else before writing it, and is exiting: the kernel's teardown of
		// the namespaces goes on without us (the goroutine reaps the init).
		if early := strings.TrimSpace(string(status.buf)); strings.HasPrefix(early, "exit ") || strings.HasPrefix(early, "signal ") {
			break
		}
		werr, state = <-exited, cmd.ProcessState
	case werr = <-exited:
		// The init is dead, and every process of its pid namespace with it: only one that
		// smuggled a pipe end out can hold a pipe open now. Read what is buffered, not more:
		// the pipes end by themselves once it is read, unless an end was smuggled out, which
		// the deadline then cuts. The buffered part is waited for apart (settle), on the
		// clock: a busy machine may not schedule the readers within drain, and a deadline set
		// at once cut up to a pipe's worth of a command's output, silently (issue 22's soak:
		// 20 calls of 1 MiB at once lost 100-250 KiB, exit 0, not marked truncated).
		state = cmd.ProcessState
		select {
		case <-read:
		case <-time.After(settle):
			for i := range pipes {
				pipes[i][0].SetReadDeadline(time.Now().Add(drain))
			}
			<-read
		}
	}
	stop()
	res.Duration = time.Since(start)
	res.Stdout, res.StdoutBytes, res.StdoutTruncated = stdout.buf, stdout.total, stdout.total > keep
	res.Stderr, res.StderrBytes, res.StderrTruncated = stderr.buf, stderr.total, stderr.total > keep
	res.TimedOut = tctx.Err() == context.DeadlineExceeded && ctx.Err() == nil
	if state != nil {
		ws := state.Sys().(syscall.WaitStatus)
		res.ExitCode = ws.ExitStatus()
		if ws.Signaled() {
			res.ExitCode, res.Signal = 128+int(ws.Signal()), unix.SignalName(ws.Signal())
		}
	}
	line := strings.TrimSpace(string(status.buf))
	if ctx.Err() != nil {
		return line, res, fmt.Errorf("sandbox: %w", ctx.Err())
	}
	var exitErr *exec.ExitError
	if werr != nil && !errors.As(werr, &exitErr) {
		return line, res, fmt.Errorf("wait for the sandbox: %w", werr)
	}
	return line, res, nil
}

// capture keeps the first keep bytes written to it and counts them all.
type capture struct {
	keep, total int64
	buf         []byte
}

func (c *capture) Write(p []byte) (int, error) {
	c.total += int64(len(p))
	if room := c.keep - int64(len(c.buf)); room > 0 {
		c.buf = append(c.buf, p[:min(room, int64(len(p)))]...)
	}
	return len(p), nil
}

// drain reads r to its end, or its read deadline.
func (c *capture) drain(r io.Reader) {
	buf := make([]byte, 64<<10) // a pipe's capacity
	for {
		n, err := r.Read(buf)
		c.Write(buf[:n])
		if err != nil {
			return
		}
	}
}
