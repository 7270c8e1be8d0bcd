package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/signal"
	"regexp"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sharness-ai/sharness/host/doctor"
	"github.com/sharness-ai/sharness/host/doctor/probe"
	"github.com/sharness-ai/sharness/internal/seal"
	"github.com/sharness-ai/sharness/policies/pbp"
)

// doctorEnv is how `doctor` learns about the host; tests replace it (and composeLogs).
var doctorEnv = probe.Host

// projectName is docker compose's rule for project names.
var projectName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)

func (a *app) doctorCmd() *cobra.Command {
	var live bool
	var project, supplied string
	c := &cobra.Command{
		Use:   "doctor",
		Short: "Check the host the stack runs on, one line per check (exit 1 if a check fails; degraded is reported, not fatal)",
		Long: "Checks the Docker engine (CVE-2024-29018), compose v2, the sharness runtime registration, seccomp, user\n" +
			"namespaces, Landlock, cgroups, memfd_secret, the edge address pool, the memory hygiene the running\n" +
			"kms reports, and whether the running stack's policy (its launcher's \"session started\" line) is the\n" +
			"hash supplied with --policy-hash or SHARNESS_AI_POLICY_HASH. Each line says ok, degraded, fail or\n" +
			"skipped, what was found and what to do. --live also\n" +
			"runs a container on a throwaway internal network to see whether its DNS reaches the host's loopback\n" +
			"(it needs 127.0.0.1:53 free and root).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkProject(project); err != nil {
				return err
			}
			if supplied != "" {
				if err := pbp.CheckHash(supplied); err != nil {
					return fmt.Errorf("--policy-hash (or SHARNESS_AI_POLICY_HASH): %w", err)
				}
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt) // let --live remove what it made
			defer stop()
			f := probe.Gather(ctx, doctorEnv(), live)
			f.KMS = kmsFacts(ctx, project)
			f.Stack = stackFacts(ctx, project, supplied)
			rs := doctor.Check(f)
			var b strings.Builder
			tw := tabwriter.NewWriter(&b, 2, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "CHECK\tSTATUS\tDETAIL")
			n := map[doctor.Status]int{}
			for _, r := range rs {
				fmt.Fprintf(tw, "%s\t%s\t%s\n", r.Name, r.Status, r.Detail)
				n[r.Status]++
			}
			tw.Flush()
			fmt.Fprintf(&b, "%d ok, %d degraded, %d failed, %d skipped\n", n[doctor.OK], n[doctor.Degraded], n[doctor.Fail], n[doctor.Skipped])
			failed := doctor.Failed(rs)
			if err := a.print(map[string]any{"ok": len(failed) == 0, "checks": rs}, b.String()); err != nil {
				return err
			}
			if len(failed) > 0 {
				return refused{fmt.Errorf("doctor: failed: %s", strings.Join(failed, ", "))}
			}
			return nil
		},
	}
	c.Flags().BoolVar(&live, "live", false, "also run the live DNS-leak probe (creates and removes a sharness-doctor-* network and container)")
	c.Flags().StringVarP(&project, "project", "p", envOr("COMPOSE_PROJECT_NAME", "sharness"), "compose project of the stack whose kms and policy to report (env COMPOSE_PROJECT_NAME)")
	c.Flags().StringVar(&supplied, "policy-hash", os.Getenv("SHARNESS_AI_POLICY_HASH"), "the hash you trust, compared with the running stack's (env SHARNESS_AI_POLICY_HASH)")
	return c
}

// kmsFacts reads the running kms's bundle from its logs, as `kms bundle` does.
func kmsFacts(ctx context.Context, project string) doctor.KMS {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	k := doctor.KMS{Project: project}
	logs, err := composeLogs(ctx, project, nil)
	switch {
	case err != nil:
		k.Err = fmt.Errorf("%w: %v", doctor.ErrNoStack, err)
	case !bytes.Contains(logs, []byte(seal.BundleLogPrefix)):
		k.Err = doctor.ErrNoStack
	default:
		k.Bundle, k.Err = lastBundle(logs)
	}
	return k
}

// stackFacts reads the policy the running stack of project attests: the launcher's last
// "session started" line (doctor.Stack says why that line). It asks the engine directly
// (docker ps by compose's labels, docker logs), not compose, which would need the project's
// files; both through runDocker, which tests replace.
func stackFacts(ctx context.Context, project, supplied string) doctor.Stack {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	s := doctor.Stack{Project: project, Supplied: supplied}
	out, err := dockerCapture(ctx, nil, "ps", "--all", "--filter", "label=com.docker.compose.project="+project,
		"--filter", "label=com.docker.compose.service="+launcherComponent, "--format", "{{.ID}} {{.State}}")
	if err != nil {
		s.Err = fmt.Errorf("%w: %v", doctor.ErrNoStack, err)
		return s
	}
	var id, state string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if i, st, _ := strings.Cut(line, " "); id == "" || st == "running" && state != "running" {
			id, state = i, st // the running one, if any
		}
	}
	switch {
	case id == "":
		s.Err = doctor.ErrNoStack
		return s
	case state != "running":
		s.Err = fmt.Errorf("%w: its launcher is %s", doctor.ErrNoStack, state)
		return s
	}
	var logs bytes.Buffer // the launcher logs to stderr, which docker logs replays on stderr
	if err := runDocker(ctx, dockerCmd{args: []string{"logs", id}, stdout: &logs, stderr: &logs}); err != nil {
		s.Err = fmt.Errorf("docker logs %s: %w", id, err)
		return s
	}
	s.Session, s.Err = doctor.ParseSession(logs.Bytes())
	return s
}
