package cli

import (
	"fmt"
	"os"
	"os/signal"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/sharness-ai/sharness/host/doctor"
	"github.com/sharness-ai/sharness/host/doctor/probe"
	"github.com/sharness-ai/sharness/policies/keys"
)

// doctorEnv is how `doctor` learns about the host; tests replace it.
var doctorEnv = probe.Host

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
				if err := keys.CheckHash(supplied); err != nil {
					return fmt.Errorf("--policy-hash (or SHARNESS_AI_POLICY_HASH): %w", err)
				}
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt) // let --live remove what it made
			defer stop()
			f := probe.Gather(ctx, doctorEnv(a.docker), live)
			f.KMS = probe.KMS(ctx, a.stack(project, nil, nil))
			f.Stack = probe.Stack(ctx, a.docker, project, supplied)
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
