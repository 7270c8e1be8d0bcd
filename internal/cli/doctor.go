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

	"github.com/sharness-ai/sharness/internal/doctor"
	"github.com/sharness-ai/sharness/internal/doctor/probe"
	"github.com/sharness-ai/sharness/internal/seal"
)

// doctorEnv is how `doctor` learns about the host; tests replace it (and composeLogs).
var doctorEnv = probe.Host

// projectName is docker compose's rule for project names.
var projectName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)

func (a *app) doctorCmd() *cobra.Command {
	var live bool
	var project string
	c := &cobra.Command{
		Use:   "doctor",
		Short: "Check the host the stack runs on, one line per check (exit 1 if a check fails; degraded is reported, not fatal)",
		Long: "Checks the Docker engine (CVE-2024-29018), compose v2, the sharness runtime registration, seccomp, user\n" +
			"namespaces, Landlock, cgroups, memfd_secret, the edge address pool, and the memory hygiene the running\n" +
			"kms reports. Each line says ok, degraded, fail or skipped, what was found and what to do. --live also\n" +
			"runs a container on a throwaway internal network to see whether its DNS reaches the host's loopback\n" +
			"(it needs 127.0.0.1:53 free and root).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !projectName.MatchString(project) {
				return fmt.Errorf("--project %q: lower-case letters, digits, '-' and '_', starting with a letter or digit", project)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt) // let --live remove what it made
			defer stop()
			f := probe.Gather(ctx, doctorEnv(), live)
			f.KMS = kmsFacts(ctx, project)
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
	c.Flags().StringVarP(&project, "project", "p", envOr("COMPOSE_PROJECT_NAME", "sharness"), "compose project of the stack whose kms to report (env COMPOSE_PROJECT_NAME)")
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
