package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sharness-ai/sharness/internal/artefact"
	"github.com/sharness-ai/sharness/policies/compile"
	"github.com/sharness-ai/sharness/policies/pbp"
)

// dockerCmd is one run of the docker CLI. A nil env means the process environment.
type dockerCmd struct {
	args           []string
	env            []string
	stdout, stderr io.Writer
}

// runDocker runs the docker CLI. Tests replace it, so up, status and down are testable without
// Docker, as composeLogs is for `kms bundle`.
var runDocker = func(ctx context.Context, d dockerCmd) error {
	cmd := exec.CommandContext(ctx, "docker", d.args...)
	cmd.Env, cmd.Stdout, cmd.Stderr = d.env, d.stdout, d.stderr
	return cmd.Run()
}

// confirmInput is where `up` reads the person's confirmation of the policy hash. Tests replace it.
var confirmInput io.Reader = os.Stdin

// dockerCapture runs docker through runDocker and returns what it printed on stdout.
func dockerCapture(ctx context.Context, env []string, args ...string) ([]byte, error) {
	var out, errOut bytes.Buffer
	if err := runDocker(ctx, dockerCmd{args: args, env: env, stdout: &out, stderr: &errOut}); err != nil {
		return nil, fmt.Errorf("docker %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(errOut.String()))
	}
	return out.Bytes(), nil
}

// composeArgs is `compose -p P [-f F]...` followed by rest.
func composeArgs(project string, files []string, rest ...string) []string {
	args := []string{"compose", "-p", project}
	for _, f := range files {
		args = append(args, "-f", f)
	}
	return append(args, rest...)
}

// withPolicyHash is the process environment, which compose needs for interpolation (hack/up.sh's
// SHARNESS_AI_WORKSPACE, SHARNESS_AI_SECRETS_DIR...), with SHARNESS_AI_POLICY_HASH set to m.
func withPolicyHash(m string) []string {
	env := []string{}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SHARNESS_AI_POLICY_HASH=") {
			env = append(env, kv)
		}
	}
	return append(env, "SHARNESS_AI_POLICY_HASH="+m)
}

func projectFlag(c *cobra.Command, p *string) {
	c.Flags().StringVarP(p, "project", "p", envOr("COMPOSE_PROJECT_NAME", "sharness"), "compose project name (env COMPOSE_PROJECT_NAME)")
}

func checkProject(p string) error {
	if !projectName.MatchString(p) {
		return fmt.Errorf("--project %q: lower-case letters, digits, '-' and '_', starting with a letter or digit", p)
	}
	return nil
}

// agentService is the agent's service in the compose file: up leaves it to the person to start.
const agentService = "agent"

func (a *app) upCmd() *cobra.Command {
	var project, want, agent string
	var extra []string
	var yes, started bool
	timeout := 3 * time.Minute
	c := &cobra.Command{
		Use:   "up",
		Short: "Check the compiled stack, confirm its policy hash, start every service but the agent, and show their health",
		Long: "Refuses unless docker-compose.yml and compiled/ are exactly what the manifest (env SHARNESS_AI_MANIFEST)\n" +
			"compiles to. The policy hash M must equal --policy-hash (or SHARNESS_AI_POLICY_HASH); without one, up\n" +
			"prints M and reads its first 12 hex digits from stdin. It prints a line per image (present, its ID and\n" +
			"size) and refuses if one is missing (hack/build-images.sh builds them; up never pulls). Then it runs\n" +
			"`docker compose up --detach --pull never` with SHARNESS_AI_POLICY_HASH=M, prints a line per container\n" +
			"as it becomes running and healthy, refuses (with the last log lines of what is not) when one exits, is\n" +
			"unhealthy or is not ready within --timeout, and prints `status`. Start the agent yourself afterwards.\n" +
			"--agent IMAGE writes a compose file that runs the local IMAGE, with its own entrypoint and command, as\n" +
			"the agent, and prints the command that starts it: the agent's confinement and policy are unchanged.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkProject(project); err != nil {
				return err
			}
			if want != "" {
				if err := pbp.CheckHash(want); err != nil {
					return err
				}
			}
			if timeout <= 0 {
				return fmt.Errorf("--timeout %s: want a positive duration", timeout)
			}
			m, err := a.checkStack()
			if err != nil {
				return err
			}
			switch {
			case want != "" && want != m.Hash:
				return refused{fmt.Errorf("policy hash mismatch: the manifest is %s, the supplied hash is %s: nothing started", m.Hash, want)}
			case want != "":
				fmt.Fprintf(a.errOut, "up: policy %s, as supplied\n", m.Hash)
			case yes:
				fmt.Fprintf(a.errOut, "up: WARNING: --yes: policy %s was NOT confirmed by a person\n", m.Hash)
			default:
				if err := confirmHash(confirmInput, a.errOut, m.Hash); err != nil {
					return err
				}
			}
			ctx, env := cmd.Context(), withPolicyHash(m.Hash)
			files := append([]string{"docker-compose.yml"}, extra...)
			if agent != "" {
				override, err := a.agentOverride(ctx, m, agentService, agent)
				if err != nil {
					return err
				}
				files = append(files, override)
				defer func() { // kept for the person only when the stack is up
					if !started {
						os.RemoveAll(filepath.Dir(override))
					}
				}()
			}
			services, images, err := composeImages(ctx, env, project, files)
			if err != nil {
				return err
			}
			if err := a.checkImages(ctx, services, images); err != nil {
				return err
			}
			services = slices.DeleteFunc(services, func(s string) bool { return s == agentService })
			if err := a.startAndWait(ctx, env, project, files, services, timeout); err != nil {
				a.status(ctx, m, project, files) // show what did start; the up failure is the error
				return err
			}
			started = true
			if err := a.status(ctx, m, project, files); err != nil {
				return err
			}
			start := append([]string{"docker"}, composeArgs(project, files, "run", "--rm", agentService)...)
			fmt.Fprintf(a.errOut, "up: %s is up; start the agent with:\n  SHARNESS_AI_POLICY_HASH=%s %s\n", project, m.Hash, strings.Join(start, " "))
			return nil
		},
	}
	projectFlag(c, &project)
	c.Flags().StringVar(&want, "policy-hash", os.Getenv("SHARNESS_AI_POLICY_HASH"), "the hash you trust (env SHARNESS_AI_POLICY_HASH); without it, up asks you to confirm")
	c.Flags().BoolVar(&yes, "yes", false, "start without a person confirming the hash (warns)")
	c.Flags().StringSliceVarP(&extra, "file", "f", nil, "an extra compose file after docker-compose.yml, repeatable (e.g. compose/world.yml)")
	c.Flags().StringVar(&agent, "agent", "", "run this local image as the agent (its own entrypoint and command; the agent's policy and confinement unchanged)")
	c.Flags().DurationVar(&timeout, "timeout", timeout, "how long every container may take to be running and healthy")
	return c
}

