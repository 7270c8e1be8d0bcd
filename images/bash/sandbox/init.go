package sandbox

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
	"kernel.org/pub/linux/libs/security/libcap/psx"
)

// envInit selects the init mode of a re-executed binary; its value is the initConfig.
const envInit = "SHARNESS_SANDBOX_INIT"

// statusFD is where the init reports to Run, one line: "ok" (probe), "exit N", "signal N" or
// "error <what failed>". It is close-on-exec before bash starts: only the init writes it.
const statusFD = 3

// initConfig is what Run tells the init; the command is its first argument.
type initConfig struct {
	Probe     bool     `json:"probe,omitempty"` // mount /proc and report, nothing else
	Profile   Profile  `json:"profile"`
	Workspace string   `json:"workspace"`
	Cwd       string   `json:"cwd"`
	Proxy     string   `json:"proxy,omitempty"` // http://host:port, build only
	Port      uint16   `json:"port,omitempty"`
	Limits    Limits   `json:"limits"`
	Landlock  int      `json:"landlock"`            // ABI level to enforce; 0 only in best effort
	KeepProc  bool     `json:"keep_proc,omitempty"` // best effort: no fresh /proc
	Hide      []string `json:"hide,omitempty"`      // the server's folders, covered by an empty tmpfs
}

// Init runs the sandbox's init and exits when this process was started as one (by Run or
// Check); otherwise it returns at once. Call it first thing in main, and in TestMain.
//
// The package's init function calls it too, so that the init usually runs before main:
// Go initialises packages in the order of their import paths, dependencies first (Go 1.21), so
// the packages that sort after this one (sharness-bash's policy parser, with its regular
// expressions, and secret filter) are not initialised in a sandbox at all. Every sandbox runs
// this binary afresh, and their initialisation was a third of its start.
func Init() {
	raw, ok := os.LookupEnv(envInit)
	if !ok {
		return
	}
	// One thread sets no_new_privs and the seccomp filter and forks bash: keep it.
	runtime.LockOSThread()
	status := os.Stderr // when the variable leaked into a process that is no init
	var st unix.Stat_t
	if unix.Fstat(statusFD, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFIFO {
		status = os.NewFile(statusFD, "sandbox-status")
	}
	var c initConfig
	msg, code := "error bad init configuration", 125
	switch err := json.Unmarshal([]byte(raw), &c); {
	case os.Getpid() != 1:
		// Never outside a fresh pid namespace: as root on a host, mount would change the host.
		msg = "error the sandbox init is not pid 1 of a new pid namespace"
	case err == nil && len(os.Args) == 2:
		msg, code = c.run(os.Args[1])
	}
	status.WriteString(msg + "\n")
	status.Close() // Run has its answer now, before this exit's teardown
	os.Exit(code)  // as pid 1: the kernel kills whatever is left in the sandbox
}

func init() { Init() }

// run sets the sandbox up, runs bash and reaps until bash is gone.
func (c initConfig) run(command string) (string, int) {
	if err := c.mount(); err != nil {
		return "error " + err.Error(), 125
	}
	if c.Probe {
		return "ok", 0
	}
	if err := c.confine(); err != nil {
		return "error " + err.Error(), 125
	}
	env := []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/tmp", "LANG=C.UTF-8", "TERM=dumb", "USER=sandbox"}
	if c.Profile == Build {
		env = append(env, "HTTPS_PROXY="+c.Proxy, "HTTP_PROXY="+c.Proxy, "https_proxy="+c.Proxy, "http_proxy="+c.Proxy)
	}
	syscall.CloseOnExec(statusFD)
	// The process limit counts every task of the sandbox's uid, the init's threads too, but
	// binds only who sets it: bash sets it on itself before the command, and the init, which
	// may need a thread while a fork bomb runs, keeps its own. On the command's line, so that
	// the command's line numbers stay its own.
	command = fmt.Sprintf("ulimit -u %d || exit 125; %s", c.Limits.PIDs, command)
	pid, err := syscall.ForkExec("/bin/bash", []string{"bash", "-c", command}, &syscall.ProcAttr{
		Env: env, Files: []uintptr{0, 1, 2}, Sys: &syscall.SysProcAttr{Setpgid: true}})
	if err != nil {
		return "error start /bin/bash: " + err.Error(), 127
	}
	// The init writes nothing there: without its copies, the streams end when bash's do.
	unix.Close(1)
	unix.Close(2)
	// From inside its pid namespace, only signals with a handler reach pid 1, and Go's default
	// handler ends a program on these: catch and drop them. Go ignores the others it handles.
	// This runs while bash starts, off the critical path; a signal sent before it is in place
	// ends the sandbox, as bash's own exit would.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGILL,
		syscall.SIGTRAP, syscall.SIGABRT, syscall.SIGBUS, syscall.SIGFPE, syscall.SIGSEGV, syscall.SIGTERM,
		syscall.SIGSTKFLT, syscall.SIGSYS)
	var ws syscall.WaitStatus
	for {
		p, err := syscall.Wait4(-1, &ws, 0, nil)
		if err == nil && p == pid {
			break
		}
		if err != nil && err != syscall.EINTR {
			return "error wait: " + err.Error(), 125
		}
	}
	// bash is done: so is the sandbox. Everything it left behind dies and is reaped before the
	// status goes out, so that no command runs on, in the workspace, once Run has returned.
	unix.Kill(-1, unix.SIGKILL)
	for {
		if _, err := syscall.Wait4(-1, nil, 0, nil); err != nil && err != syscall.EINTR {
			break // ECHILD: none left
		}
	}
	if ws.Signaled() {
		return fmt.Sprintf("signal %d", ws.Signal()), 128 + int(ws.Signal())
	}
	return fmt.Sprintf("exit %d", ws.ExitStatus()), ws.ExitStatus()
}

