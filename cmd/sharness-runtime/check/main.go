// Command sharness-runtime-check is the policy check of SHarness's OCI runtime shim: the runtime
// dockerd runs (cmd/sharness-runtime) hands it every runc command line but the few that create
// and widen nothing, with the same argv and environment. It refuses a create, run, restore, exec
// or update wider than the container's compiled policy and otherwise execs runc with the same
// arguments (docs/architecture.md, "The runtime shim"; issues 6 and 16). What it decides, and what
// it does not guarantee, is host/shim's.
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
