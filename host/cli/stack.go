package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sharness-ai/sharness/host/stack"
	"github.com/sharness-ai/sharness/policies/keys"
)

// confirmInput is where `up` reads the person's confirmation of the policy hash. Tests replace it.
var confirmInput io.Reader = os.Stdin

// pollInterval is how often up asks compose how the containers are; tests shorten it.
var pollInterval = time.Second

func projectFlag(c *cobra.Command, p *string) {
	c.Flags().StringVarP(p, "project", "p", envOr("COMPOSE_PROJECT_NAME", "sharness"), "compose project name (env COMPOSE_PROJECT_NAME)")
}

func checkProject(p string) error {
	if !stack.IsProject(p) {
		return fmt.Errorf("--project %q: lower-case letters, digits, '-' and '_', starting with a letter or digit", p)
	}
	return nil
}

func (a *app) upCmd() *cobra.Command {
	var project, want, agent string
	var extra []string
	var yes bool
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
				if err := keys.CheckHash(want); err != nil {
					return err
				}
			}
			if timeout <= 0 {
				return fmt.Errorf("--timeout %s: want a positive duration", timeout)
			}
			m, err := a.load()
			if err != nil {
				return err
			}
			if err := stack.CheckCompiled(m, a.manifest, a.errOut); err != nil {
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
			ctx := cmd.Context()
			p, err := a.stack(project, append([]string{"docker-compose.yml"}, extra...), m).Up(ctx, stack.UpOptions{Agent: agent, Timeout: timeout, Poll: pollInterval})
			if nr := (*stack.NotReady)(nil); errors.As(err, &nr) && nr.Rows != nil {
				a.printStatus(nr.Rows) // show what did start; the up failure is the error
			}
			if err != nil {
				return err
			}
			if err := a.status(ctx, p); err != nil {
				return err
			}
			fmt.Fprintf(a.errOut, "up: %s is up; start the agent with:\n  SHARNESS_AI_POLICY_HASH=%s %s\n", project, m.Hash, strings.Join(p.AgentCommand(), " "))
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

// status prints the stack's table and refuses, naming them, if any component has a problem.
func (a *app) status(ctx context.Context, p stack.Project) error {
	rows, err := p.Status(ctx)
	if err != nil {
		return err
	}
	return a.printStatus(rows)
}

// printStatus prints rows as status does, and refuses, naming them, if any has a problem.
func (a *app) printStatus(rows []stack.Row) error {
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
			return a.status(cmd.Context(), a.stack(project, nil, m))
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
			if volumes {
				fmt.Fprintf(a.errOut, "down: WARNING: --volumes deletes every volume of %s, including the audit record (%s_audit-*) and the gate's state (%s_gate-*)\n", project, project, project)
			}
			kept, err := a.stack(project, nil, nil).Down(cmd.Context(), volumes)
			if err != nil {
				return err
			}
			if volumes {
				return a.print(map[string]any{"project": project, "volumes_removed": true}, fmt.Sprintf("down: %s stopped; its volumes, the audit record with them, are deleted\n", project))
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
