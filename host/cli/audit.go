package cli

import (
	"cmp"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/spf13/cobra"

	"github.com/sharness-ai/sharness/host/engine"
	"github.com/sharness-ai/sharness/host/record"
	"github.com/sharness-ai/sharness/host/stack"
	"github.com/sharness-ai/sharness/internal/audit"
	"github.com/sharness-ai/sharness/policies/keys"
)

func (a *app) auditCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "audit",
		Short: "Verify and show the components' audit logs (on the host, outside the stack)",
	}
	c.AddCommand(a.auditVerifyCmd(), a.auditShowCmd())
	return c
}

// auditTrust is what the audit verbs verify logs against: facts from outside the logs, and
// where the logs are.
type auditTrust struct {
	docker               *engine.Docker
	ca, caSHA256, policy string
	project              string
	finalSeq             map[string]int64
	running              bool
}

func (t *auditTrust) flags(c *cobra.Command) {
	t.sessionFlags(c)
	c.Flags().StringToInt64Var(&t.finalSeq, "final-seq", nil, "component=seq, repeatable: the seq that component's log must end at; a listed component without a log fails")
	c.Flags().BoolVar(&t.running, "allow-running", false, "treat every log as one whose component still runs: report its unsigned tail as not yet checkpointed instead of failing it (--project needs it not: it asks the engine which components run)")
}

// sessionFlags are where the logs are and the facts they verify against.
func (t *auditTrust) sessionFlags(c *cobra.Command) {
	c.Flags().StringVar(&t.project, "project", "", "the compose project: read the logs of its volumes <project>_audit-<component>, and take the session CA from the launcher's session record")
	c.Flags().StringVar(&t.ca, "ca", "", "the session CA certificate (PEM)")
	c.Flags().StringVar(&t.caSHA256, "ca-sha256", "", "the session CA's hex SHA-256 as the session record names it (optional pin)")
	c.Flags().StringVar(&t.policy, "policy-hash", os.Getenv("SHARNESS_AI_POLICY_HASH"), "the policy hash M you trust (env SHARNESS_AI_POLICY_HASH)")
}

// logs finds the logs to read: the project's, or the files and folders given.
func (t *auditTrust) logs(args []string) ([]record.Log, error) {
	if t.project != "" {
		if len(args) > 0 || t.ca != "" {
			return nil, errors.New("--project finds the logs and the session CA: give no log files nor --ca with it")
		}
		return record.ProjectLogs(context.Background(), t.stack())
	}
	if len(args) == 0 {
		return nil, errors.New("no logs: give log files or folders, or --project")
	}
	return record.Files(args)
}

// need refuses, before any log is read, a verification without the facts it needs from outside
// the logs: the session CA's source and the policy hash. A missing hash is asked for by name:
// an empty one is not a malformed hash, and sudo drops SHARNESS_AI_POLICY_HASH from the
// environment, which is how it goes missing.
func (t *auditTrust) need() error {
	if t.ca == "" && t.project == "" {
		return errors.New("--ca or --project is required: logs verify against the session CA, not against the keys they carry")
	}
	if t.policy == "" {
		return errors.New("no policy hash to verify the logs against: give --policy-hash sha256:<hex> or set SHARNESS_AI_POLICY_HASH to the hash you trust (sharness-ai hash prints a manifest's); under sudo, give --policy-hash: sudo does not pass SHARNESS_AI_POLICY_HASH on")
	}
	if err := keys.CheckHash(t.policy); err != nil {
		return fmt.Errorf("--policy-hash (or SHARNESS_AI_POLICY_HASH): %w", err)
	}
	return nil
}

func (t *auditTrust) stack() stack.Project { return stack.Project{Engine: t.docker, Name: t.project} }

// logsNow is logs, a project's each marked running if its component runs: its unsigned tail is
// then not yet checkpointed, rather than cut.
func (t *auditTrust) logsNow(args []string) ([]record.Log, error) {
	logs, err := t.logs(args)
	if err != nil || t.project == "" {
		return logs, err
	}
	return logs, record.MarkRunning(context.Background(), t.stack(), logs)
}

// trust is what logs are verified against, and where its session CA came from.
func (t *auditTrust) trust(logs []record.Log) (audit.Trust, string, error) {
	if err := t.need(); err != nil {
		return audit.Trust{}, "", err
	}
	ca, source, err := t.sessionCA(logs)
	if err != nil {
		return audit.Trust{}, "", err
	}
	tr := audit.Trust{CA: ca, CASHA256: t.caSHA256, Policy: t.policy, AllowRunning: t.running, FinalSeq: map[string]uint64{}}
	for comp, seq := range t.finalSeq {
		if seq <= 0 {
			return audit.Trust{}, "", fmt.Errorf("--final-seq %s=%d: a log's last seq is at least 1", comp, seq)
		}
		tr.FinalSeq[comp] = uint64(seq)
	}
	return tr, source, nil
}

