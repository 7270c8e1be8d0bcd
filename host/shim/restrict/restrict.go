// Package restrict is the work of sharness-landlock, the small static helper the runtime shim
// (host/shim) bind-mounts read-only into every SHarness container whose policy asks for a
// Landlock domain, and puts in front of the container's entrypoint (and of every `docker exec`):
//
//	/.sharness-landlock DOMAIN -- PROGRAM [ARGS...]
//
// (DOMAIN as Domain.Encode writes it: the executable files and, ending in "/", folders, the
// writable folders, the TCP ports it may bind and connect to.) Run puts the calling process under the domain, then executes PROGRAM (looked up in
// PATH as execve's callers do) with ARGS and the process's environment, so the entrypoint and
// everything it starts stay under the domain.
//
// It is started in front of every confined container's entrypoint, so it links nothing but
// package syscall and makes the domain with Landlock's three system calls itself: no JSON, no
// reflection, no formatting package (issue 16's cost of a container start).
//
// Mode enforce refuses to run below the Landlock ABI the domain needs (MinABI, which is
// policies/landlock.MinABI); best_effort applies what the kernel has and says so on stderr.
// Either way nothing runs unconfined when a rule cannot be made (a missing writable folder, say):
// Run returns the reason.
//
// What it does not guarantee: best_effort on an older kernel enforces only the rights that kernel
// handles; UDP is left to the stack's network (see rules), and binding an ephemeral TCP port
// (port 0) is not refused; files the process had open before Run are not restricted. A domain
// cannot be undone, so Run is for a process that will exec, never for a long-lived caller. Below
// ABI 8 (no LANDLOCK_RESTRICT_SELF_TSYNC) the domain and no_new_privs are the calling thread's:
// Run locks itself to that thread and executes PROGRAM from it, so PROGRAM has both; the helper's
// other threads (the Go runtime's own) run without them until execve ends them.
package restrict

import (
	"runtime"
	"syscall"
	"unsafe"
)

// HelperPath and HealthArg are policies/landlock's (a test holds them equal): the helper run as
// `HelperPath DOMAIN -- HelperPath HealthArg` (an exec's health check, which the shim wraps in
// the domain) makes the domain and returns ErrHealthy instead of executing anything.
const (
	HelperPath = "/.sharness-landlock"
	HealthArg  = "-health"
)

// ErrHealthy is Run's answer to a health check: the domain was made; the helper exits 0.
var ErrHealthy = healthy{}

type healthy struct{}

func (healthy) Error() string { return "healthy" }

// MinABI is the Landlock ABI an enforced domain needs (policies/landlock.MinABI; a test holds
// them equal).
const MinABI = 6

// Domain is a container's Landlock domain as the helper reads it from its arguments: the parts of
// policies/landlock.Domain that the helper enforces (host/shim converts one to the other).
type Domain struct {
	BestEffort bool // else enforce
	Exec       []string
	Write      []string
	Bind       []uint16
	Connect    []uint16
	AnyConnect bool
}

// Encode writes d as the helper's first argument: its mode (enforce or best_effort), then for
// each executable " x", for each writable folder " w", each as its length in bytes, ":" and the
// path (so that a path may hold any byte), for each TCP port it may bind " b" and connect to " c"
// with the port, and " a" for any TCP connect. For example:
//
//	enforce x12:/bin/busybox w4:/tmp c2:53 a
func (d Domain) Encode() string {
	b := []byte(modeEnforce)
	if d.BestEffort {
		b = []byte(modeBestEffort)
	}
	for _, l := range [2]struct {
		tag   string
		paths []string
	}{{" x", d.Exec}, {" w", d.Write}} {
		for _, p := range l.paths {
			b = append(append(append(append(b, l.tag...), itoa(len(p))...), ':'), p...)
		}
	}
	for _, p := range d.Bind {
		b = append(append(b, " b"...), itoa(int(p))...)
	}
	for _, p := range d.Connect {
		b = append(append(b, " c"...), itoa(int(p))...)
	}
	if d.AnyConnect {
		b = append(b, " a"...)
	}
	return string(b)
}

const (
	modeEnforce    = "enforce"
	modeBestEffort = "best_effort"
	usage          = "usage: sharness-landlock DOMAIN -- PROGRAM [ARGS...]"
)