// checkStack loads the manifest and refuses, naming each file, if the committed compose file or
// compiled/ differ from what it compiles to: what compile --check does.
func (a *app) checkStack() (*pbp.Manifest, error) {
	m, files, err := a.build(".", "sharness")
	if err != nil {
		return nil, err
	}
	drift, err := artefact.Check(".", files, compile.Dir)
	if err != nil {
		return nil, err
	}
	for _, d := range drift {
		fmt.Fprintf(a.errOut, "drift: %s: %s\n", d.Path, d.Reason)
	}
	if len(drift) > 0 {
		return nil, refused{fmt.Errorf("%d compiled files drifted from the manifest: nothing started; run sharness-ai compile", len(drift))}
	}
	return m, nil
}

// confirmHash shows m and wants its first 12 hex digits back: a person reads the hash, rather
// than a script passing whatever the folder holds.
func confirmHash(in io.Reader, w io.Writer, m string) error {
	hex := strings.TrimPrefix(m, "sha256:")
	if len(hex) < 12 {
		return fmt.Errorf("policy hash %q is too short to confirm", m)
	}
	fmt.Fprintf(w, "up: policy %s\nup: type the hash's first 12 hex digits to confirm: ", m)
	line, err := bufio.NewReader(in).ReadString('\n')
	if err != nil && line == "" {
		return refused{errors.New("no confirmation on stdin: nothing started (supply --policy-hash, or --yes)")}
	}
	if got := strings.ToLower(strings.TrimSpace(line)); got != hex[:12] {
		return refused{fmt.Errorf("confirmation %q is not the start of policy %s: nothing started", got, m)}
	}
	return nil
}

// psRow is the part of a `docker compose ps --format json` object status reads.
type psRow struct {
	ID, Name, Service, State, Health string
}

