package shim

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/sharness-ai/sharness/host/shim/runc"
)

// Run is sharness-runtime: it decides runc's argv (args, without argv[0]), then hands it over to
// runc (runc.Exec), which replaces this process. It returns only when it refuses or the handover
// fails, after reporting why on runc's --log and on stderr; the caller exits with
// runc.FailureStatus(args).
func Run(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	cmd, _ := runc.Parse(args) // for --log only; decide reports a parse error itself
	path, err := runc.Find(getenv)
	if err != nil {
		r := plain(cmd, "runc", "a runc binary", err.Error())
		report(r, cmd.Log, cmd.LogFormat, time.Now(), stderr)
		return r
	}
	ho, r := decide(args, getenv, osHost{ctx: ctx, runc: path})
	if r != nil {
		if r.Cut {
			if err := runc.Kill(ctx, path, cmd.Root, cmd.ID); err != nil {
				r.Reasons = append(r.Reasons, Reason{Field: "cut", Want: "the container killed", Got: err.Error()})
			}
		}
		report(r, cmd.Log, cmd.LogFormat, time.Now(), stderr)
		return r
	}
	if err := runc.Exec(path, args, ho); err != nil {
		r := plain(cmd, "runc", "a handover to runc", err.Error())
		report(r, cmd.Log, cmd.LogFormat, time.Now(), stderr)
		return fmt.Errorf("hand over: %w", err)
	}
	return nil
}