// sessionCA reads the session CA from --ca, or from the session record of the project's
// launcher (record.SessionCA). What the record cannot prove is that it is the session the person
// started, hence the hash printed, to compare with the launcher's "session started" line (or
// pinned with --ca-sha256).
func (t *auditTrust) sessionCA(logs []record.Log) (*x509.Certificate, string, error) {
	if t.project == "" {
		ca, err := record.ReadCA(t.ca)
		return ca, "--ca " + t.ca, err
	}
	ca, file, err := record.SessionCA(t.project, logs)
	return ca, "the session record in " + file, err
}

// findings writes r's notices and failures as file:line: reason.
func findings(b *strings.Builder, r record.Result) {
	for _, f := range r.Report.Notices {
		fmt.Fprintf(b, "%s:%d: note: %s\n", r.File, f.Line, f.Reason)
	}
	for _, f := range r.Report.Failures {
		if f.Line == 0 { // about the set of logs, not a line
			fmt.Fprintf(b, "%s: %s\n", r.File, f.Reason)
			continue
		}
		fmt.Fprintf(b, "%s:%d: %s\n", r.File, f.Line, f.Reason)
	}
}

func (a *app) auditVerifyCmd() *cobra.Command {
	t := auditTrust{docker: a.docker}
	c := &cobra.Command{
		Use:   "verify (--ca CA.pem <log files or folders of *.jsonl> | --project P) --policy-hash M",
		Short: "Check every audit log's chain and checkpoint signatures against the session strictly; exit 1 naming file:line: reason on any failure",
		Long: "Every line must be intact, in order and linked to the previous one, carry the policy hash M and the\n" +
			"session CA's hash, and be covered by a checkpoint signed by the log's component with an SVID of the\n" +
			"session CA; every log must end with its shutdown checkpoint, except the log of a component that still\n" +
			"runs: that one verifies up to its last signed checkpoint, and the lines after it are reported as not\n" +
			"yet checkpointed (unsigned, so unproven; verify again after down). --project P asks the engine which\n" +
			"components run; --allow-running treats every log so (logs copied from a running stack).\n" +
			"--final-seq names logs that must exist and the seq they must end at.\n" +
			"--project P reads the logs of P's volumes P_audit-<component> (as root) and takes the session CA from\n" +
			"the launcher's session record; compare the session CA hash it prints with the launcher's start line.\n" +
			"Exit 0: every log verifies (a running one up to its last checkpoint); 1: a log does not; 2: bad input.",
		RunE: func(_ *cobra.Command, args []string) error {
			if err := t.need(); err != nil {
				return err
			}
			logs, err := t.logsNow(args)
			if err != nil {
				return err
			}
			tr, source, err := t.trust(logs)
			if err != nil {
				return err
			}
			results, err := record.Scan(logs, &tr, func(string, audit.Entry) {})
			if err != nil {
				return err
			}
			var text strings.Builder
			fmt.Fprintf(&text, "session CA sha256 %s, from %s%s\n", audit.CAHash(tr.CA), source, compareHint(t.project))
			bad, open, tail := 0, 0, 0
			for _, r := range results {
				findings(&text, r)
				if !r.OK {
					bad++
					continue
				}
				rep, state := r.Report, "ends with its shutdown checkpoint"
				if !rep.Final {
					open++
					state = fmt.Sprintf("running: verified up to its checkpoint at line %d", rep.SignedThrough)
					if rep.SignedThrough == 0 { // a component signs its first checkpoint seconds after it starts
						state = "running: no checkpoint signed yet"
					}
					if rep.UnsignedFrom > 0 {
						tail += rep.Lines - rep.UnsignedFrom + 1
						state += fmt.Sprintf(", %s not yet checkpointed", lineRange(rep.UnsignedFrom, rep.Lines))
					} else {
						state += ", no shutdown checkpoint yet"
					}
				}
				fmt.Fprintf(&text, "ok: %s: %s, %d lines, %d events, %d checkpoints, %d starts, %s\n", r.File, rep.Component, rep.Lines, rep.Events, rep.Checkpoints, rep.Starts, state)
			}
			if open > 0 {
				their := map[bool]string{true: "its", false: "their"}[open == 1]
				fmt.Fprintf(&text, "running: %s verified up to %s last checkpoint; %s after it not yet checkpointed (unsigned, so unproven: verify again after down for every line signed)\n", plural(open, "log"), their, plural(tail, "line"))
			}
			if err := a.print(map[string]any{"ok": bad == 0, "policy": tr.Policy, "session_ca": audit.CAHash(tr.CA), "session_ca_from": source, "logs": results}, text.String()); err != nil {
				return err
			}
			if bad > 0 {
				return refused{fmt.Errorf("%d of %d audit logs do not verify", bad, len(results))}
			}
			return nil
		},
	}
	t.flags(c)
	return c
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// lineRange is "line 5" or "lines 5-9".
func lineRange(from, to int) string {
	if from == to {
		return fmt.Sprintf("line %d", from)
	}
	return fmt.Sprintf("lines %d-%d", from, to)
}

// shownEntry is one decision as show prints it with --json.
type shownEntry struct {
	File     string `json:"file"`
	Verified bool   `json:"verified"`
	audit.Entry
}

func (a *app) auditShowCmd() *cobra.Command {
	t := auditTrust{docker: a.docker}
	var component, decision, since, until string
	var unverified bool
	c := &cobra.Command{
		Use:   "show [--component C] [--decision D] [--since T] [--until T] (<log files or folders> | --project P)",
		Short: "Render the decisions of audit logs for a person, oldest first; refuses a log that does not verify unless --unverified",
		Long: "--since and --until take an RFC 3339 time or a duration before now (1h). Without --unverified,\n" +
			"show verifies every log as verify does (--ca, --policy-hash) and renders nothing if one fails; with it,\n" +
			"it checks only each log's structure, reports what is broken as file:line: reason on stderr (exit 1),\n" +
			"and labels every line it shows UNVERIFIED. --project P reads the logs of P's volumes, as verify does.",
		RunE: func(_ *cobra.Command, args []string) error {
			from, err := parseWhen(since)
			if err != nil {
				return fmt.Errorf("--since: %w", err)
			}
			to, err := parseWhen(until)
			if err != nil {
				return fmt.Errorf("--until: %w", err)
			}
			if !unverified {
				if err := t.need(); err != nil {
					return fmt.Errorf("%w (or --unverified to read logs without checking them)", err)
				}
			}
			logs, err := t.logsNow(args)
			if err != nil {
				return err
			}
			var tr *audit.Trust
			if !unverified {
				trust, source, err := t.trust(logs)
				if err != nil {
					return fmt.Errorf("%w (or --unverified to read logs without checking them)", err)
				}
				if tr = &trust; t.project != "" {
					fmt.Fprintf(a.errOut, "session CA sha256 %s, from %s%s\n", audit.CAHash(tr.CA), source, compareHint(t.project))
				}
			}
			shown := []shownEntry{}
			results, err := record.Scan(logs, tr, func(file string, e audit.Entry) {
				if (component == "" || e.Component == component) && (decision == "" || e.Decision == decision) && !e.Time.Before(from) && (to.IsZero() || !e.Time.After(to)) {
					shown = append(shown, shownEntry{file, !unverified, e})
				}
			})
			if err != nil {
				return err
			}
			var problems strings.Builder
			bad := 0
			for _, r := range results {
				findings(&problems, r)
				if !r.OK {
					bad++
				}
			}
			fmt.Fprint(a.errOut, problems.String())
			if bad > 0 && !unverified {
				return refused{fmt.Errorf("%d of %d audit logs do not verify: nothing shown (sharness-ai audit verify says more; --unverified shows them anyway)", bad, len(results))}
			}
			slices.SortStableFunc(shown, func(x, y shownEntry) int {
				return cmp.Or(x.Time.Compare(y.Time), strings.Compare(x.Component, y.Component), cmp.Compare(x.Seq, y.Seq))
			})
			if err := a.print(shown, renderDecisions(shown, unverified)); err != nil {
				return err
			}
			if bad > 0 {
				return refused{fmt.Errorf("%d of %d audit logs are broken: what is shown is unverified and may be incomplete", bad, len(results))}
			}
			return nil
		},
	}
	t.flags(c)
	c.Flags().StringVar(&component, "component", "", "only this component's decisions")
	c.Flags().StringVar(&decision, "decision", "", "only this decision (allow, deny...)")
	c.Flags().StringVar(&since, "since", "", "only decisions at or after this time (RFC 3339, or a duration before now)")
	c.Flags().StringVar(&until, "until", "", "only decisions at or before this time")
	c.Flags().BoolVar(&unverified, "unverified", false, "show logs without verifying them; every line is labelled UNVERIFIED")
	return c
}

// compareHint tells the person what to compare a session CA taken from the logs with.
func compareHint(project string) string {
	if project == "" {
		return ""
	}
	return fmt.Sprintf(": compare it with session_ca_sha256 in the launcher's \"session started\" line (docker compose -p %s logs launcher)", project)
}

func renderDecisions(shown []shownEntry, unverified bool) string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 2, 4, 2, ' ', 0)
	head := "TIME\tCOMPONENT\tDECISION\tREASON\tCALLER\tDESTINATION"
	if unverified {
		head = "UNVERIFIED\t" + head
	}
	fmt.Fprintln(tw, head)
	for _, e := range shown {
		row := strings.Join([]string{e.Time.UTC().Format(time.RFC3339), printable(e.Component), printable(e.Decision), printable(e.Reason), printable(e.Caller), printable(e.Destination)}, "\t")
		if unverified {
			row = "UNVERIFIED\t" + row
		}
		fmt.Fprintln(tw, row)
	}
	tw.Flush()
	return b.String()
}

// printable keeps what a component logged (partly the agent's words: a host, a path) from
// driving the terminal or the table: anything but printable characters is quoted.
func printable(s string) string {
	if s == "" {
		return "-"
	}
	if strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
		return strconv.QuoteToGraphic(s)
	}
	return s
}

// parseWhen reads an RFC 3339 time or a duration before now; empty is the zero time.
func parseWhen(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return time.Now().Add(-d), nil
	}
	return time.Parse(time.RFC3339, s)
}