// parsePS reads compose's ps output: one JSON object per line (v2.21 on), or one array (before).
func parsePS(data []byte) ([]psRow, error) {
	var rows []psRow
	if t := bytes.TrimSpace(data); len(t) > 0 && t[0] == '[' {
		err := json.Unmarshal(t, &rows)
		return rows, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	for {
		var r psRow
		if err := dec.Decode(&r); err == io.EOF {
			return rows, nil
		} else if err != nil {
			return nil, err
		}
		rows = append(rows, r)
	}
}

// stackRow is one line of status.
type stackRow struct {
	Service   string `json:"service"`
	Container string `json:"container,omitempty"`
	State     string `json:"state"`
	Health    string `json:"health,omitempty"`
	Runtime   string `json:"runtime,omitempty"`
	Component bool   `json:"component"` // a SHarness component of the manifest
	Problem   string `json:"problem,omitempty"`
}

// judge says what is wrong with a component's container, or "". Every component but the agent
// (started on its own, after up) must be running, healthy when it has a healthcheck, and any
// component's container must run under runtime sharness, the shim that enforces its policy.
func judge(r stackRow) string {
	required := r.Service != "agent"
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

// stackRows joins compose's ps rows with the manifest's components and each container's runtime.
func stackRows(ctx context.Context, m *pbp.Manifest, project string, files []string) ([]stackRow, error) {
	out, err := dockerCapture(ctx, nil, composeArgs(project, files, "ps", "--all", "--format", "json")...)
	if err != nil {
		return nil, err
	}
	ps, err := parsePS(out)
	if err != nil {
		return nil, fmt.Errorf("read docker compose ps output: %w", err)
	}
	component, seen := map[string]bool{}, map[string]bool{}
	for _, c := range m.Components {
		component[c.Name] = true
	}
	var rows []stackRow
	for _, p := range ps {
		r := stackRow{Service: p.Service, Container: p.Name, State: p.State, Health: p.Health, Component: component[p.Service]}
		if r.Component {
			seen[p.Service] = true
			rt, err := dockerCapture(ctx, nil, "inspect", "-f", "{{.HostConfig.Runtime}}", p.ID)
			if err != nil {
				r.Problem = err.Error()
			}
			r.Runtime = strings.TrimSpace(string(rt))
		}
		rows = append(rows, r)
	}
	for name := range component {
		if !seen[name] {
			rows = append(rows, stackRow{Service: name, State: "absent", Component: true})
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

// status prints the stack's table and refuses, naming them, if any component has a problem.
func (a *app) status(ctx context.Context, m *pbp.Manifest, project string, files []string) error {
	rows, err := stackRows(ctx, m, project, files)
	if err != nil {
		return err
	}
	var b strings.Builder
	var bad []string
	tw := tabwriter.NewWriter(&b, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SERVICE\tSTATE\tHEALTH\tRUNTIME\tSTATUS")
	for _, r := range rows {
		verdict := "ok"
		switch {
		case r.Problem != "":
			verdict, bad = "FAIL: "+r.Problem, append(bad, r.Service+" ("+r.Problem+")")
		case !r.Component:
			verdict = "- (not a component)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Service, r.State, orDash(r.Health), orDash(r.Runtime), verdict)
	}
	tw.Flush()
	if err := a.print(rows, b.String()); err != nil {
		return err
	}
	if len(bad) > 0 {
		return refused{fmt.Errorf("not running and healthy under runtime sharness: %s", strings.Join(bad, ", "))}
	}
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func (a *app) statusCmd() *cobra.Command {
	var project string
	c := &cobra.Command{
		Use:   "status",
		Short: "Show each service's state, health and runtime (exit 1 if a component is not running, healthy and under runtime sharness)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkProject(project); err != nil {
				return err
			}
			m, err := a.load()
			if err != nil {
				return err
			}
			return a.status(cmd.Context(), m, project, nil)
		},
	}
	projectFlag(c, &project)
	return c
}

func (a *app) downCmd() *cobra.Command {
	var project string
	var volumes bool
	c := &cobra.Command{
		Use:   "down",
		Short: "Stop and remove the stack's containers and networks, keeping its volumes (the audit record)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkProject(project); err != nil {
				return err
			}
			args := composeArgs(project, nil, "down")
			if volumes {
				fmt.Fprintf(a.errOut, "down: WARNING: --volumes deletes every volume of %s, including the audit record (%s_audit-*) and the gate's state (%s_gate-*)\n", project, project, project)
				args = append(args, "--volumes")
			}
			ctx := cmd.Context()
			if err := runDocker(ctx, dockerCmd{args: args, stdout: a.errOut, stderr: a.errOut}); err != nil {
				return refused{fmt.Errorf("docker %s: %w", strings.Join(args, " "), err)}
			}
			if volumes {
				return a.print(map[string]any{"project": project, "volumes_removed": true}, fmt.Sprintf("down: %s stopped; its volumes, the audit record with them, are deleted\n", project))
			}
			kept := []string{}
			for _, prefix := range []string{"_audit-", "_gate-"} {
				out, err := dockerCapture(ctx, nil, "volume", "ls", "--filter", "name="+project+prefix, "--format", "{{.Name}}")
				if err != nil {
					return err
				}
				for _, v := range strings.Fields(string(out)) {
					if strings.HasPrefix(v, project+prefix) { // docker's name filter matches anywhere in the name
						kept = append(kept, v)
					}
				}
			}
			text := fmt.Sprintf("down: %s stopped; kept its audit and gate volumes (remove them only with --volumes):\n", project)
			for _, v := range kept {
				text += "  " + v + "\n"
			}
			return a.print(map[string]any{"project": project, "volumes_removed": false, "kept": kept}, text)
		},
	}
	projectFlag(c, &project)
	c.Flags().BoolVar(&volumes, "volumes", false, "also delete every volume of the project, the audit record included")
	return c
}
