// Command sharness-agent is the demo agent of the SHarness stack. It checks, from inside its
// container, the identity, capabilities, seccomp filter and file systems the stack promised,
// then, when compose points it at llm (ANTHROPIC_BASE_URL), holds a short conversation with the
// model through the official Anthropic Go SDK: a tool call, its result, a streamed reply; and, when
// the stack has bash and fs, runs one command in a bash sandbox through its MCP tool and writes
// one protected path through fs. It
// prints one JSON line per check on stdout, then a summary line. With -probe it then runs the side-door probe (/sharness-probe), whose failure is
// its failure.
//
// It reports what the process can observe of its own confinement; it does not prove the absence
// of side doors it does not probe (other syscalls, mounted sockets, the engine's own bugs).
//
// Exit codes: 0 all checks passed, 1 a check failed, 2 usage error.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"syscall"

	"github.com/sharness-ai/sharness/testkit/reexec"
)

type config struct {
	idle  bool   // keep running after the report, for `docker compose up`
	probe string // after the report, run this side-door probe and fail if it fails
}

type summary struct {
	Passed  int `json:"passed"`
	Failed  int `json:"failed"`
	Skipped int `json:"skipped"`
}

func main() {
	reexec.Init() // a re-executed copy of this binary may be one of the ptrace attempt's children
	var cfg config
	flag.BoolVar(&cfg.idle, "idle", false, "keep running after the report until SIGTERM or SIGINT")
	withProbe := flag.Bool("probe", false, "after the report, run the side-door probe "+probePath)
	flag.Parse()
	if flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: sharness-agent [-idle] [-probe]")
		os.Exit(2)
	}
	if *withProbe {
		cfg.probe = probePath
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	code := run(ctx, cfg, os.Stdout)
	stop()
	os.Exit(code)
}

// run prints the report and returns the exit code.
func run(ctx context.Context, cfg config, out io.Writer) int {
	enc := json.NewEncoder(out)
	var sum summary
	rs := append(statusChecks(), rootReadOnly(), tmpWritable())
	rs = append(rs, deniedSyscalls()...)
	rs = append(rs, modelChecks(ctx, os.Getenv)...)
	for _, r := range append(rs, toolChecks(ctx, os.Getenv)...) {
		switch {
		case r.Skipped:
			sum.Skipped++
		case r.OK:
			sum.Passed++
		default:
			sum.Failed++
		}
		enc.Encode(r) // a lost line shows as a count mismatch against the summary
	}
	code := 0
	if err := enc.Encode(map[string]summary{"summary": sum}); err != nil || sum.Failed > 0 {
		code = 1 // a summary that cannot be written is a failed report
	}
	if cfg.probe != "" {
		// The probe prints its own lines and summary; its failure is the agent's failure.
		cmd := exec.CommandContext(ctx, cfg.probe)
		cmd.Stdout, cmd.Stderr = out, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "sharness-agent: probe %s: %v\n", cfg.probe, err)
			code = 1
		}
	}
	if cfg.idle {
		<-ctx.Done()
	}
	return code
}

// probePath is where the agent image carries the side-door probe.
const probePath = "/sharness-probe"
