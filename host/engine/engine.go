// Package engine drives the host's container engine for every part of sharness-ai that needs one:
// a stack's compose project (its images, up, ps, logs, down), containers, images, networks and
// volumes, and what the engine says of itself. It runs the docker CLI today. Its methods are what
// sharness-ai asks of an engine, not the CLI's flags, so that the official Go client can take the
// CLI's place behind them.
//
// What it does not guarantee: it reports what the engine says, and whoever controls the engine
// (root, the docker group) decides what that is. Nothing it returns is evidence of what a
// container enforces; the runtime shim enforces it, and the audit record is the evidence.
package engine

import (
	"bytes"
	"context"
	"io"
	"os/exec"
	"strings"
	"time"
)

// Docker is the host's engine, reached through the docker CLI.
type Docker struct {
	run     Runner
	timeout time.Duration // bounds every command when not zero
	brief   bool          // errors quote the first line of docker's stderr only
}

// Runner runs one docker command: New's runs the docker CLI on PATH; tests pass a fake engine.
type Runner func(ctx context.Context, c Command) error

// Command is one run of the docker CLI: its arguments after "docker", its environment (nil: the
// process's) and where its output goes.
type Command struct {
	Args           []string
	Env            []string
	Stdout, Stderr io.Writer
}

// New is the engine of this host, through the docker CLI on PATH.
func New() *Docker { return With(cli) }

// With is an engine whose commands run runs instead of the docker CLI.
func With(run Runner) *Docker { return &Docker{run: run} }

// Brief is d for a report of many lines (doctor's): every command is bounded by timeout, so that
// an engine that hangs is reported rather than waited on, and an error quotes only the first line
// of what docker printed, so that it fits the report's line.
func (d *Docker) Brief(timeout time.Duration) *Docker {
	b := *d
	b.timeout, b.brief = timeout, true
	return &b
}

func cli(ctx context.Context, c Command) error {
	cmd := exec.CommandContext(ctx, "docker", c.Args...)
	cmd.Env, cmd.Stdout, cmd.Stderr = c.Env, c.Stdout, c.Stderr
	return cmd.Run()
}

// Error is a docker command that failed: the command line, why, and what docker printed on
// stderr when that was not streamed to the caller.
type Error struct {
	Command string // "docker compose -p sharness ps --all --format json"
	Err     error  // the command's own error: an *exec.ExitError from the CLI
	Stderr  string // trimmed; empty when stderr went to the caller
	quoted  bool   // stderr was captured: the message quotes it, even empty
}

func (e *Error) Error() string {
	if !e.quoted {
		return e.Command + ": " + e.Err.Error()
	}
	return e.Command + ": " + e.Err.Error() + ": " + e.Stderr
}

func (e *Error) Unwrap() error { return e.Err }

// output runs docker with args and returns what it printed on stdout, also when it fails (docker
// version prints the client's half without an engine); its stderr goes into the error.
func (d *Docker) output(ctx context.Context, env []string, args ...string) ([]byte, error) {
	if d.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d.timeout)
		defer cancel()
	}
	var out, errOut bytes.Buffer
	if err := d.run(ctx, Command{Args: args, Env: env, Stdout: &out, Stderr: &errOut}); err != nil {
		msg := strings.TrimSpace(errOut.String())
		if d.brief {
			msg, _, _ = strings.Cut(msg, "\n")
		}
		return out.Bytes(), &Error{Command: commandLine(args), Err: err, Stderr: msg, quoted: true}
	}
	return out.Bytes(), nil
}

// stream runs docker with args, its output going to stdout and stderr.
func (d *Docker) stream(ctx context.Context, env []string, stdout, stderr io.Writer, args ...string) error {
	if d.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d.timeout)
		defer cancel()
	}
	if err := d.run(ctx, Command{Args: args, Env: env, Stdout: stdout, Stderr: stderr}); err != nil {
		return &Error{Command: commandLine(args), Err: err}
	}
	return nil
}

func commandLine(args []string) string { return "docker " + strings.Join(args, " ") }
