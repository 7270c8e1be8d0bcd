// Package engine drives the host's container engine for every part of sharness-ai that needs one:
// a stack's compose project (its images, up, ps, logs, down), containers, images, networks and
// volumes, and what the engine says of itself. Its methods are what sharness-ai asks of an
// engine, not the engine's own verbs.
//
// Containers, images, networks, volumes and the engine's version and configuration go through the
// Docker Engine API with the official Go client (github.com/moby/moby/client), which finds the
// engine as the docker CLI does from the environment (DOCKER_HOST, DOCKER_TLS_VERIFY,
// DOCKER_CERT_PATH, DOCKER_API_VERSION; not the CLI's contexts) and negotiates the API version
// with it (the client needs 1.40; Debian's Engine 20.10 speaks 1.41). The compose verbs run the
// docker CLI on PATH: compose is a plugin of the CLI (docker compose), with no Engine API of its
// own, and its project model (files, interpolation, labels) lives in the plugin.
//
// What it does not guarantee: it reports what the engine says, and whoever controls the engine
// (root, the docker group) decides what that is. Nothing it returns is evidence of what a
// container enforces; the runtime shim enforces it, and the audit record is the evidence.
package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"time"

	"github.com/moby/moby/client"
)

// Docker is the host's engine: its Engine API through the Go client, and its compose plugin
// through the docker CLI.
type Docker struct {
	api     *client.Client // nil when the client could not be made: apiErr says why
	apiErr  error
	run     Runner
	timeout time.Duration // bounds every command and API call when not zero
	brief   bool          // errors quote one line only
}

// Runner runs one docker command (compose's verbs): New's runs the docker CLI on PATH; tests
// pass a fake.
type Runner func(ctx context.Context, c Command) error

// Command is one run of the docker CLI: its arguments after "docker", its environment (nil: the
// process's) and where its output goes.
type Command struct {
	Args           []string
	Env            []string
	Stdin          io.Reader // nil: no input
	Stdout, Stderr io.Writer
}

// New is the engine of this host: the Engine API the environment names (the CLI's default socket
// without DOCKER_HOST), and the docker CLI on PATH for compose.
func New() *Docker { return With(cli, client.FromEnv) }

// With is an engine whose compose commands run runs and whose Engine API client is made with
// opts (tests: client.WithHost of an httptest server). The client negotiates the API version
// with the engine on its first call (v0.6's default), unless opts fix one.
func With(run Runner, opts ...client.Opt) *Docker {
	c, err := client.New(opts...)
	return &Docker{api: c, apiErr: err, run: run}
}

// Brief is d for a report of many lines (doctor's): every command and API call is bounded by
// timeout, so that an engine that hangs is reported rather than waited on, and an error quotes
// only the first line of what docker or the engine said, so that it fits the report's line.
func (d *Docker) Brief(timeout time.Duration) *Docker {
	b := *d
	b.timeout, b.brief = timeout, true
	return &b
}

func cli(ctx context.Context, c Command) error {
	cmd := exec.CommandContext(ctx, "docker", c.Args...)
	cmd.Env, cmd.Stdin, cmd.Stdout, cmd.Stderr = c.Env, c.Stdin, c.Stdout, c.Stderr
	return cmd.Run()
}

// Error is a docker command or an Engine API call that failed: what was asked, why, and for a
// command what docker printed on stderr when that was not streamed to the caller.
type Error struct {
	// Command is the command line ("docker compose -p sharness ps --all --format json") or the
	// API call, named as what it asks ("docker API inspect container 0123abcd").
	Command string
	// Err is why: the command's own error (an *exec.ExitError from the CLI), or the client's
	// (errdefs-typed: cerrdefs.IsNotFound and the like see through it), or an *ExitError.
	Err    error
	Stderr string // trimmed; empty when stderr went to the caller, or for an API call
	quoted bool   // stderr was captured: the message quotes it, even empty
	brief  bool   // the message keeps Err's first line only
}

func (e *Error) Error() string {
	why := e.Err.Error()
	if e.brief {
		why, _, _ = strings.Cut(why, "\n")
	}
	if !e.quoted {
		return e.Command + ": " + why
	}
	return e.Command + ": " + why + ": " + e.Stderr
}

func (e *Error) Unwrap() error { return e.Err }

// ExitError is a container that ran and exited with a code other than 0.
type ExitError struct{ Code int }

func (e *ExitError) Error() string { return fmt.Sprintf("exited with code %d", e.Code) }

// ExitCode is the container's exit code, as *exec.ExitError's is the command's.
func (e *ExitError) ExitCode() int { return e.Code }

// call makes one Engine API call, bounded as d says; its error is an *Error naming what, and
// says so when the engine did not answer in time.
func call[T any](ctx context.Context, d *Docker, what string, f func(context.Context, *client.Client) (T, error)) (T, error) {
	var zero T
	if d.apiErr != nil {
		return zero, &Error{Command: "docker API " + what, Err: fmt.Errorf("make the Engine API client: %w", d.apiErr), brief: d.brief}
	}
	callCtx := ctx
	if d.timeout > 0 {
		var cancel context.CancelFunc
		callCtx, cancel = context.WithTimeout(ctx, d.timeout)
		defer cancel()
	}
	v, err := f(callCtx, d.api)
	if err == nil {
		return v, nil
	}
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil && d.timeout > 0 {
		// The client's own error quotes the request's URL, which says nothing more.
		err = fmt.Errorf("the engine did not answer within %s: %w", d.timeout, context.DeadlineExceeded)
	}
	return zero, &Error{Command: "docker API " + what, Err: err, brief: d.brief}
}

// do is call for a call that returns nothing.
func (d *Docker) do(ctx context.Context, what string, f func(context.Context, *client.Client) error) error {
	_, err := call(ctx, d, what, func(ctx context.Context, c *client.Client) (struct{}, error) { return struct{}{}, f(ctx, c) })
	return err
}

// output runs docker with args and returns what it printed on stdout, also when it fails
// (compose version prints before it fails); its stderr goes into the error.
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
