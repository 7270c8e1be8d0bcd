package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sharness-ai/sharness/compose"
	"github.com/sharness-ai/sharness/host/stack"
	"github.com/sharness-ai/sharness/policies/keys"
)

// confirmInput is where `up` reads the person's confirmation of the policy hash. Tests replace it.
var confirmInput io.Reader = os.Stdin

// pollInterval is how often up asks compose how the containers are; tests shorten it.
var pollInterval = time.Second

// downSettle is how long down waits for what is left of a project to go (0: stack's default);
// tests shorten it.
var downSettle time.Duration

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
	var project, want, agent, dir string
	var extra []string
	var yes bool
	timeout := 3 * time.Minute
	c := &cobra.Command{
		Use:   "up",
		Short: "Check the compiled stack, confirm its policy hash, start every service but the agent, and show their health",
		Long: "Refuses unless docker-compose.yml and compiled/ (in --dir) are exactly what the manifest (env\n" +
			"SHARNESS_AI_MANIFEST) compiles to: the offline world is SHARNESS_AI_MANIFEST=policies/world/manifest.yaml\n" +
			"with --dir compose/world -f compose/world.yml. The policy hash M must equal --policy-hash (or SHARNESS_AI_POLICY_HASH); without one, up\n" +
			"prints M and reads its first 12 hex digits from stdin. It prints a line per image (present, its ID and\n" +
			"size) and refuses if one is missing (hack/build-images.sh builds them; up never pulls). Then it runs\n" +
			"`docker compose up --detach --pull never` with SHARNESS_AI_POLICY_HASH=M, prints a line per container\n" +
			"as it becomes running and healthy, refuses (with the last log lines of what is not) when one exits, is\n" +
			"unhealthy or is not ready within --timeout, and prints `status`. Start the agent yourself afterwards,\n" +
			"once the key is sealed to this session's kms: up prints the one line that does it (up takes no key).\n" +
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
			if err := stack.CheckCompiled(m, a.manifest, dir, a.errOut); err != nil {
				return err
			}
			if err := a.trustHash("up", confirmInput, m.Hash, want, yes); err != nil {
				return err
			}
			session, err := a.recordSession(project, m, dir)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			p, err := a.stack(project, append([]string{filepath.Join(dir, compose.File)}, extra...), m).Up(ctx,
				stack.UpOptions{Agent: agent, Timeout: timeout, Poll: pollInterval, Env: stack.SessionEnv(session)})
			if nr := (*stack.NotReady)(nil); errors.As(err, &nr) && nr.Rows != nil {
				a.printStatus(nr.Rows) // show what did start; the up failure is the error
			}
			if err != nil {
				return err
			}
			if err := a.status(ctx, p); err != nil {
				return err
			}
			// up takes no key (stdin is the hash's confirmation, and argv is readable by every
			// process of the host), so it says how to seal one to this session's kms.
			if seal := p.SealCommand(); seal != "" {
				fmt.Fprintf(a.errOut, "up: kms has a new identity this session: seal the key to it before you start the agent: %s\n", seal)
			}
			fmt.Fprintf(a.errOut, "up: %s is up; start the agent with:\n  SHARNESS_AI_POLICY_HASH=%s %s\n", project, m.Hash, strings.Join(p.AgentCommand(), " "))
			return nil
		},
	}
	projectFlag(c, &project)
	c.Flags().StringVar(&want, "policy-hash", os.Getenv("SHARNESS_AI_POLICY_HASH"), "the hash you trust (env SHARNESS_AI_POLICY_HASH); without it, up asks you to confirm")
	c.Flags().BoolVar(&yes, "yes", false, "start without a person confirming the hash (warns)")
	c.Flags().StringSliceVarP(&extra, "file", "f", nil, "an extra compose file after docker-compose.yml, repeatable (e.g. compose/world.yml)")
	c.Flags().StringVar(&dir, "dir", ".", "the folder sharness-ai compile -o wrote the stack to: its docker-compose.yml and compiled/ (compose/world for the offline world)")
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
		state := r.State
		if r.ExitCode != nil {
			state = fmt.Sprintf("%s (%d)", r.State, *r.ExitCode)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Service, state, orDash(r.Health), orDash(r.Runtime), verdict)
	}
	tw.Flush()
	if err := a.print(rows, b.String()); err != nil {
		return err
	}
	if len(bad) > 0 {
		return refused{fmt.Errorf("failed: %s", strings.Join(bad, ", "))}
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
		Short: "Show each service's state, health and runtime (exit 1 if a component is not running, healthy and under runtime sharness, or a service exited non-zero)",
		Long: "One row per container of the project (those `docker compose run` started too) and per component\n" +
			"without one. A component but the agent must be running, healthy where it has a health check; every\n" +
			"component's container must run under runtime sharness; any container that exited with a code other\n" +
			"than 0 (the agent's exit code is its verdict), or is dead, has failed. The agent's absence is not a\n" +
			"failure: up leaves it to you. Exit 0: none failed; 1: one did (named, with its exit code); 2: bad input.",
		Args: cobra.NoArgs,
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
		Short: "Stop and remove every container and network of the stack, docker compose run's too, keeping its volumes (the audit record)",
		Long: "Stops the containers `docker compose run` started (the agent) first, then runs `docker compose down\n" +
			"--remove-orphans`, then stops and removes whatever container or network of the project is still there\n" +
			"(found by compose's project label), and lists the volumes it kept: the audit record and the gate's state\n" +
			"outlive the stack on purpose. Exit 0: nothing of the project runs; 1: something is still there (named).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkProject(project); err != nil {
				return err
			}
			if volumes {
				fmt.Fprintf(a.errOut, "down: WARNING: --volumes deletes every volume of %s, including the audit record (%s_audit-*) and the gate's state (%s_gate-*)\n", project, project, project)
			}
			d, err := a.stack(project, nil, nil).Down(cmd.Context(), stack.DownOptions{Volumes: volumes, Settle: downSettle})
			if err != nil {
				return err
			}
			gone := fmt.Sprintf("down: %s is down: no container nor network of it is left", project)
			if len(d.Removed) > 0 {
				gone += fmt.Sprintf(" (removed by their labels, as docker compose down leaves them: %s)", strings.Join(d.Removed, ", "))
			}
			if volumes {
				return a.print(map[string]any{"project": project, "volumes_removed": true, "removed": d.Removed, "kept": d.Kept},
					gone+"; its volumes, the audit record with them, are deleted\n")
			}
			text := gone + "\n"
			if len(d.Kept) > 0 {
				text += fmt.Sprintf("down: kept %d volumes on purpose: the audit record (%s_audit-*) and the gate's state (%s_gate-*) outlive the stack; check the record with `sudo sharness-ai audit verify --project %s --policy-hash …`, delete them only with down --volumes:\n", len(d.Kept), project, project, project)
			}
			for _, v := range d.Kept {
				text += "  " + v + "\n"
			}
			return a.print(map[string]any{"project": project, "volumes_removed": false, "removed": d.Removed, "kept": d.Kept}, text)
		},
	}
	projectFlag(c, &project)
	c.Flags().BoolVar(&volumes, "volumes", false, "also delete every volume of the project, the audit record included")
	return c
}
