// Package restrict is the work of sharness-landlock, the small static helper the runtime shim
// (host/shim) bind-mounts read-only into every SHarness container whose policy asks for a
// Landlock domain, and puts in front of the container's entrypoint (and of every `docker exec`):
//
//	/.sharness-landlock DOMAIN -- PROGRAM [ARGS...]
//
// Run puts the calling process under the domain (policies/landlock: its JSON encoding, as the
// compiled policy carries it), then executes PROGRAM (looked up in PATH as execve's callers do)
// with ARGS and the process's environment, so the entrypoint and everything it starts stay under
// the domain. runc has already set no_new_privs, which Landlock needs from an unprivileged
// process.
//
// Mode enforce refuses to run below the Landlock ABI the domain needs (policies/landlock.MinABI);
// best_effort applies what the kernel has and says so on stderr. Either way nothing runs
// unconfined when a rule cannot be made (a missing writable folder, say): Run returns the reason.
//
// What it does not guarantee: best_effort on an older kernel enforces only the rights that kernel
// handles; UDP is left to the stack's network (see domainRules), and binding an ephemeral TCP
// port (port 0) is not refused; files the process had open before Run are not restricted. A
// domain cannot be undone, so Run is for a process that will exec, never for a long-lived caller.
package restrict

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"

	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"

	"github.com/sharness-ai/sharness/policies/landlock"
)

// Run parses the helper's arguments (DOMAIN -- PROGRAM [ARGS...]), restricts this process to
// the domain at the kernel's ABI and executes PROGRAM. It returns only on failure.
func Run(args []string, stderr io.Writer) error {
	d, argv, err := parseArgs(args)
	if err == nil {
		err = confine(d, ABI(), stderr)
	}
	if err == nil {
		err = execve(argv)
	}
	return err
}

// ABI is the kernel's Landlock ABI version, 0 without Landlock.
func ABI() int {
	v, err := ll.LandlockGetABIVersion()
	if err != nil || v < 0 {
		return 0
	}
	return v
}

func parseArgs(args []string) (landlock.Domain, []string, error) {
	if len(args) < 3 || args[1] != "--" {
		return landlock.Domain{}, nil, errors.New("usage: sharness-landlock DOMAIN -- PROGRAM [ARGS...]")
	}
	d, err := landlock.Parse(args[0])
	if err != nil {
		return d, nil, err
	}
	if d.Mode == landlock.PerCommand {
		return d, nil, errors.New("mode per_command has no container-wide domain: the shim must not wrap this container")
	}
	return d, args[2:], nil
}

// confine restricts this process to d at the kernel's ABI.
func confine(d landlock.Domain, kernel int, stderr io.Writer) error {
	if kernel < landlock.MinABI {
		if d.Mode == landlock.Enforce {
			return fmt.Errorf("the kernel's Landlock ABI is %d; process.landlock enforce needs %d", kernel, landlock.MinABI)
		}
		fmt.Fprintf(stderr, "sharness-landlock: best effort: the kernel's Landlock ABI is %d, below %d: some rules are not enforced\n", kernel, landlock.MinABI)
	}
	if kernel < 1 {
		return nil // best effort, and nothing to apply
	}
	cfg, rules := domainRules(d, kernel)
	if err := cfg.Restrict(rules...); err != nil {
		return fmt.Errorf("restrict to %v: %w", cfg, err)
	}
	return nil
}

func execve(argv []string) error {
	prog, err := exec.LookPath(argv[0])
	if err != nil {
		return fmt.Errorf("find %s: %w", argv[0], err)
	}
	if err := syscall.Exec(prog, argv, os.Environ()); err != nil {
		return fmt.Errorf("execute %s: %w", prog, err)
	}
	return nil
}