// ParseArgs reads the helper's arguments, DOMAIN -- PROGRAM [ARGS...]: the domain (Decode) and
// the program with its arguments.
func ParseArgs(args []string) (Domain, []string, error) {
	if len(args) < 3 || args[1] != "--" {
		return Domain{}, nil, errorString(usage)
	}
	d, err := Decode(args[0])
	if err != nil {
		return Domain{}, nil, err
	}
	return d, args[2:], nil
}

// Decode reads what Encode writes, and nothing else: an unknown mode or item, a path that is not
// absolute or not of its stated length, a port that is not a decimal number from 1 to 65535 (no
// sign, no leading zero) is an error.
func Decode(s string) (Domain, error) {
	var d Domain
	mode, rest, more := cut(s, ' ')
	switch mode {
	case modeEnforce:
	case modeBestEffort:
		d.BestEffort = true
	case "per_command":
		return d, errorString("domain: mode per_command has no container-wide domain: the shim must not wrap this container")
	default:
		return d, errorString("domain: mode " + quote(mode) + ": want enforce or best_effort")
	}
	for more {
		if rest == "" {
			return d, errorString("domain: a trailing space")
		}
		tag, item := rest[0], rest[1:]
		switch tag {
		case 'x', 'w':
			digits, after, ok := cut(item, ':')
			n, nok := atoi(digits)
			if !ok || !nok || n > len(after) {
				return d, errorString("domain: " + string(tag) + quote(item) + ": want LENGTH:PATH")
			}
			p := after[:n]
			if p[0] != '/' {
				return d, errorString("domain: " + quote(p) + " is not an absolute path")
			}
			if tag == 'x' {
				d.Exec = append(d.Exec, p)
			} else {
				d.Write = append(d.Write, p)
			}
			item = after[n:]
		case 'b', 'c':
			digits, _, _ := cut(item, ' ')
			n, ok := atoi(digits)
			if !ok || n > 65535 {
				return d, errorString("domain: " + string(tag) + quote(digits) + ": want a port from 1 to 65535")
			}
			if tag == 'b' {
				d.Bind = append(d.Bind, uint16(n))
			} else {
				d.Connect = append(d.Connect, uint16(n))
			}
			item = item[len(digits):]
		case 'a':
			d.AnyConnect = true
		default:
			return d, errorString("domain: unknown item " + quote(rest))
		}
		if more = item != ""; more && item[0] != ' ' {
			return d, errorString("domain: " + quote(item) + ": want a space before the next item")
		} else if more {
			rest = item[1:]
		}
	}
	return d, nil
}

// Run parses the helper's arguments (ParseArgs), restricts this process to the domain at the
// kernel's ABI and executes the program. It returns only on failure.
func Run(args []string, stderr func(string)) error {
	d, argv, err := ParseArgs(args)
	if err != nil {
		return err
	}
	// The domain and no_new_privs are set on this thread, and execve must run from it.
	runtime.LockOSThread()
	if err := confine(d, ABI(), stderr); err != nil {
		return err
	}
	if len(argv) == 2 && argv[0] == HelperPath && argv[1] == HealthArg {
		return ErrHealthy // the exec entered the domain: the health check's whole answer
	}
	return execve(argv)
}

// ABI is the kernel's Landlock ABI version, 0 without Landlock.
func ABI() int {
	v, _, e := syscall.RawSyscall(sysCreateRuleset, 0, 0, createRulesetVersion)
	if e != 0 || int(v) < 0 {
		return 0
	}
	return int(v)
}

// confine restricts this thread to d at the kernel's ABI.
func confine(d Domain, kernel int, stderr func(string)) error {
	if kernel < MinABI {
		if !d.BestEffort {
			return errorString("the kernel's Landlock ABI is " + itoa(kernel) + "; process.landlock enforce needs " + itoa(MinABI))
		}
		stderr("sharness-landlock: best effort: the kernel's Landlock ABI is " + itoa(kernel) + ", below " + itoa(MinABI) + ": some rules are not enforced\n")
	}
	if kernel < 1 {
		return nil // best effort, and nothing to apply
	}
	return restrictSelf(rules(d, kernel), kernel)
}

