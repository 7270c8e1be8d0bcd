package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Project is a compose project: its name and its compose files. An empty name or no files
// leave the choice to compose (COMPOSE_PROJECT_NAME, the folder's compose file).
type Project struct {
	Name  string
	Files []string
}

func (p Project) args(rest ...string) []string {
	args := []string{"compose"}
	if p.Name != "" {
		args = append(args, "-p", p.Name)
	}
	for _, f := range p.Files {
		args = append(args, "-f", f)
	}
	return append(args, rest...)
}

// Container is one container as the engine describes it.
type Container struct {
	ID, Name, Service, State, Health string
	ExitCode                         int  // the exit code of an exited container
	OneOff                           bool // started by `docker compose run`, not by up
}

// ComposeImages returns the image of each service of the project, as compose resolves the files
// with env (nil: the process environment) for interpolation.
func (d *Docker) ComposeImages(ctx context.Context, p Project, env []string) (map[string]string, error) {
	out, err := d.output(ctx, env, p.args("config", "--format", "json")...)
	if err != nil {
		return nil, err
	}
	var c struct {
		Services map[string]struct {
			Image string `json:"image"`
		} `json:"services"`
	}
	if err := json.Unmarshal(out, &c); err != nil {
		return nil, fmt.Errorf("read docker compose config output: %w", err)
	}
	images := map[string]string{}
	for name, s := range c.Services {
		images[name] = s.Image
	}
	return images, nil
}

// ComposeUp creates and starts services of the project in the background, never pulling an
// image; compose's own progress goes to out. env is as for ComposeImages.
func (d *Docker) ComposeUp(ctx context.Context, p Project, env, services []string, out io.Writer) error {
	return d.stream(ctx, env, out, out, p.args(append([]string{"up", "--detach", "--pull", "never"}, services...)...)...)
}

// ComposePS returns every container of the project, running or not.
func (d *Docker) ComposePS(ctx context.Context, p Project) ([]Container, error) {
	out, err := d.output(ctx, nil, p.args("ps", "--all", "--format", "json")...)
	if err != nil {
		return nil, err
	}
	cs, err := parsePS(out)
	if err != nil {
		return nil, fmt.Errorf("read docker compose ps output: %w", err)
	}
	return cs, nil
}

// parsePS reads compose's ps output: one JSON object per line (v2.21 on), or one array (before).
func parsePS(data []byte) ([]Container, error) {
	var rows []Container
	if t := bytes.TrimSpace(data); len(t) > 0 && t[0] == '[' {
		err := json.Unmarshal(t, &rows)
		return rows, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	for {
		var r Container
		if err := dec.Decode(&r); err == io.EOF {
			return rows, nil
		} else if err != nil {
			return nil, err
		}
		rows = append(rows, r)
	}
}

// ComposeLogs returns what the service's containers printed, without compose's prefix: the last
// tail lines, or all of it when tail is 0.
func (d *Docker) ComposeLogs(ctx context.Context, p Project, service string, tail int) ([]byte, error) {
	args := []string{"logs", "--no-log-prefix"}
	if tail > 0 {
		args = append(args, "--tail", fmt.Sprint(tail))
	}
	out, err := d.output(ctx, nil, p.args(append(args, service)...)...)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ComposeDown stops and removes the project's containers and networks, those of services no
// longer in its files too (--remove-orphans), and with volumes its volumes as well; compose's own
// progress goes to out. Compose leaves `docker compose run` containers, and the networks they
// hold, in place: ProjectContainers and ProjectNetworks find them.
func (d *Docker) ComposeDown(ctx context.Context, p Project, volumes bool, out io.Writer) error {
	args := p.args("down", "--remove-orphans")
	if volumes {
		args = append(args, "--volumes")
	}
	return d.stream(ctx, nil, out, out, args...)
}

// ComposeRun runs a one-off container of service with args (`docker compose run --rm
// --no-deps`), wired to stdin, stdout and stderr, on a terminal when tty, and returns its exit
// code. A command that ran and exited non-zero is a code, not an error; the error is for a
// docker CLI that could not be started at all. env is as for ComposeImages.
func (d *Docker) ComposeRun(ctx context.Context, p Project, env []string, service string, args []string, tty bool, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	rest := []string{"run", "--rm", "--no-deps"}
	if !tty {
		rest = append(rest, "-T")
	}
	rest = append(append(rest, service), args...)
	err := d.run(ctx, Command{Args: p.args(rest...), Env: env, Stdin: stdin, Stdout: stdout, Stderr: stderr})
	var code interface{ ExitCode() int }
	switch {
	case err == nil:
		return 0, nil
	case errors.As(err, &code) && code.ExitCode() > 0:
		return code.ExitCode(), nil
	default:
		return -1, &Error{Command: commandLine(p.args(rest...)), Err: err}
	}
}

// ComposeVersion is what compose says of its version, trimmed, also when it fails.
func (d *Docker) ComposeVersion(ctx context.Context) (string, error) {
	out, err := d.output(ctx, nil, "compose", "version")
	return strings.TrimSpace(string(out)), err
}
