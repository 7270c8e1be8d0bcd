package stack

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/sharness-ai/sharness/host/engine"
)

// Row is one service of the stack as Status sees it.
type Row struct {
	Service   string `json:"service"`
	Container string `json:"container,omitempty"`
	State     string `json:"state"`
	Health    string `json:"health,omitempty"`
	Runtime   string `json:"runtime,omitempty"`
	ExitCode  *int   `json:"exit_code,omitempty"` // set when the container has exited
	Component bool   `json:"component"`           // a SHarness component of the manifest
	Problem   string `json:"problem,omitempty"`
}

// Status joins compose's containers of p with p.Policy's components and each component's
// runtime, in service order: a row per service, and one (state "absent") per component without
// a container. Problem says what is wrong with a component's row, if anything.
func (p Project) Status(ctx context.Context) ([]Row, error) {
	ps, err := p.Engine.ComposePS(ctx, p.compose())
	if err != nil {
		return nil, err
	}
	component, seen := map[string]bool{}, map[string]bool{}
	for _, c := range p.Policy.Components {
		component[c.Name] = true
	}
	var rows []Row
	for _, c := range ps {
		r := Row{Service: c.Service, Container: c.Name, State: c.State, Health: c.Health, Component: component[c.Service]}
		if c.State == "exited" {
			r.ExitCode = &c.ExitCode
		}
		if r.Component {
			seen[c.Service] = true
			if r.Runtime, err = p.Engine.ContainerRuntime(ctx, c.ID); err != nil {
				r.Problem = err.Error()
			}
		}
		rows = append(rows, r)
	}
	for name := range component {
		if !seen[name] {
			rows = append(rows, Row{Service: name, State: "absent", Component: true})
		}
	}
	for i := range rows {
		if rows[i].Problem == "" {
			rows[i].Problem = judge(rows[i])
		}
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].Service < rows[j].Service })
	return rows, nil
}

// judge says what is wrong with a service's container, or "". Every component but the agent
// (started on its own, after up) must be running, healthy when it has a healthcheck, and any
// component's container must run under runtime sharness, the shim that enforces its policy. Any
// service's container that exited with a code other than 0, or is dead, has failed: the agent's
// exit code is its verdict (the demo agent's report, Claude Code's own), and a run that failed
// must not read as ok.
func judge(r Row) string {
	required := r.Component && r.Service != AgentService
	var bad []string
	switch {
	case r.State == "exited" && r.ExitCode != nil && *r.ExitCode != 0:
		bad = append(bad, fmt.Sprintf("exited with code %d", *r.ExitCode))
	case r.State == "dead":
		bad = append(bad, "dead")
	case required && r.State == "absent":
		bad = append(bad, "not created")
	case required && r.State != "running":
		bad = append(bad, "state "+r.State)
	case required && r.Health != "" && r.Health != "healthy":
		bad = append(bad, "health "+r.Health)
	}
	if r.Component && r.State != "absent" && r.Runtime != "sharness" {
		bad = append(bad, fmt.Sprintf("runtime %q, not sharness", r.Runtime))
	}
	return strings.Join(bad, "; ")
}

// Downed is what Down did beyond compose's own progress, and what it kept.
type Downed struct {
	Removed []string `json:"removed"` // containers and networks that compose's down leaves (docker compose run's), removed by their labels
	Kept    []string `json:"kept"`    // the project's volumes, the audit record and the gate's state among them; none with volumes
}

// DownOptions are what Down may be told.
type DownOptions struct {
	Volumes bool          // delete the project's volumes too, the audit record with them
	Settle  time.Duration // how long what is left may take to go (0: 15 s), retried every half second
}

// stopTimeout is how long a container Down stops itself has between SIGTERM and SIGKILL:
// compose's own default, the time a component takes to sign its log's shutdown checkpoint.
const stopTimeout = 10 * time.Second

