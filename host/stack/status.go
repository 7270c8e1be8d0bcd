package stack

import (
	"context"
	"fmt"
	"sort"
)

// Row is one service of the stack as Status sees it.
type Row struct {
	Service   string `json:"service"`
	Container string `json:"container,omitempty"`
	State     string `json:"state"`
	Health    string `json:"health,omitempty"`
	Runtime   string `json:"runtime,omitempty"`
	Component bool   `json:"component"` // a SHarness component of the manifest
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

// judge says what is wrong with a component's container, or "". Every component but the agent
// (started on its own, after up) must be running, healthy when it has a healthcheck, and any
// component's container must run under runtime sharness, the shim that enforces its policy.
func judge(r Row) string {
	required := r.Service != AgentService
	switch {
	case !r.Component:
		return ""
	case r.State == "absent":
		if required {
			return "not created"
		}
		return ""
	case required && r.State != "running":
		return "state " + r.State
	case required && r.Health != "" && r.Health != "healthy":
		return "health " + r.Health
	case r.Runtime != "sharness":
		return fmt.Sprintf("runtime %q, not sharness", r.Runtime)
	}
	return ""
}

// Down stops and removes p's containers and networks, compose's progress going to p.Progress,
// and with volumes its volumes too, the audit record with them. Without volumes it returns the
// audit and gate volumes it kept.
func (p Project) Down(ctx context.Context, volumes bool) ([]string, error) {
	if err := p.Engine.ComposeDown(ctx, p.compose(), volumes, p.Progress); err != nil {
		return nil, refused{err}
	}
	kept := []string{}
	if volumes {
		return kept, nil
	}
	for _, kind := range []string{"audit", "gate"} {
		names, err := p.Engine.Volumes(ctx, p.Name+"_"+kind+"-")
		if err != nil {
			return nil, err
		}
		kept = append(kept, names...)
	}
	return kept, nil
}
