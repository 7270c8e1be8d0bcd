// Command sharness-landlock is the small static helper the runtime shim (cmd/sharness-runtime)
// bind-mounts read-only into every SHarness container whose policy asks for a Landlock domain,
// and puts in front of the container's entrypoint (and of every `docker exec`):
//
//	/.sharness-landlock DOMAIN -- PROGRAM [ARGS...]
//
// It puts itself under the domain (policies/landlock: its JSON encoding, as the compiled policy
// carries it), then executes PROGRAM (looked up in PATH as execve's callers do) with ARGS and
// its own environment, so the entrypoint and everything it starts stay under the domain. runc
// has already set no_new_privs, which Landlock needs from an unprivileged process.
//
// Mode enforce refuses to run below the Landlock ABI the domain needs (policies/landlock.MinABI);
// best_effort applies what the kernel has and says so on stderr. Either way nothing runs
// unconfined when a rule cannot be made (a missing writable folder, say): exit 126, reason on
// stderr, which `docker logs` shows.
package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"

	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"

	"github.com/sharness-ai/sharness/policies/landlock"
)

func main() {
	d, argv, err := parseArgs(os.Args[1:])
	if err == nil {
		err = confine(d, abi(), os.Stderr)
	}
	if err == nil {
		err = execve(argv)
	}
	fmt.Fprintln(os.Stderr, "sharness-landlock:", err)
	os.Exit(126)
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
func confine(d landlock.Domain, kernel int, stderr *os.File) error {
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

func abi() int {
	v, err := ll.LandlockGetABIVersion()
	if err != nil || v < 0 {
		return 0
	}
	return v
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
