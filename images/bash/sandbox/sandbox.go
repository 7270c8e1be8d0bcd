// Package sandbox runs one shell command in a fresh, throwaway sandbox, under one of bash's
// profiles. The server re-executes its own binary (/proc/self/exe) as the sandbox's init
// (Init), in new user, pid, mount, IPC, UTS and cgroup namespaces (and a new, empty network
// namespace for analyse), as uid 1000 mapped to the server's own uid. The init mounts a fresh
// /proc, tmpfs on /tmp and an empty read-only tmpfs on /run, binds the workspace and what is
// mounted below it nosuid, nodev, noexec and read-only for analyse (a read-only mount below
// stays read-only in build), sets rlimits, no_new_privs, Landlock (files, TCP ports, signal
// and abstract-socket scopes; landlock.go) and a seccomp filter (filter.go), drops its
// capabilities, then starts /bin/bash -c as a child, reaps every process and reports bash's
// status. bash is not root in its namespace: its execve leaves it without capabilities. The
// server's own folders (its approval gate's) are covered by an empty read-only tmpfs (Spec.Hide).
//
// admin is build's rights plus a person's approval of each command: Decide answers Ask,
// AdminRequest gives the exact bytes to put to the approval gate (internal/gate, which this
// package does not import: every sandbox starts the binary afresh, and its init should stay
// small), and Run refuses an admin Spec without the approval's id, then runs it as build.
//
// When bash ends, the init kills and reaps whatever is left, then reports: Run returns once
// the output streams are closed and the report is in, and the kernel's teardown of the
// namespaces finishes in the background. A timeout or a cancelled context kills the init, and
// with it the whole pid namespace.
//
// What it does not guarantee:
//   - Containment is the kernel's: a bug in namespaces, Landlock or seccomp is a way out. The
//     sandbox adds to the container's confinement (its seccomp profile, which must allow the
//     namespace syscalls and keeps memfd execution closed, its dropped capabilities, its cgroup
//     limits); it does not replace it.
//   - build shares the container's network namespace. Landlock lets TCP connect only to the
//     proxy's port and bind nowhere; before Landlock ABI 10 UDP is not restricted (DNS and any
//     UDP port the container reaches); Landlock does not see MPTCP or SCTP: the seccomp filter
//     refuses those protocols instead.
//   - The workspace is shared by every sandbox of a server: a build command can leave files
//     that a later command reads, and two commands running at once can see each other's files
//     (and, before Landlock ABI 9, connect to each other's unix sockets there).
//   - Limits are per process (RLIMIT_AS, RLIMIT_CPU, RLIMIT_FSIZE) or per sandbox: RLIMIT_NPROC,
//     which bash sets on itself (ulimit -u) before the command, counts the tasks, threads
//     included, of the sandbox's uid in its own user namespace, the init's few threads too.
//     The kernel exempts uid 0 from RLIMIT_NPROC: a server running as root has no per-sandbox
//     process limit, which Plan refuses without best effort. Memory and CPU as a whole are the
//     container cgroup's to bound.
//   - Output beyond Limits.Output is counted and dropped; what is kept is cut at a byte, which
//     can split a UTF-8 sequence or a secret (a secret filter then sees only part of it).
//   - A process that sends its pipe ends out of the sandbox (over a unix socket in a shared
//     workspace) can keep a stream open; Run stops reading shortly after the init has died.
//   - The hostname is "sandbox" only where the container's seccomp profile allows sethostname.
//   - Pdeathsig, which kills an init whose server dies, fires when the server's thread that
//     started it ends; Go ends threads only for goroutines that exit while locked to one.
//   - Best-effort mode (Plan) runs with what the kernel has and says so; it is not a sandbox
//     one may rely on.
package sandbox

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Profile names what a command may do.
type Profile string

// The profiles. admin has build's rights, and each of its commands runs only once a person has
// approved exactly that command (the caller asks: AdminRequest, Spec.Approval).
const (
	Analyse Profile = "analyse" // no network at all; workspace read-only
	Build   Profile = "build"   // the proxy only; workspace read-write
	Admin   Profile = "admin"   // build's rights, and a person's approval of each command
)