// restrictSelf makes the ruleset r, adds its rules and restricts this thread to it (every thread
// from ABI 8, with TSYNC), after setting no_new_privs, which an unprivileged process needs.
func restrictSelf(r ruleset, kernel int) error {
	attr := rulesetAttr{handledFS: r.fs, handledNet: r.net, scoped: r.scoped}
	size := unsafe.Sizeof(attr) // the kernel reads the fields it knows; the others are 0 here
	switch {
	case kernel < 4:
		size = 8
	case kernel < 6:
		size = 16
	}
	fd, _, e := syscall.RawSyscall(sysCreateRuleset, uintptr(unsafe.Pointer(&attr)), size, 0)
	if e != 0 {
		return errno("landlock_create_ruleset", e)
	}
	defer syscall.Close(int(fd))
	for _, p := range r.paths {
		if err := addPath(int(fd), p); err != nil {
			return err
		}
	}
	for _, p := range r.ports {
		na := netPortAttr{access: p.access, port: uint64(p.port)}
		if _, _, e := syscall.RawSyscall6(sysAddRule, fd, ruleNetPort, uintptr(unsafe.Pointer(&na)), 0, 0, 0); e != 0 {
			return errno("landlock_add_rule port "+itoa(int(p.port)), e)
		}
	}
	if _, _, e := syscall.RawSyscall6(syscall.SYS_PRCTL, prSetNoNewPrivs, 1, 0, 0, 0, 0); e != 0 {
		return errno("prctl(PR_SET_NO_NEW_PRIVS)", e)
	}
	var flags uintptr
	if kernel >= 8 {
		flags = restrictSelfTSync
	}
	if _, _, e := syscall.RawSyscall(sysRestrictSelf, fd, flags, 0); e != 0 {
		return errno("landlock_restrict_self", e)
	}
	return nil
}

// addPath adds one path rule. A path that does not exist is skipped when the rule says so (an
// executable the image lacks, a device the host lacks); any other error fails the domain.
func addPath(rulesetFD int, p pathRule) error {
	if p.access == 0 {
		return nil
	}
	fd, err := syscall.Open(p.path, oPath|syscall.O_CLOEXEC, 0)
	if err != nil {
		if p.ignoreMissing && err == syscall.ENOENT {
			return nil
		}
		return errno("open "+p.path, err)
	}
	defer syscall.Close(fd)
	attr := pathBeneathAttr{access: p.access, parentFD: int32(fd)}
	if _, _, e := syscall.RawSyscall6(sysAddRule, uintptr(rulesetFD), rulePathBeneath, uintptr(unsafe.Pointer(&attr)), 0, 0, 0); e != 0 {
		return errno("landlock_add_rule "+p.path, e)
	}
	return nil
}

func execve(argv []string) error {
	prog, err := lookPath(argv[0])
	if err != nil {
		return err
	}
	return errno("execute "+prog, syscall.Exec(prog, argv, syscall.Environ()))
}

// lookPath is exec.LookPath: a name with a slash as it is, else the first executable file of
// that name in PATH's folders, refusing one found in a relative folder.
func lookPath(name string) (string, error) {
	for i := 0; i < len(name); i++ {
		if name[i] == '/' {
			if !executable(name) {
				return "", errorString("find " + name + ": not an executable file")
			}
			return name, nil
		}
	}
	path, _ := syscall.Getenv("PATH")
	for rest, more := path, true; more; {
		var dir string
		dir, rest, more = cut(rest, ':')
		if dir == "" {
			dir = "."
		}
		if p := dir + "/" + name; executable(p) {
			if dir[0] != '/' {
				return "", errorString("find " + name + ": found in the relative folder " + dir)
			}
			return p, nil
		}
	}
	return "", errorString("find " + name + ": not in PATH")
}

func executable(p string) bool {
	var st syscall.Stat_t
	return syscall.Stat(p, &st) == nil && st.Mode&syscall.S_IFMT != syscall.S_IFDIR && st.Mode&0o111 != 0
}

func cut(s string, sep byte) (before, after string, found bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == sep {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

type errorString string

func (e errorString) Error() string { return string(e) }

// errno is an error naming the action and the system's error, which errors.Is matches.
func errno(action string, e error) error { return &opError{action, e} }

type opError struct {
	action string
	err    error
}

func (e *opError) Error() string { return e.action + ": " + e.err.Error() }
func (e *opError) Unwrap() error { return e.err }

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	for ; n > 0; n /= 10 {
		i--
		b[i] = byte('0' + n%10)
	}
	return string(b[i:])
}

// atoi reads a positive decimal number of at most 8 digits: digits only, no sign, no leading zero.
func atoi(s string) (int, bool) {
	if s == "" || len(s) > 8 || s[0] == '0' {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + int(s[i]-'0')
	}
	return n, true
}

func quote(s string) string { return "\"" + s + "\"" }
