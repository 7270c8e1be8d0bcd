// Package record reads a session's audit record on the host: it finds the logs (a compose
// project's audit volumes, or files and folders given), reads the session CA they verify against
// (a PEM file, or the launcher's session record), and verifies the set, each log with
// internal/audit and the set as a whole (a log missing, a component's log twice). The audit
// verbs, the dashboard and export read the record through it.
//
// What it does not guarantee: a session record proves only that its ca_cert is the CA it names,
// not that it is the session the person started; the caller prints the CA's hash for the person
// to compare with the launcher's start line, or pins it (audit.Trust.CASHA256).
package record

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sharness-ai/sharness/host/stack"
	"github.com/sharness-ai/sharness/internal/audit"
)

// Log is one log to read: a file and, when known from where it was found (a project's volume),
// the component it must belong to, and whether that component runs (MarkRunning).
type Log struct {
	File, Component string
	Running         bool // its writer runs: an unsigned tail is not yet checkpointed, not cut
}

// ProjectLogs finds the audit logs of compose project p: <mountpoint>/audit.jsonl of each volume
// <project>_audit-<component>, in component order. The volumes' files are root's on the host.
func ProjectLogs(ctx context.Context, p stack.Project) ([]Log, error) {
	vols, err := p.Volumes(ctx, "audit")
	if err != nil {
		return nil, err
	}
	var logs []Log
	for _, v := range vols {
		logs = append(logs, Log{File: filepath.Join(v.Dir, audit.FileName), Component: v.Component})
	}
	return logs, nil
}

// MarkRunning marks the logs whose component has a running container in project p, as the
// engine says: the log of a running component legitimately ends after its last signed
// checkpoint, and Scan reports that tail as not yet checkpointed instead of failing it. Every
// other log is verified strictly, to its shutdown checkpoint. Nothing signed is taken on the
// engine's word: the lines up to the last checkpoint verify as always, and the tail is only ever
// reported unsigned. (Whoever controls the engine can also write the volumes.)
func MarkRunning(ctx context.Context, p stack.Project, logs []Log) error {
	running, err := p.Running(ctx)
	if err != nil {
		return fmt.Errorf("find the project's running components: %w", err)
	}
	for i := range logs {
		logs[i].Running = logs[i].Component != "" && running[logs[i].Component]
	}
	return nil
}

// Files expands the arguments into logs: files as given, folders to their *.jsonl files.
func Files(args []string) ([]Log, error) {
	var logs []Log
	for _, arg := range args {
		st, err := os.Stat(arg)
		if err != nil {
			return nil, err
		}
		if !st.IsDir() {
			logs = append(logs, Log{File: arg})
			continue
		}
		found, _ := filepath.Glob(filepath.Join(arg, "*.jsonl"))
		if len(found) == 0 {
			return nil, fmt.Errorf("%s holds no *.jsonl audit log", arg)
		}
		for _, f := range found {
			logs = append(logs, Log{File: f})
		}
	}
	return logs, nil
}

// ReadCA reads the session CA certificate from a PEM file holding exactly it.
func ReadCA(file string) (*x509.Certificate, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("read session CA: %w", err)
	}
	block, rest := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE" || strings.TrimSpace(string(rest)) != "" {
		return nil, fmt.Errorf("%s: want exactly one PEM certificate, the session CA", file)
	}
	ca, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return ca, nil
}

// SessionCA reads the session CA from the session record of project's launcher among logs: the
// first event of its log, session_start, whose ca_cert must hash to the session_ca_sha256 it
// names. That log is verified against it with the others. It returns the CA and the file it came
// from.
func SessionCA(project string, logs []Log) (*x509.Certificate, string, error) {
	i := slices.IndexFunc(logs, func(l Log) bool { return l.Component == stack.Launcher })
	if i < 0 {
		return nil, "", fmt.Errorf("project %s has no volume %s_audit-%s: no session record to take the session CA from (use --ca)", project, project, stack.Launcher)
	}
	file := logs[i].File
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
	return ca, file, nil
}

// Result is one log's verdict.
type Result struct {
	File   string       `json:"file"`
	OK     bool         `json:"ok"`
	Report audit.Report `json:"report"`
}

// Scan reads every log, verifying it against tr (or only its structure with tr nil), and hands
// each event on with its file; a log marked Running is verified as with tr.AllowRunning. Reading
// errors are errors; a log that does not verify is a result, and so is a project's volume
// without its log, or a log tr.FinalSeq names that is not among logs.
func Scan(logs []Log, tr *audit.Trust, each func(string, audit.Entry)) ([]Result, error) {
	var results []Result
	seen := map[string]string{}
	for _, l := range logs {
		file, trust := l.File, tr
		if tr != nil && (l.Component != "" || l.Running) {
			own := *tr
			own.Component, own.AllowRunning, trust = l.Component, tr.AllowRunning || l.Running, &own
		}
		f, err := os.Open(file)
		if l.Component != "" && errors.Is(err, fs.ErrNotExist) {
			missing := audit.Finding{Reason: fmt.Sprintf("no log of component %s in its volume (it never started, or the log was deleted)", l.Component)}
			results = append(results, Result{file, false, audit.Report{Component: l.Component, Failures: []audit.Finding{missing}}})
			seen[l.Component] = file
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
		results = append(results, Result{file, len(rep.Failures) == 0, rep})
	}
	if tr != nil {
		for _, comp := range slices.Sorted(maps.Keys(tr.FinalSeq)) {
			if _, ok := seen[comp]; !ok {
				missing := audit.Finding{Reason: fmt.Sprintf("no log of component %s, whose log must end at seq %d (deleted?)", comp, tr.FinalSeq[comp])}
				results = append(results, Result{comp + " (missing)", false, audit.Report{Component: comp, Failures: []audit.Finding{missing}}})
			}
		}
	}
	return results, nil
}