// mount makes every mount private, mounts a fresh /proc, binds the workspace (with what is
// mounted below it) nosuid, nodev, noexec, and read-only for analyse, puts tmpfs on /tmp
// and, read-only and empty, on /run (which holds the identity socket) and on each folder to
// hide (the server's approval gate), and names the host.
func (c initConfig) mount() error {
	const hard = unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make / private: %w", err)
	}
	if !c.KeepProc {
		if err := unix.Mount("proc", "/proc", "proc", hard, ""); err != nil {
			return fmt.Errorf("mount proc on /proc: %w", err)
		}
	}
	if c.Probe {
		return nil
	}
	ws := c.Workspace
	if err := unix.Mount(ws, ws, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind the workspace %s: %w", ws, err)
	}
	points, err := mountsUnder(ws)
	if err != nil {
		return err
	}
	for _, p := range points {
		flags := uintptr(unix.MS_BIND | unix.MS_REMOUNT | hard)
		var st unix.Statfs_t
		if c.Profile == Analyse || unix.Statfs(p, &st) == nil && st.Flags&unix.ST_RDONLY != 0 {
			flags |= unix.MS_RDONLY // a read-only mount below a writable workspace stays so
		}
		if err := unix.Mount("", p, "", flags, ""); err != nil {
			return fmt.Errorf("remount %s: %w", p, err)
		}
	}
	tmp := "mode=1777,size=" + strconv.FormatInt(c.Limits.TmpSize, 10)
	if err := unix.Mount("tmpfs", "/tmp", "tmpfs", hard, tmp); err != nil {
		return fmt.Errorf("mount tmpfs on /tmp: %w", err)
	}
	if _, err := os.Stat("/run"); err == nil {
		if err := unix.Mount("tmpfs", "/run", "tmpfs", hard|unix.MS_RDONLY, "mode=755,size=4096"); err != nil {
			return fmt.Errorf("mount tmpfs on /run: %w", err)
		}
	}
	for _, h := range c.Hide {
		if _, err := os.Stat(h); errors.Is(err, fs.ErrNotExist) {
			continue // nothing there to see
		}
		if err := unix.Mount("tmpfs", h, "tmpfs", hard|unix.MS_RDONLY, "mode=0,size=4096"); err != nil {
			return fmt.Errorf("hide %s: %w", h, err)
		}
	}
	// The UTS namespace is the sandbox's own whatever its name: where the container's seccomp
	// profile refuses sethostname (Docker's grants it only with CAP_SYS_ADMIN), the sandbox
	// keeps the container's hostname, which is no secret.
	unix.Sethostname([]byte("sandbox"))
	return nil
}

