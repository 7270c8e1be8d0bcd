// Package stack is what sharness-ai does to the stack on the host: the artefacts compile writes
// and up checks (Build, CheckCompiled), the install-time steps (Install, PrepareWorkspace), and a
// running compose project's steps (Up, Status, Down), volumes and kms bundle. The verbs of
// host/cli call it; it reaches the engine through host/engine.
//
// What it does not guarantee: Status and Up report what the engine says, and whoever controls
// the engine can make it say anything; the runtime shim, not this package, holds each container
// to its compiled policy. The kms bundle read from the logs is the running kms's word, and the
// policy hash in it is what that kms claims to serve.
package stack

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"

	"github.com/sharness-ai/sharness/host/engine"
	"github.com/sharness-ai/sharness/policies/pbp"
)

// Project is one compose project of the stack on the host's engine.
type Project struct {
	Engine   *engine.Docker
	Name     string
	Files    []string      // compose files; none: compose's own choice
	Policy   *pbp.Manifest // the manifest it runs: Up and Status need it
	Progress io.Writer     // where Up and Down say what they do as they go
	// Override is the agent's override file Up wrote for UpOptions.Agent (also in Files), alone
	// in a folder of its own that the person removes with the stack; "" for none.
	Override string
}

func (p Project) compose() engine.Project { return engine.Project{Name: p.Name, Files: p.Files} }

// ComposeProject is p as the engine's compose verbs name it.
func (p Project) ComposeProject() engine.Project { return p.compose() }

// Run runs the agent of p once p is up (`docker compose run --rm --no-deps agent args`), on a
// terminal when tty, with env after the process's and SHARNESS_AI_POLICY_HASH set to p's, and
// returns its exit status.
func (p Project) Run(ctx context.Context, env, args []string, tty bool, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	return p.Engine.ComposeRun(ctx, p.compose(), append(withPolicyHash(p.Policy.Hash), env...), AgentService, args, tty, stdin, stdout, stderr)
}

// AgentService is the agent's service in the compose file: up leaves it to the person to start.
const AgentService = "agent"

// Launcher is the launcher's name in the shipped policies: its log holds the session record,
// and its "session started" line the policy the session runs.
const Launcher = "launcher"

// projectName is docker compose's rule for project names.
var projectName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)

// IsProject reports whether name is a valid compose project name.
func IsProject(name string) bool { return projectName.MatchString(name) }

// refused marks an error as a failed check (sharness-ai exits 1) rather than bad input (2).
type refused struct{ error }

func (r refused) Unwrap() error { return r.error }

// Refused says the error is a failed check.
func (refused) Refused() bool { return true }

// AgentCommand is the command line that starts the agent of p once p is up.
func (p Project) AgentCommand() []string {
	args := []string{"docker", "compose", "-p", p.Name}
	for _, f := range p.Files {
		args = append(args, "-f", f)
	}
	return append(args, "run", "--rm", AgentService)
}

// Volume is one component's volume of a compose project, and its folder on the host.
type Volume struct{ Component, Dir string }

// Volumes finds p's volumes <project>_<kind>-<component> (kind audit or gate) and their
// mountpoints, in component order. Their files are root's on the host.
func (p Project) Volumes(ctx context.Context, kind string) ([]Volume, error) {
	if !IsProject(p.Name) {
		return nil, fmt.Errorf("--project %q is not a compose project name", p.Name)
	}
	prefix := p.Name + "_" + kind + "-"
	names, err := p.Engine.Volumes(ctx, prefix)
	if err != nil {
		return nil, err
	}
	var vols []Volume
	for _, name := range names {
		comp := strings.TrimPrefix(name, prefix)
		if !pbp.ValidComponentName(comp) { // a volume whose name ends otherwise is no component's
			continue
		}
		dir, err := p.Engine.VolumeMountpoint(ctx, name)
		if err != nil {
			return nil, err
		}
		vols = append(vols, Volume{comp, dir})
	}
	if len(vols) == 0 {
		return nil, fmt.Errorf("no volume %s<component> (docker volume ls): is the project name right?", prefix)
	}
	slices.SortFunc(vols, func(a, b Volume) int { return strings.Compare(a.Component, b.Component) })
	return vols, nil
}

// Running is the set of p's services with a running container, found by compose's project label
// (without p's files).
func (p Project) Running(ctx context.Context) (map[string]bool, error) {
	if !IsProject(p.Name) {
		return nil, fmt.Errorf("--project %q is not a compose project name", p.Name)
	}
	cs, err := p.Engine.ProjectContainers(ctx, p.Name)
	if err != nil {
		return nil, err
	}
	running := map[string]bool{}
	for _, c := range cs {
		if c.State == "running" {
			running[c.Service] = true
		}
	}
	return running, nil
}
