// Command sharness-runtime is SHarness's OCI runtime shim: an OCI runtime with runc's command
// line (the pattern of nvidia-container-runtime) that refuses a create, run, restore, exec or
// update wider than the container's compiled policy and otherwise execs runc with the same
// arguments, so that start, kill, delete, state, events, checkpoint and logs keep working
// unchanged (docs/architecture.md, "The runtime shim"; issue 6). What it decides, and what it does
// not guarantee, is host/shim's.
//
// Environment: SHARNESS_RUNTIME_RUNC (the runc binary; default runc on PATH),
// SHARNESS_RUNTIME_POLICIES (the policy root; default /etc/sharness-ai/policies),
// SHARNESS_RUNTIME_LANDLOCK (the Landlock helper). The file /etc/sharness-ai/strict turns strict
// mode on: a container without SHarness's marker is refused.
//
// Exit codes: runc's own after a handover; 1 (255 for exec, as runc's) when the shim refuses or
// cannot hand over, with one error line on runc's --log (which containerd reads back into
// docker's error message) and the same text on stderr.
package main

import (
	"context"
	"os"

	"github.com/sharness-ai/sharness/host/shim"
	"github.com/sharness-ai/sharness/host/shim/runc"
)

func main() {
	args := os.Args[1:]
	if err := shim.Run(context.Background(), args, os.Getenv, os.Stderr); err != nil {
		os.Exit(runc.FailureStatus(args))
	}
}
