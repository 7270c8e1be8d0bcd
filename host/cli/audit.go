package cli

import (
	"bytes"
	"cmp"
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/spf13/cobra"

	"github.com/sharness-ai/sharness/internal/audit"
	"github.com/sharness-ai/sharness/policies/pbp"
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
	ca, caSHA256, policy string
	project              string
	finalSeq             map[string]int64
	running              bool
}

func (t *auditTrust) flags(c *cobra.Command) {
	t.sessionFlags(c)
	c.Flags().StringToInt64Var(&t.finalSeq, "final-seq", nil, "component=seq, repeatable: the seq that component's log must end at; a listed component without a log fails")
	c.Flags().BoolVar(&t.running, "allow-running", false, "the components still run: list an unsigned tail instead of failing it")
}

// sessionFlags are where the logs are and the facts they verify against.
func (t *auditTrust) sessionFlags(c *cobra.Command) {
	c.Flags().StringVar(&t.project, "project", "", "the compose project: read the logs of its volumes <project>_audit-<component>, and take the session CA from the launcher's session record")
	c.Flags().StringVar(&t.ca, "ca", "", "the session CA certificate (PEM)")
	c.Flags().StringVar(&t.caSHA256, "ca-sha256", "", "the session CA's hex SHA-256 as the session record names it (optional pin)")
	c.Flags().StringVar(&t.policy, "policy-hash", os.Getenv("SHARNESS_AI_POLICY_HASH"), "the policy hash M you trust (env SHARNESS_AI_POLICY_HASH)")
}

// auditLog is one log to read: a file and, when known from where it was found (a project's
// volume), the component it must belong to.
type auditLog struct{ file, component string }

// logs finds the logs to read: the project's, or the files and folders given.
func (t *auditTrust) logs(args []string) ([]auditLog, error) {
	if t.project != "" {
		if len(args) > 0 || t.ca != "" {
			return nil, errors.New("--project finds the logs and the session CA: give no log files nor --ca with it")
		}
		return projectLogs(context.Background(), t.project)
	}
	if len(args) == 0 {
		return nil, errors.New("no logs: give log files or folders, or --project")
	}
	files, err := auditFiles(args)
	var logs []auditLog
	for _, f := range files {
		logs = append(logs, auditLog{file: f})
	}
	return logs, err
}