// mountsUnder lists ws and the mount points below it, once each, from this mount namespace.
func mountsUnder(ws string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("read mounts: %w", err)
	}
	defer f.Close()
	points := []string{ws}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		p, ok := mountPoint(sc.Text())
		if ok && strings.HasPrefix(p, ws+"/") && !slices.Contains(points, p) {
			points = append(points, p)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read mounts: %w", err)
	}
	return points, nil
}

// mountPoint is the fifth field of a /proc/self/mountinfo line, with the kernel's octal
// escapes (\040 for a space, \011, \012, \134) decoded.
func mountPoint(line string) (string, bool) {
	f := strings.Fields(line)
	if len(f) < 5 {
		return "", false
	}
	s := f[4]
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String(), true
}

// confine enters the working folder (opened beneath the workspace, so a symbolic link swapped
// in since the caller checked it cannot lead out), sets the limits, no_new_privs, Landlock
// and the seccomp filter. The init runs with them too: it only waits from here on.
func (c initConfig) confine() error {
	wsfd, err := unix.Open(c.Workspace, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open the workspace: %w", err)
	}
	dir := c.Cwd
	if dir == "" {
		dir = "."
	}
	fd, err := unix.Openat2(wsfd, dir, &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS})
	unix.Close(wsfd)
	if err != nil {
		return fmt.Errorf("open the working folder %q beneath the workspace: %w", c.Cwd, err)
	}
	err = unix.Fchdir(fd)
	unix.Close(fd)
	if err != nil {
		return fmt.Errorf("enter the working folder: %w", err)
	}
	l := c.Limits
	for _, r := range []struct {
		res int
		max int64
	}{{unix.RLIMIT_AS, l.AddressSpace}, {unix.RLIMIT_CPU, l.CPUSeconds},
		{unix.RLIMIT_FSIZE, l.FileSize}, {unix.RLIMIT_NOFILE, 1024}, {unix.RLIMIT_CORE, 0}} {
		// syscall.Setrlimit, not unix's: the syscall package must know of RLIMIT_NOFILE, or
		// ForkExec restores the soft limit Go found at start-up.
		if err := syscall.Setrlimit(r.res, &syscall.Rlimit{Cur: uint64(r.max), Max: uint64(r.max)}); err != nil {
			return fmt.Errorf("set rlimit %d: %w", r.res, err)
		}
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("set no_new_privs: %w", err)
	}
	// Not dumpable: the command (bash's execve makes it dumpable again) cannot read the
	// init's memory or environment through /proc/1.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("set not dumpable: %w", err)
	}
	if c.Landlock > 0 {
		cfg, rules := landlockRules(c.Landlock, c.Profile, c.Workspace, c.Port)
		if err := cfg.Restrict(rules...); err != nil {
			return fmt.Errorf("landlock: %w", err)
		}
	}
	if err := loadFilter(); err != nil {
		return err
	}
	return dropCapabilities()
}

// dropCapabilities empties every capability set (ambient follows) on every thread, so that
// neither bash nor the init itself holds any.
func dropCapabilities() error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var none [2]unix.CapUserData
	if _, _, e := psx.Syscall3(unix.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&none[0])), 0); e != 0 {
		return fmt.Errorf("drop capabilities: %w", e)
	}
	return nil
}
