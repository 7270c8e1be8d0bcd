// Command sharness-runtime is SHarness's OCI runtime shim: an OCI runtime with runc's command
// line (the pattern of nvidia-container-runtime) that reads what `create`, `run`, `restore`,
// `exec` and `update` would do, refuses anything wider than the container's compiled policy, and
// otherwise execs runc with the same arguments, so that start, kill, delete, state, events,
// checkpoint and logs keep working unchanged (DESIGN.md §5, issue 6).
//
// Identification: the container's marker (SHARNESS_AI_COMPONENT / SHARNESS_AI_POLICY in its
// env or annotations, read by host/shim.Identify). A marked container is checked against
// host/shim.PolicyPath($SHARNESS_RUNTIME_POLICIES or /etc/sharness-ai/policies, policy,
// component); a missing or unreadable compiled policy is a refusal. An unmarked container passes
// through unchanged unless /etc/sharness-ai/strict exists (strict mode), where it is refused.
// exec and update name a container, not a bundle: its bundle comes from `runc state`.
//
// Environment: SHARNESS_RUNTIME_RUNC (the runc binary; default runc on PATH),
// SHARNESS_RUNTIME_POLICIES (the policy root), SHARNESS_RUNTIME_LANDLOCK (the Landlock helper).
// Exit codes: runc's own after a handover; 1 (255 for exec, as runc's) when the shim refuses or
// cannot hand over, with one error line on runc's --log (which containerd reads back into
// docker's error message) and the same text on stderr.
//
// What it does not guarantee: the container names its own policy, so whoever edits its compose
// file can name another compiled policy installed on the host, or drop the marker unless strict
// mode is on; anyone with the Docker API can name runc instead, even where this one is the
// default. The config.json it checks is read again by runc (an exec's process is not: runc gets
// the checked bytes in a memfd): it must live where only root writes (containerd's bundles do).
// Between its check and runc's start nothing else is compared; what no OCI field carries it adds
// through the Landlock helper (host/shim.Confine).
package main

import (
	"fmt"
	"io"
	"os"
	"time"
)

func main() {
	if err := run(os.Args[1:], os.Getenv, os.Stderr); err != nil {
		os.Exit(exitCode(os.Args[1:]))
	}
}

// exitCode is what a refusal exits with: 255 for exec, as runc's own exec failures do, so that it
// cannot be mistaken for the exec'd process exiting 1; 1 otherwise.
func exitCode(args []string) int {
	if inv, _ := parseArgs(args); inv.command == "exec" {
		return 255
	}
	return 1
}

// run decides, then hands over to runc; it returns only when it refuses or the handover fails.
func run(args []string, getenv func(string) string, stderr io.Writer) error {
	inv, _ := parseArgs(args) // for --log only; decide reports a parse error itself
	runc, err := findRunc(getenv)
	if err != nil {
		r := plain(inv, "runc", "a runc binary", err.Error())
		report(r, inv.log, inv.logFormat, time.Now(), stderr)
		return r
	}
	act, r := decide(args, getenv, osHost{runc: runc})
	if r != nil {
		report(r, inv.log, inv.logFormat, time.Now(), stderr)
		return r
	}
	if err := handover(runc, args, act); err != nil {
		r := plain(inv, "runc", "a handover to runc", err.Error())
		report(r, inv.log, inv.logFormat, time.Now(), stderr)
		return fmt.Errorf("hand over: %w", err)
	}
	return nil
}