// trust is what logs are verified against, and where its session CA came from.
func (t *auditTrust) trust(logs []auditLog) (audit.Trust, string, error) {
	if t.ca == "" && t.project == "" {
		return audit.Trust{}, "", errors.New("--ca or --project is required: logs verify against the session CA, not against the keys they carry")
	}
	if err := pbp.CheckHash(t.policy); err != nil {
		return audit.Trust{}, "", fmt.Errorf("--policy-hash (or SHARNESS_AI_POLICY_HASH): %w", err)
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
// launcher: the first event of its log, session_start, whose ca_cert must hash to the
// session_ca_sha256 it names. That log is verified against it with the others; what the record
// cannot prove is that it is the session the person started, hence the hash printed, to compare
// with the launcher's "session started" line (or pinned with --ca-sha256).
func (t *auditTrust) sessionCA(logs []auditLog) (*x509.Certificate, string, error) {
	if t.project == "" {
		data, err := os.ReadFile(t.ca)
		if err != nil {
			return nil, "", fmt.Errorf("read session CA: %w", err)
		}
		block, rest := pem.Decode(data)
		if block == nil || block.Type != "CERTIFICATE" || strings.TrimSpace(string(rest)) != "" {
			return nil, "", fmt.Errorf("%s: want exactly one PEM certificate, the session CA", t.ca)
		}
		ca, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, "", fmt.Errorf("%s: %w", t.ca, err)
		}
		return ca, "--ca " + t.ca, nil
	}
	i := slices.IndexFunc(logs, func(l auditLog) bool { return l.component == launcherComponent })
	if i < 0 {
		return nil, "", fmt.Errorf("project %s has no volume %s_audit-%s: no session record to take the session CA from (use --ca)", t.project, t.project, launcherComponent)
	}
	file := logs[i].file
	f, err := os.Open(file)
	if err != nil {
		return nil, "", fmt.Errorf("read the session record: %w", err)
	}
	defer f.Close()
	var first *audit.Event
	audit.Scan(f, nil, func(e audit.Entry) { // structure only: the log is verified with the others
		if first == nil {
			first = &e.Event
		}
	})
	if first == nil || first.Action != "session_start" {
		return nil, "", fmt.Errorf("%s: its first event is not the session record (session_start)", file)
	}
	der, err := base64.StdEncoding.DecodeString(first.Fields["ca_cert"])
	if err != nil {
		return nil, "", fmt.Errorf("%s: the session record's ca_cert is not base64: %w", file, err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, "", fmt.Errorf("%s: the session record's ca_cert: %w", file, err)
	}
	if audit.CAHash(ca) != first.Fields["session_ca_sha256"] {
		return nil, "", fmt.Errorf("%s: the session record's ca_cert has SHA-256 %s, not the session_ca_sha256 %q it names", file, audit.CAHash(ca), first.Fields["session_ca_sha256"])
	}
	return ca, "the session record in " + file, nil
}

// launcherComponent is the launcher's name in the shipped policies: its log holds the session
// record. A manifest that names it otherwise is verified with --ca.
const launcherComponent = "launcher"

// componentName is a manifest's rule for component names (pbp).
var componentName = regexp.MustCompile(`^[a-z][a-z0-9-]{0,30}$`)

// dockerOutput runs docker with args and returns its stdout. Tests replace it, so --project is
// testable without Docker.
var dockerOutput = func(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "docker", args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("docker %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// projectLogs finds the audit logs of compose project p: <mountpoint>/audit.jsonl of each volume
// p_audit-<component>, in component order. The volumes' files are root's on the host.
func projectLogs(ctx context.Context, p string) ([]auditLog, error) {
	vols, err := projectVolumes(ctx, p, "audit")
	if err != nil {
		return nil, err
	}
	var logs []auditLog
	for _, v := range vols {
		logs = append(logs, auditLog{filepath.Join(v.dir, audit.FileName), v.component})
	}
	return logs, nil
}

// volume is one component's volume of a compose project: its mountpoint on the host.
type volume struct{ component, dir string }

// projectVolumes finds the volumes p_<kind>-<component> of compose project p (kind audit, gate)
// and their mountpoints, in component order.
func projectVolumes(ctx context.Context, p, kind string) ([]volume, error) {
	if !projectName.MatchString(p) {
		return nil, fmt.Errorf("--project %q is not a compose project name", p)
	}
	prefix := p + "_" + kind + "-"
	out, err := dockerOutput(ctx, "volume", "ls", "--filter", "name="+prefix, "--format", "{{.Name}}")
	if err != nil {
		return nil, err
	}
	var vols []volume
	for _, name := range strings.Fields(string(out)) {
		comp, ok := strings.CutPrefix(name, prefix) // the filter matches anywhere in a name
		if !ok || !componentName.MatchString(comp) {
			continue
		}
		mount, err := dockerOutput(ctx, "volume", "inspect", "--format", "{{.Mountpoint}}", name)
		if err != nil {
			return nil, err
		}
		dir := strings.TrimSpace(string(mount))
		if !filepath.IsAbs(dir) {
			return nil, fmt.Errorf("volume %s: mountpoint %q is not an absolute path", name, dir)
		}
		vols = append(vols, volume{comp, dir})
	}
	if len(vols) == 0 {
		return nil, fmt.Errorf("no volume %s<component> (docker volume ls): is the project name right?", prefix)
	}
	slices.SortFunc(vols, func(a, b volume) int { return strings.Compare(a.component, b.component) })
	return vols, nil
}

// auditFiles expands the arguments: files as given, folders to their *.jsonl files.
func auditFiles(args []string) ([]string, error) {
	var files []string
	for _, arg := range args {
		st, err := os.Stat(arg)
		if err != nil {
			return nil, err
		}
		if !st.IsDir() {
			files = append(files, arg)
			continue
		}
		found, _ := filepath.Glob(filepath.Join(arg, "*.jsonl"))
		if len(found) == 0 {
			return nil, fmt.Errorf("%s holds no *.jsonl audit log", arg)
		}
		files = append(files, found...)
	}
	return files, nil
}

// auditResult is one log's verdict, as verify prints it with --json.
type auditResult struct {
	File   string       `json:"file"`
	OK     bool         `json:"ok"`
	Report audit.Report `json:"report"`
}

// scanLogs reads every log, verifying it against tr (or only its structure with tr nil), and
// hands each event on with its file. Reading errors are bad input; a log that does not
// verify is a result, not an error, and so is a project's volume without its log.
func scanLogs(logs []auditLog, tr *audit.Trust, each func(string, audit.Entry)) ([]auditResult, error) {
	var results []auditResult
	seen := map[string]string{}
	for _, l := range logs {
		file, trust := l.file, tr
		if tr != nil && l.component != "" {
			own := *tr
			own.Component, trust = l.component, &own
		}
		f, err := os.Open(file)
		if l.component != "" && errors.Is(err, fs.ErrNotExist) {
			missing := audit.Finding{Reason: fmt.Sprintf("no log of component %s in its volume (it never started, or the log was deleted)", l.component)}
			results = append(results, auditResult{file, false, audit.Report{Component: l.component, Failures: []audit.Finding{missing}}})
			seen[l.component] = file
			continue
		} else if errors.Is(err, fs.ErrPermission) {
			return nil, fmt.Errorf("%w (Docker volumes are root's: run as root)", err)
		} else if err != nil {
			return nil, err
		}
		rep, err := audit.Scan(f, trust, func(e audit.Entry) { each(file, e) })
		f.Close()
		if err != nil && !errors.Is(err, audit.ErrInvalid) {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		if other, dup := seen[rep.Component]; dup && rep.Component != "" {
			rep.Failures = append(rep.Failures, audit.Finding{Line: 1, Reason: fmt.Sprintf("a second log of component %s (the first is %s)", rep.Component, other)})
		}
		seen[rep.Component] = file
		results = append(results, auditResult{file, len(rep.Failures) == 0, rep})
	}
	if tr != nil {
		for _, comp := range slices.Sorted(maps.Keys(tr.FinalSeq)) {
			if _, ok := seen[comp]; !ok {
				missing := audit.Finding{Reason: fmt.Sprintf("no log of component %s, whose log must end at seq %d (deleted?)", comp, tr.FinalSeq[comp])}
				results = append(results, auditResult{comp + " (missing)", false, audit.Report{Component: comp, Failures: []audit.Finding{missing}}})
			}
		}
	}
	return results, nil
}

// findings writes r's notices and failures as file:line: reason.
func findings(b *strings.Builder, r auditResult) {
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
	var t auditTrust
	c := &cobra.Command{
		Use:   "verify (--ca CA.pem <log files or folders of *.jsonl> | --project P) --policy-hash M",
		Short: "Check every audit log's chain and checkpoint signatures against the session strictly; exit 1 naming file:line: reason on any failure",
		Long: "Every line must be intact, in order and linked to the previous one, carry the policy hash M and the\n" +
			"session CA's hash, and be covered by a checkpoint signed by the log's component with an SVID of the\n" +
			"session CA; every log must end with its shutdown checkpoint (--allow-running: an unsigned tail is\n" +
			"listed instead). --final-seq names logs that must exist and the seq they must end at.\n" +
			"--project P reads the logs of P's volumes P_audit-<component> (as root) and takes the session CA from\n" +
			"the launcher's session record; compare the session CA hash it prints with the launcher's start line.\n" +
			"Exit 0: every log verifies; 1: a log does not; 2: bad input.",
		RunE: func(_ *cobra.Command, args []string) error {
			logs, err := t.logs(args)
			if err != nil {
				return err
			}
			tr, source, err := t.trust(logs)
			if err != nil {
				return err
			}
			results, err := scanLogs(logs, &tr, func(string, audit.Entry) {})
			if err != nil {
				return err
			}
			var text strings.Builder
			fmt.Fprintf(&text, "session CA sha256 %s, from %s%s\n", audit.CAHash(tr.CA), source, compareHint(t.project))
			bad := 0
			for _, r := range results {
				findings(&text, r)
				if !r.OK {
					bad++
					continue
				}
				rep, state := r.Report, "ends with its shutdown checkpoint"
				if !rep.Final {
					state = fmt.Sprintf("running, signed through line %d, unsigned from line %d", rep.SignedThrough, rep.UnsignedFrom)
				}
				fmt.Fprintf(&text, "ok: %s: %s, %d lines, %d events, %d checkpoints, %d starts, %s\n", r.File, rep.Component, rep.Lines, rep.Events, rep.Checkpoints, rep.Starts, state)
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

// shownEntry is one decision as show prints it with --json.
type shownEntry struct {
	File     string `json:"file"`
	Verified bool   `json:"verified"`
	audit.Entry
}

func (a *app) auditShowCmd() *cobra.Command {
	var t auditTrust
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
			logs, err := t.logs(args)
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
			results, err := scanLogs(logs, tr, func(file string, e audit.Entry) {
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
