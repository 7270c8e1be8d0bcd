// Command sharness-runtime is SHarness's OCI runtime shim: an OCI runtime with runc's command
// line (the pattern of nvidia-container-runtime) that refuses a create, run, restore, exec or
// update wider than the container's compiled policy and otherwise execs runc with the same
// arguments, so that start, kill, delete, state, events, checkpoint and logs keep working
// unchanged (docs/architecture.md, "The runtime shim"; issues 6 and 16).
//
// It is two programs. This one, which dockerd registers and containerd's shim runs for every runc
// command, reads only runc's global flags and the command's name (Route): a command that creates
// and widens nothing (start, state, kill, delete, events, ps, pause, resume) goes to runc at once;
// every other command line, and any it does not read exactly as runc would, goes to the policy
// check (cmd/sharness-runtime/check, at $SHARNESS_RUNTIME_CHECK or DefaultCheck), which decides
// it (host/shim). Both get this process's argv and environment unchanged. This program links
// nothing but os and syscall: three of the four runc commands of a `docker start` are
// pass-throughs, and each then costs one small program's start-up, not the check's (issue 16).
//
// Environment: SHARNESS_RUNTIME_RUNC (the runc binary; default runc on PATH),
// SHARNESS_RUNTIME_CHECK (the policy check; default DefaultCheck), and the check's own.
//
// Exit codes: runc's or the check's own after the handover; 1 (255 for exec, as runc's) when
// neither can be started, with the reason on stderr.
package main

import (
	"os"
	"syscall"
)

const (
	envRunc  = "SHARNESS_RUNTIME_RUNC"
	envCheck = "SHARNESS_RUNTIME_CHECK"
	// DefaultCheck is where hack/runtime.sh installs the policy check.
	DefaultCheck = "/usr/local/lib/sharness-ai/sharness-runtime-check"
)

func main() {
	args := os.Args[1:]
	prog, err := target(args, getenv)
	if err == "" {
		err = "exec " + prog + ": " + syscall.Exec(prog, append([]string{prog}, args...), syscall.Environ()).Error()
	}
	os.Stderr.WriteString("sharness-runtime: " + err + "\n")
	status := 1
	if name, _ := Route(args); name == "exec" {
		status = 255
	}
	os.Exit(status)
}

// target is the program to hand args to: runc for a pass-through, else the check. It is never
// this program (which would exec itself forever): a runc that is, is refused for every command,
// since the check would hand the command back here. A runc that cannot be found is the check's to
// report, on runc's --log.
func target(args []string, getenv func(string) string) (prog, err string) {
	self, serr := stat("/proc/self/exe")
	if serr != "" {
		return "", serr
	}
	runc, rerr := findRunc(getenv)
	if rerr == "" {
		st, e := stat(runc)
		switch {
		case e != "":
			rerr = e
		case same(st, self):
			return "", "runc " + runc + " is sharness-runtime itself"
		}
	}
	if _, pass := Route(args); pass && rerr == "" {
		return runc, ""
	}
	check := getenv(envCheck)
	if check == "" {
		check = DefaultCheck
	}
	if check[0] != '/' {
		return "", "the policy check " + check + " is not an absolute path"
	}
	if st, e := stat(check); e == "" && same(st, self) {
		return "", "the policy check " + check + " is sharness-runtime itself"
	}
	return check, ""
}

// passThrough are runc's commands that create nothing and widen nothing, which host/shim's decide
// hands over unread as well. None is one it polices (create, run, restore, exec, update).
var passThrough = map[string]bool{"start": true, "state": true, "kill": true, "delete": true,
	"events": true, "ps": true, "pause": true, "resume": true}

// Route reads the command runc would run for args (argv without argv[0]) when args have the
// shape containerd's shim (go-runc) writes: global flags among --root, --log and --log-format,
// each with its value as the next argument (Go's flag package takes it whatever it is), and
// --debug and --systemd-cgroup, then the command's name. pass is true only for such a shape
// naming a passThrough command; any other shape (a flag written another way, --help, "--", an
// unknown flag) is the check's to read, with runc's whole grammar (host/shim/runc.Parse).
func Route(args []string) (name string, pass bool) {
	for i := 0; i < len(args); i++ {
		switch a := args[i]; a {
		case "--root", "--log", "--log-format":
			i++
			if i == len(args) {
				return "", false
			}
		case "--debug", "--systemd-cgroup":
		default:
			if a == "" || a[0] == '-' {
				return "", false
			}
			return a, passThrough[a]
		}
	}
	return "", false
}

// findRunc is $SHARNESS_RUNTIME_RUNC, else runc in the first folder of PATH that has an
// executable one, as host/shim/runc.Find finds it. A PATH with a relative folder before runc's is
// not read here (exec.LookPath refuses a match there): the check reads it and reports.
func findRunc(getenv func(string) string) (string, string) {
	if p := getenv(envRunc); p != "" {
		if p[0] != '/' {
			return "", "runc " + p + " is not an absolute path"
		}
		return p, ""
	}
	for rest, more := getenv("PATH"), true; more; {
		var dir string
		dir, rest, more = cut(rest, ':')
		if dir == "" || dir[0] != '/' {
			return "", "PATH has a relative folder"
		}
		p := dir + "/runc"
		var st syscall.Stat_t
		if syscall.Stat(p, &st) == nil && st.Mode&syscall.S_IFMT != syscall.S_IFDIR && st.Mode&0o111 != 0 {
			return p, ""
		}
	}
	return "", "no runc on PATH"
}

// cut is strings.Cut, which this program does not link.
func cut(s string, sep byte) (before, after string, found bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == sep {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

func getenv(key string) string {
	v, _ := syscall.Getenv(key)
	return v
}

func stat(path string) (syscall.Stat_t, string) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return st, "stat " + path + ": " + err.Error()
	}
	return st, ""
}

func same(a, b syscall.Stat_t) bool { return a.Dev == b.Dev && a.Ino == b.Ino }