// Down stops and removes every container and network of p, compose's progress going to
// p.Progress, and with o.Volumes every volume too, the audit record with them. It finds them by
// compose's project label, not by p's files: `docker compose down` leaves the containers
// `docker compose run` started (the agent, as up says to start it) and the networks they hold,
// and reports success. So Down first stops those run containers (the agent stops before the
// components it talks to, whose logs then record its last requests), then runs compose's down,
// then removes whatever of the project is still there until nothing is (a `run --rm` container
// the engine is still removing holds its networks a moment), and refuses, naming it, if
// something still is after o.Settle. A compose down that fails (its files cannot be read here)
// is reported and the labels do the work. Without volumes it returns the volumes it kept.
func (p Project) Down(ctx context.Context, o DownOptions) (Downed, error) {
	d := Downed{Removed: []string{}, Kept: []string{}}
	if !IsProject(p.Name) { // the label filter below must name one project, never match more
		return d, fmt.Errorf("--project %q is not a compose project name", p.Name)
	}
	settle := o.Settle
	if settle <= 0 {
		settle = 15 * time.Second
	}
	seen := map[string]bool{} // what Down stopped or removed itself, by container ID or network name
	cs, err := p.Engine.ProjectContainers(ctx, p.Name)
	if err != nil {
		return d, err
	}
	last := p.removeContainers(ctx, &d, seen, slices.DeleteFunc(cs, func(c engine.Container) bool { return !c.OneOff }))
	if err := p.Engine.ComposeDown(ctx, p.compose(), o.Volumes, p.Progress); err != nil {
		fmt.Fprintf(p.Progress, "down: %v: removing what is left of %s by its labels\n", err, p.Name)
	}
	// At least one round of removal before the deadline is judged: on a loaded host the first
	// look alone can take longer than a short settle.
	for deadline, rounds := time.Now().Add(settle), 0; ; rounds++ {
		cs, nets, err := p.left(ctx)
		if err != nil {
			return d, err
		}
		if len(cs) == 0 && len(nets) == 0 {
			break
		}
		if rounds > 0 && time.Now().After(deadline) {
			var left []string
			for _, c := range cs {
				left = append(left, "container "+c.Name)
			}
			for _, n := range nets {
				left = append(left, "network "+n)
			}
			err := fmt.Errorf("down: %s is not gone: %s still there after %s (docker ps -a, docker network ls --filter label=com.docker.compose.project=%s)", p.Name, strings.Join(left, ", "), settle, p.Name)
			if last != nil {
				err = fmt.Errorf("%w: %w", err, last)
			}
			return d, refused{err}
		}
		last = p.removeContainers(ctx, &d, seen, cs)
		for _, n := range nets {
			if !seen["network "+n] {
				seen["network "+n] = true
				d.Removed = append(d.Removed, n)
				fmt.Fprintf(p.Progress, "down: removing network %s, which docker compose down left\n", n)
			}
		}
		// A network a container still holds fails: the next round retries, and the deadline names it.
		last = errors.Join(last, p.Engine.RemoveNetwork(ctx, nets...))
		select {
		case <-ctx.Done():
			return d, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	vols, err := p.keptVolumes(ctx)
	if err != nil {
		return d, err
	}
	if !o.Volumes {
		d.Kept = vols
		return d, nil
	}
	if err := p.Engine.RemoveVolumes(ctx, vols...); err != nil {
		return d, refused{err}
	}
	if vols, err = p.keptVolumes(ctx); err != nil {
		return d, err
	}
	if len(vols) > 0 {
		return d, refused{fmt.Errorf("down: volumes of %s still there: %s", p.Name, strings.Join(vols, ", "))}
	}
	return d, nil
}

// left is what of p the engine still has: containers, and networks.
func (p Project) left(ctx context.Context) ([]engine.Container, []string, error) {
	cs, err := p.Engine.ProjectContainers(ctx, p.Name)
	if err != nil {
		return nil, nil, err
	}
	nets, err := p.Engine.ProjectNetworks(ctx, p.Name)
	return cs, nets, err
}

// removeContainers stops the containers of cs Down has not stopped yet (SIGTERM first:
// components sign their logs at shutdown), saying so, and removes all of cs. Its error is only
// for Down's refusal: one the engine is already removing (a `run --rm` container, once stopped)
// fails `docker rm` and is gone a moment later, so what counts is what is still there.
func (p Project) removeContainers(ctx context.Context, d *Downed, seen map[string]bool, cs []engine.Container) error {
	var fresh, ids []string
	for _, c := range cs {
		ids = append(ids, c.ID)
		if seen[c.ID] {
			continue
		}
		seen[c.ID] = true
		how := "which docker compose down left"
		if c.OneOff {
			how = "started by docker compose run"
		}
		fmt.Fprintf(p.Progress, "down: stopping and removing container %s (service %s, %s, %s)\n", c.Name, orDash(c.Service), c.State, how)
		fresh = append(fresh, c.ID)
		d.Removed = append(d.Removed, c.Name)
	}
	if len(ids) == 0 {
		return nil
	}
	return errors.Join(p.Engine.StopContainers(ctx, stopTimeout, fresh...), p.Engine.RemoveContainer(ctx, ids...))
}

// keptVolumes is every volume of p: those compose labelled as the project's, and the audit and
// gate volumes by name (the ones audit verify and pending read), sorted.
func (p Project) keptVolumes(ctx context.Context) ([]string, error) {
	vols, err := p.Engine.ProjectVolumes(ctx, p.Name)
	if err != nil {
		return nil, err
	}
	for _, kind := range []string{"audit", "gate"} {
		names, err := p.Engine.Volumes(ctx, p.Name+"_"+kind+"-")
		if err != nil {
			return nil, err
		}
		vols = append(vols, names...)
	}
	slices.Sort(vols)
	return slices.Compact(vols), nil
}
