package stack

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sharness-ai/sharness/host/engine"
	"github.com/sharness-ai/sharness/policies/pbp"
	"github.com/sharness-ai/sharness/testkit/enginetest"
)

func defaultPolicy(t *testing.T) *pbp.Manifest {
	t.Helper()
	m, err := pbp.Load(os.DirFS(filepath.Join(repoRoot, "policies", "default")), "manifest.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestJudge: each reason a row fails, and the rows that do not. An exited container's code is
// the verdict for every service, the agent and services that are not components included.
func TestJudge(t *testing.T) {
	code := func(n int) *int { return &n }
	for _, tc := range []struct {
		name string
		row  Row
		want string
	}{
		{"component running", Row{Service: "kms", State: "running", Runtime: "sharness", Component: true}, ""},
		{"component healthy", Row{Service: "fs", State: "running", Health: "healthy", Runtime: "sharness", Component: true}, ""},
		{"component starting", Row{Service: "fs", State: "running", Health: "starting", Runtime: "sharness", Component: true}, "health starting"},
		{"component absent", Row{Service: "kms", State: "absent", Component: true}, "not created"},
		{"component exited 0", Row{Service: "kms", State: "exited", ExitCode: code(0), Runtime: "sharness", Component: true}, "state exited"},
		{"component killed", Row{Service: "kms", State: "exited", ExitCode: code(137), Runtime: "sharness", Component: true}, "exited with code 137"},
		{"component under runc", Row{Service: "net", State: "running", Runtime: "runc", Component: true}, `runtime "runc", not sharness`},
		{"agent absent", Row{Service: "agent", State: "absent", Component: true}, ""},
		{"agent running", Row{Service: "agent", State: "running", Runtime: "sharness", Component: true}, ""},
		{"agent exited 0", Row{Service: "agent", State: "exited", ExitCode: code(0), Runtime: "sharness", Component: true}, ""},
		{"agent exited 1", Row{Service: "agent", State: "exited", ExitCode: code(1), Runtime: "sharness", Component: true}, "exited with code 1"},
		{"agent exited 1 under runc", Row{Service: "agent", State: "exited", ExitCode: code(1), Runtime: "runc", Component: true}, `exited with code 1; runtime "runc", not sharness`},
		{"agent dead", Row{Service: "agent", State: "dead", Runtime: "sharness", Component: true}, "dead"},
		{"world running", Row{Service: "world", State: "running"}, ""},
		{"world exited 2", Row{Service: "world", State: "exited", ExitCode: code(2)}, "exited with code 2"},
		{"world exited 0", Row{Service: "world", State: "exited", ExitCode: code(0)}, ""},
	} {
		if got := judge(tc.row); got != tc.want {
			t.Errorf("%s: judge = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// fakeProject is a project's containers, networks and volumes on a fake engine (e), whose
// compose plugin answers ps and down; downAt is how many API requests came before compose down.
type fakeProject struct {
	ps     []string // compose ps lines
	e      *enginetest.Engine
	downAt int
}

// onEngine is project demo's cs, nets and vols (other_ ones are another project's) on a fake
// engine, labelled as compose labels them.
func onEngine(cs []engine.Container, nets, vols []string) *enginetest.Engine {
	e := &enginetest.Engine{}
	label := func(name string) map[string]string {
		project, _, _ := strings.Cut(name, "_")
		return map[string]string{"com.docker.compose.project": strings.Split(project, "-")[0]}
	}
	for _, c := range cs {
		l := label(c.Name)
		l["com.docker.compose.service"], l["com.docker.compose.oneoff"] = c.Service, map[bool]string{true: "True", false: "False"}[c.OneOff]
		e.Containers = append(e.Containers, enginetest.Container{ID: c.ID, Name: c.Name, State: c.State, Labels: l, Runtime: "sharness"})
	}
	for _, n := range nets {
		e.Networks = append(e.Networks, enginetest.Network{Name: n, Labels: label(n)})
	}
	for _, v := range vols {
		e.Volumes = append(e.Volumes, enginetest.Volume{Name: v, Labels: label(v)})
	}
	return e
}

func (f *fakeProject) run(_ context.Context, c engine.Command) error {
	a := c.Args
	switch {
	case a[0] == "compose" && slices.Contains(a, "ps"):
		fmt.Fprint(c.Stdout, strings.Join(f.ps, "\n"))
	case a[0] == "compose" && slices.Contains(a, "down"):
		f.downAt = len(f.e.Requests())
		f.e.Lock()
		defer f.e.Unlock()
		held := false
		f.e.Containers = slices.DeleteFunc(f.e.Containers, func(c enginetest.Container) bool {
			oneOff := c.Labels["com.docker.compose.oneoff"] == "True"
			held = held || oneOff
			return !oneOff
		})
		if !held {
			f.e.Networks = nil
		}
	default:
		return fmt.Errorf("docker %s: not faked", strings.Join(a, " "))
	}
	return nil
}

// TestDown: the run agent and the networks it holds, which compose's down leaves, are removed;
// the agent is stopped before compose stops the rest; the volumes are kept and listed.
func TestDown(t *testing.T) {
	f := &fakeProject{e: onEngine([]engine.Container{{ID: "c1", Name: "demo-kms-1", State: "running", Service: "kms"},
		{ID: "c2", Name: "demo-agent-run-1a2b", State: "running", Service: "agent", OneOff: true}},
		[]string{"demo_edge-agent-bash", "demo_edge-agent-fs", "demo_edge-agent-llm", "demo_edge-agent-net"},
		[]string{"demo_audit-kms", "demo_gate-fs", "other_audit-kms"})}
	var progress bytes.Buffer
	p := Project{Engine: f.e.Start(t, f.run), Name: "demo", Progress: &progress}
	d, err := p.Down(context.Background(), DownOptions{})
	if err != nil {
		t.Fatalf("Down: %v\n%s", err, progress.String())
	}
	want := Downed{Removed: []string{"demo-agent-run-1a2b"}, Kept: []string{"demo_audit-kms", "demo_gate-fs"}}
	if diff := cmp.Diff(want, d); diff != "" {
		t.Errorf("Down (-want +got):\n%s", diff)
	}
	reqs := f.e.Requests()
	if i := slices.Index(reqs, "POST /containers/c2/stop?t=10"); i < 0 || f.downAt < i+1 {
		t.Errorf("the run agent was not stopped before compose's down (after request %d): %q", f.downAt, reqs)
	}
	f.e.Lock()
	cs, nets := f.e.Containers, f.e.Networks
	f.e.Unlock()
	if len(cs) > 0 || len(nets) > 0 {
		t.Errorf("left: %v, %v", cs, nets)
	}

	if _, err := (Project{Engine: f.e.Start(t, f.run), Name: ""}).Down(context.Background(), DownOptions{}); err == nil {
		t.Error("Down of no project name went on: its label filter would not name one project")
	}
}

// TestRunning: the services with a running container, run containers included, by label.
func TestRunning(t *testing.T) {
	e := onEngine([]engine.Container{{ID: "1", Name: "demo-kms-1", State: "running", Service: "kms"},
		{ID: "2", Name: "demo-net-1", State: "exited", Service: "net"}, {ID: "3", Name: "demo-agent-run-1", State: "running", Service: "agent", OneOff: true},
		{ID: "4", Name: "other-kms-1", State: "running", Service: "kms"}}, nil, nil)
	got, err := Project{Engine: e.Start(t, nil), Name: "demo"}.Running(context.Background())
	if err != nil || !cmp.Equal(got, map[string]bool{"kms": true, "agent": true}) {
		t.Errorf("Running = %v, %v", got, err)
	}
}

// TestSealCommand: with a kms, the one line that seals each llm's key to it, reading the key
// into the shell and piping it, never in argv; without a kms, nothing.
func TestSealCommand(t *testing.T) {
	m := defaultPolicy(t)
	p := Project{Name: "demo", Policy: m}
	want := `sharness-ai kms bundle -p demo --wait 30s --out /tmp/kms.json && read -rsp 'anthropic-api-key: ' KEY && echo && printf %s "$KEY" | sharness-ai secret seal --to /tmp/kms.json anthropic-api-key; unset KEY`
	if got := p.SealCommand(); got != want {
		t.Errorf("SealCommand =\n%s\nwant\n%s", got, want)
	}
	m.Component("llm").Business.LLM.KeySecret = ""
	if got := p.SealCommand(); !strings.Contains(got, "secret seal --to /tmp/kms.json NAME") {
		t.Errorf("without a key_secret: %s", got)
	}
	m.Components = slices.DeleteFunc(m.Components, func(c *pbp.Component) bool { return c.Kind == pbp.KindKMS })
	if got := p.SealCommand(); got != "" {
		t.Errorf("without a kms: %q, want nothing", got)
	}
}