// Profiles lists every profile a caller may name, in order.
var Profiles = []Profile{Analyse, Build, Admin}

// Reasons a profile is refused, for Decide.
const (
	ReasonApproval = "approval_required: the admin profile runs a command only once a person has approved exactly that command"
	reasonNoProxy  = "build and admin need the proxy: the policy has no edge from bash to a component of kind net"
)

// Decision is a verdict on a profile. Its zero value refuses.
type Decision struct {
	Allow  bool
	Ask    bool   // admin under a policy that allows it: Allow stays false until a person approves
	Reason string // why not, when Allow is false
}

// Decide says whether p may run under the policy's allowed profile names; proxy is net's
// address ("" when bash has no edge to net, which build and admin need). admin, when the
// policy allows it, is a refusal with Ask set: a caller that looks at Allow alone refuses it.
func Decide(p Profile, allowed []string, proxy string) Decision {
	switch {
	case p != Analyse && p != Build && p != Admin:
		return Decision{Reason: fmt.Sprintf("unknown profile %q", p)}
	case !slices.Contains(allowed, string(p)):
		return Decision{Reason: fmt.Sprintf("profile %q is not allowed by the policy (business.bash.profiles: %s)", p, strings.Join(allowed, ", "))}
	case p != Analyse && proxy == "":
		return Decision{Reason: reasonNoProxy}
	case p == Admin:
		return Decision{Ask: true, Reason: ReasonApproval}
	}
	return Decision{Allow: true}
}

// Limits bound one sandbox; a zero field takes its default (DefaultLimits).
type Limits struct {
	PIDs         int64 // processes (RLIMIT_NPROC, counted in the sandbox's user namespace)
	AddressSpace int64 // bytes per process (RLIMIT_AS)
	CPUSeconds   int64 // per process (RLIMIT_CPU)
	FileSize     int64 // bytes per file written (RLIMIT_FSIZE)
	TmpSize      int64 // bytes of the /tmp tmpfs
	Output       int64 // bytes kept of each of stdout and stderr
}

// DefaultLimits are the limits of a Spec that sets none.
var DefaultLimits = Limits{PIDs: 256, AddressSpace: 4 << 30, CPUSeconds: 300, FileSize: 512 << 20, TmpSize: 256 << 20, Output: 1 << 20}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits
	return Limits{cmp.Or(l.PIDs, d.PIDs), cmp.Or(l.AddressSpace, d.AddressSpace), cmp.Or(l.CPUSeconds, d.CPUSeconds),
		cmp.Or(l.FileSize, d.FileSize), cmp.Or(l.TmpSize, d.TmpSize), cmp.Or(l.Output, d.Output)}
}

// Defaults of a Spec.
const (
	DefaultWorkspace = "/workspace"
	DefaultTimeout   = 60 * time.Second
	MaxCommand       = 64 << 10 // bytes; an argv string may hold 128 KiB
)

// Spec is one command to run.
type Spec struct {
	Command   string
	Profile   Profile
	Timeout   time.Duration // DefaultTimeout when zero
	Cwd       string        // relative to Workspace, already checked by the caller; "" is its root
	Workspace string        // DefaultWorkspace when empty
	ProxyAddr string        // host:port of the proxy, for build and admin
	Limits    Limits
	// Hide are the server's own folders a command must not see, such as its approval gate's:
	// each is covered by an empty, read-only tmpfs in the sandbox (one that does not exist is
	// skipped). Landlock refuses them anyway; this holds in best-effort mode without it too.
	Hide []string
	// Approval is, for admin, the id of the person's approval of exactly this Spec (the
	// canonical bytes of AdminRequest); Run refuses admin without one. Ignored otherwise.
	Approval string
}

// Result is what a command did.
type Result struct {
	ExitCode                         int    // bash's exit status; 128+n when a signal n ended it
	Signal                           string // the signal that ended bash or the sandbox, e.g. "SIGKILL"
	Stdout, Stderr                   []byte // at most Limits.Output bytes each
	StdoutBytes, StderrBytes         int64  // how many bytes the command wrote to each
	StdoutTruncated, StderrTruncated bool
	TimedOut                         bool
	Duration                         time.Duration
}

// replaced are the folders the sandbox mounts over: a workspace there would be hidden.
var replaced = []string{"/tmp", "/run", "/proc"}

// normalize fills in defaults and refuses a Spec the sandbox cannot run as asked.
func (s Spec) normalize() (Spec, error) {
	s.Workspace = cmp.Or(s.Workspace, DefaultWorkspace)
	s.Timeout = cmp.Or(s.Timeout, DefaultTimeout)
	s.Limits = s.Limits.withDefaults()
	l := s.Limits
	switch {
	case s.Profile != Analyse && s.Profile != Build && s.Profile != Admin:
		return s, fmt.Errorf("unknown profile %q", s.Profile)
	case s.Command == "" || len(s.Command) > MaxCommand || strings.IndexByte(s.Command, 0) >= 0:
		return s, fmt.Errorf("command: empty, longer than %d bytes, or holding a NUL byte", MaxCommand)
	case s.Timeout < 0:
		return s, errors.New("timeout: negative")
	case min(l.PIDs, l.AddressSpace, l.CPUSeconds, l.FileSize, l.TmpSize, l.Output) < 0:
		return s, errors.New("limits: negative")
	case !path.IsAbs(s.Workspace) || path.Clean(s.Workspace) != s.Workspace || s.Workspace == "/":
		return s, fmt.Errorf("workspace %q: not an absolute, clean path below /", s.Workspace)
	case slices.ContainsFunc(replaced, func(r string) bool { return s.Workspace == r || strings.HasPrefix(s.Workspace, r+"/") }):
		return s, fmt.Errorf("workspace %q: under %s, which the sandbox replaces", s.Workspace, strings.Join(replaced, ", "))
	case !CwdValid(s.Cwd):
		return s, fmt.Errorf("cwd %q: not a clean relative path inside the workspace", s.Cwd)
	case slices.ContainsFunc(s.Hide, func(h string) bool { return !hideValid(h, s.Workspace) }):
		return s, fmt.Errorf("hide %q: each must be an absolute, clean path below /, apart from the workspace", s.Hide)
	}
	if s.Profile != Analyse {
		if _, err := proxyPort(s.ProxyAddr); err != nil {
			return s, err
		}
	}
	return s, nil
}

// hideValid: h is an absolute, clean path below /, neither in nor above the workspace ws.
func hideValid(h, ws string) bool {
	within := func(a, b string) bool { return a == b || strings.HasPrefix(a, b+"/") }
	return path.IsAbs(h) && path.Clean(h) == h && h != "/" && !within(h, ws) && !within(ws, h)
}

// CwdValid reports whether cwd is "" or a clean relative path without "..": the syntactic
// half of a working folder's check (the caller checks it exists, without leaving the
// workspace through a symbolic link; the init opens it beneath the workspace again).
func CwdValid(cwd string) bool {
	if cwd == "" {
		return true
	}
	return len(cwd) <= 4096 && !path.IsAbs(cwd) && path.Clean(cwd) == cwd && cwd != "." &&
		!slices.Contains(strings.Split(cwd, "/"), "..") && strings.IndexByte(cwd, 0) < 0
}

// proxyPort is the port of a host:port, the only one build may connect to.
func proxyPort(addr string) (uint16, error) {
	host, p, err := net.SplitHostPort(addr)
	if err == nil && host == "" {
		err = errors.New("no host")
	}
	n, perr := strconv.ParseUint(p, 10, 16)
	if err == nil && (perr != nil || n == 0) {
		err = errors.New("bad port")
	}
	if err != nil {
		return 0, fmt.Errorf("proxy address %q: %w", addr, err)
	}
	return uint16(n), nil
}
