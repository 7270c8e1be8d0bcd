package cli

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/moby/moby/api/types/container"

	"github.com/sharness-ai/sharness/internal/audit"
	"github.com/sharness-ai/sharness/testkit/enginetest"
	"github.com/sharness-ai/sharness/testkit/mtlstest"
)

var auditPolicy = "sha256:" + strings.Repeat("ab", 32)

// auditSession writes the session CA's PEM and the logs of net (events 0-4) and kms (events
// 0-2) into a fresh folder, with one clock for both, so their lines interleave in time.
func auditSession(t *testing.T) (dir, caPEM string, ca *mtlstest.CA) {
	t.Helper()
	ca = mtlstest.NewCA(t, "sharness.test")
	dir = t.TempDir()
	caPEM = filepath.Join(dir, "ca.pem")
	os.WriteFile(caPEM, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Cert().Raw}), 0o644)
	logs := filepath.Join(dir, "logs")
	os.Mkdir(logs, 0o755)
	var mu sync.Mutex
	now := time.Now().UTC().Truncate(time.Second)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); now = now.Add(time.Second); return now }
	writers := map[string]*audit.Writer{}
	for _, comp := range []string{"net", "kms"} {
		w, err := audit.Open(filepath.Join(logs, comp+".jsonl"), audit.Config{Component: comp, Policy: auditPolicy, SessionCA: audit.CAHash(ca.Cert()), SVID: ca.SVID(t, comp), Every: 3, Now: clock})
		if err != nil {
			t.Fatal(err)
		}
		writers[comp] = w
	}
	for i := range 5 {
		for _, comp := range []string{"net", "kms"} {
			w := writers[comp]
			if comp == "kms" && i > 2 {
				continue
			}
			e := audit.Event{Decision: []string{"allow", "deny"}[i%2], Reason: comp + " rule", Caller: "agent", Destination: "dest" + string(rune('0'+i))}
			if comp == "net" && i == 4 {
				e.Reason = "evil\x1b[31m\ttab"
			}
			if err := w.Log(e); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, w := range writers {
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return logs, caPEM, ca
}

func editFile(t *testing.T, path string, edit func([]byte) []byte) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(path, edit(data), 0o600)
}

// cutLast removes a log's last line, as a running component's log ends.
func cutLast(data []byte) []byte {
	data = bytes.TrimSuffix(data, []byte("\n"))
	return data[:bytes.LastIndexByte(data, '\n')+1]
}

func TestAuditVerify(t *testing.T) {
	logs, caPEM, _ := auditSession(t)
	other := filepath.Join(t.TempDir(), "other.pem")
	os.WriteFile(other, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: mtlstest.NewCA(t, "sharness.test").Cert().Raw}), 0o644)
	twoCerts := filepath.Join(t.TempDir(), "two.pem")
	pemData, _ := os.ReadFile(caPEM)
	os.WriteFile(twoCerts, append(pemData, pemData...), 0o644)
	trust := []string{"--ca", caPEM, "--policy-hash", auditPolicy}
	cases := []struct {
		name  string
		edit  func(dir string)
		args  []string
		code  int
		wants []string // in stdout+stderr
	}{
		{"intact", nil, trust, ExitOK, []string{"ok: LOGS/kms.jsonl: kms, 6 lines, 3 events, 2 checkpoints, 1 starts, ends with its shutdown checkpoint\n", "ok: LOGS/net.jsonl: net, 9 lines"}},
		{"changed line", func(dir string) {
			editFile(t, filepath.Join(dir, "net.jsonl"), func(b []byte) []byte {
				return bytes.Replace(b, []byte(`"decision":"deny"`), []byte(`"decision":"allow"`), 1)
			})
		}, trust, ExitRefused, []string{"LOGS/net.jsonl:4: prev is not the hash of line 3", "ok: LOGS/kms.jsonl", "sharness-ai: 1 of 2 audit logs do not verify\n"}},
		{"running, strict", func(dir string) { editFile(t, filepath.Join(dir, "kms.jsonl"), cutLast) }, trust, ExitRefused, []string{"LOGS/kms.jsonl:5: unsigned tail after line 4: lines 5-5 carry no valid checkpoint signature (the log was cut, or its component is still running)"}},
		{"running, allowed", func(dir string) { editFile(t, filepath.Join(dir, "kms.jsonl"), cutLast) }, append([]string{"--allow-running"}, trust...), ExitOK, []string{"LOGS/kms.jsonl:5: note: unsigned tail after line 4", "ok: LOGS/kms.jsonl: kms, 5 lines, 3 events, 1 checkpoints, 1 starts, running: verified up to its checkpoint at line 4, line 5 not yet checkpointed\n",
			"running: 1 log verified up to its last checkpoint; 1 line after it not yet checkpointed"}},
		{"running, allowed, changed line", func(dir string) {
			editFile(t, filepath.Join(dir, "kms.jsonl"), cutLast)
			editFile(t, filepath.Join(dir, "net.jsonl"), func(b []byte) []byte {
				return bytes.Replace(b, []byte(`"decision":"deny"`), []byte(`"decision":"allow"`), 1)
			})
		}, append([]string{"--allow-running"}, trust...), ExitRefused, []string{"LOGS/net.jsonl:4: prev is not the hash of line 3", "1 of 2 audit logs do not verify"}},
		{"running, allowed, cut mid-line", func(dir string) {
			editFile(t, filepath.Join(dir, "kms.jsonl"), func(b []byte) []byte { return b[:len(b)-10] })
		}, append([]string{"--allow-running"}, trust...), ExitRefused, []string{"LOGS/kms.jsonl:6: unterminated last line"}},
		{"another session", nil, []string{"--ca", other, "--policy-hash", auditPolicy}, ExitRefused, []string{"LOGS/kms.jsonl:1: session CA", "a log of another session", "2 of 2 audit logs"}},
		{"another policy", nil, []string{"--ca", caPEM, "--policy-hash", "sha256:" + strings.Repeat("cd", 32)}, ExitRefused, []string{"another policy"}},
		{"final seq", nil, append([]string{"--final-seq", "kms=9", "--final-seq", "db=4", "--final-seq", "net=9"}, trust...), ExitRefused, []string{"LOGS/kms.jsonl:6: the log ends at seq 6, the expected last seq is 9", "db (missing): no log of component db", "ok: LOGS/net.jsonl", "2 of 3 audit logs"}},
		{"a second log of a component", func(dir string) {
			data, _ := os.ReadFile(filepath.Join(dir, "net.jsonl"))
			os.WriteFile(filepath.Join(dir, "net2.jsonl"), data, 0o600)
		}, trust, ExitRefused, []string{"LOGS/net2.jsonl:1: a second log of component net (the first is LOGS/net.jsonl)"}},
		{"no CA", nil, []string{"--policy-hash", auditPolicy}, ExitUsage, []string{"--ca or --project is required"}},
		{"two certificates", nil, []string{"--ca", twoCerts, "--policy-hash", auditPolicy}, ExitUsage, []string{"want exactly one PEM certificate"}},
		{"bad policy hash", nil, []string{"--ca", caPEM, "--policy-hash", "abc"}, ExitUsage, []string{"--policy-hash"}},
		{"bad final seq", nil, append([]string{"--final-seq", "kms=0"}, trust...), ExitUsage, []string{"--final-seq kms=0"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "logs")
			os.CopyFS(dir, os.DirFS(logs))
			if tc.edit != nil {
				tc.edit(dir)
			}
			code, out, errOut := run(t, append(append([]string{"audit", "verify"}, tc.args...), dir)...)
			got := strings.ReplaceAll(out+errOut, dir, "LOGS")
			if code != tc.code {
				t.Errorf("exit %d, want %d\n%s", code, tc.code, got)
			}
			for _, want := range tc.wants {
				if !strings.Contains(got, want) {
					t.Errorf("output lacks %q:\n%s", want, got)
				}
			}
		})
	}
	for _, bad := range [][]string{{filepath.Join(logs, "none.jsonl")}, {t.TempDir()}} {
		if code, _, errOut := run(t, append(append([]string{"audit", "verify"}, trust...), bad...)...); code != ExitUsage {
			t.Errorf("verify %s: exit %d, want %d (%s)", bad, code, ExitUsage, errOut)
		}
	}
	code, out, _ := run(t, append(append([]string{"audit", "verify", "--json"}, trust...), logs)...)
	var got struct {
		OK   bool `json:"ok"`
		Logs []struct {
			File   string       `json:"file"`
			OK     bool         `json:"ok"`
			Report audit.Report `json:"report"`
		} `json:"logs"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil || code != ExitOK || !got.OK || len(got.Logs) != 2 || !got.Logs[1].Report.Final || got.Logs[1].Report.Events != 5 {
		t.Errorf("--json: exit %d, %v, %+v\n%s", code, err, got, out)
	}
}

func TestAuditShow(t *testing.T) {
	logs, caPEM, _ := auditSession(t)
	trust := []string{"--ca", caPEM, "--policy-hash", auditPolicy}
	code, out, errOut := run(t, append(append([]string{"audit", "show"}, trust...), logs)...)
	rows := strings.Split(strings.TrimSpace(out), "\n")
	if code != ExitOK || len(rows) != 9 || !strings.HasPrefix(rows[0], "TIME") || errOut != "" {
		t.Fatalf("show: exit %d, %d rows\n%s%s", code, len(rows), out, errOut)
	}
	// The two logs interleave by time: net and kms take turns until kms stops.
	for i, comp := range []string{"net", "kms", "net", "kms", "net", "kms", "net", "net"} {
		if f := strings.Fields(rows[i+1]); f[1] != comp {
			t.Errorf("row %d: %q, want component %s", i+1, rows[i+1], comp)
		}
	}
	if !strings.Contains(out, `"evil\x1b[31m\ttab"`) {
		t.Errorf("control characters reach the terminal unquoted:\n%q", out)
	}
	code, out, _ = run(t, append(append([]string{"audit", "show", "--component", "kms", "--decision", "deny", "--since", "1h"}, trust...), logs)...)
	if rows := strings.Split(strings.TrimSpace(out), "\n"); code != ExitOK || len(rows) != 2 || !strings.Contains(rows[1], "kms rule") || !strings.Contains(rows[1], "dest1") {
		t.Errorf("filtered: exit %d\n%s", code, out)
	}
	code, out, _ = run(t, append(append([]string{"audit", "show", "--until", "2000-01-01T00:00:00Z"}, trust...), logs)...)
	if strings.TrimSpace(out) != "TIME  COMPONENT  DECISION  REASON  CALLER  DESTINATION" || code != ExitOK {
		t.Errorf("--until in the past: exit %d\n%q", code, out)
	}
	code, out, _ = run(t, append(append([]string{"audit", "show", "--json", "--component", "net"}, trust...), logs)...)
	var entries []struct {
		File     string `json:"file"`
		Verified bool   `json:"verified"`
		Line     int    `json:"line"`
		Decision string `json:"decision"`
	}
	if err := json.Unmarshal([]byte(out), &entries); err != nil || code != ExitOK || len(entries) != 5 || !entries[0].Verified || entries[0].Line != 2 || entries[0].Decision != "allow" {
		t.Errorf("--json: exit %d, %v, %+v\n%s", code, err, entries, out)
	}

	editFile(t, filepath.Join(logs, "net.jsonl"), func(b []byte) []byte {
		return bytes.Replace(b, []byte(`"decision":"deny"`), []byte(`"decision":"allow"`), 1)
	})
	code, out, errOut = run(t, append(append([]string{"audit", "show"}, trust...), logs)...)
	if code != ExitRefused || out != "" || !strings.Contains(errOut, "net.jsonl:4: prev is not the hash of line 3") || !strings.Contains(errOut, "nothing shown") {
		t.Errorf("tampered: exit %d\nstdout %q\nstderr %s", code, out, errOut)
	}
	code, out, errOut = run(t, "audit", "show", "--unverified", logs)
	rows = strings.Split(strings.TrimSpace(out), "\n")
	if code != ExitRefused || len(rows) != 9 || !strings.Contains(errOut, "net.jsonl:4: prev is not the hash of line 3") || !strings.Contains(errOut, "1 of 2 audit logs are broken") {
		t.Errorf("--unverified: exit %d\n%s\n%s", code, out, errOut)
	}
	for _, r := range rows {
		if !strings.HasPrefix(r, "UNVERIFIED") {
			t.Errorf("row not labelled unverified: %q", r)
		}
	}
	if code, _, errOut := run(t, "audit", "show", logs); code != ExitUsage || !strings.Contains(errOut, "--unverified") {
		t.Errorf("show without trust: exit %d, %s", code, errOut)
	}
	if code, _, errOut := run(t, "audit", "show", "--unverified", "--since", "yesterday", logs); code != ExitUsage || !strings.Contains(errOut, "--since") {
		t.Errorf("bad --since: exit %d, %s", code, errOut)
	}
}

// projectSession writes the audit volumes of compose project "demo" as the stack leaves them:
// <root>/<volume>/_data/audit.jsonl for the launcher (whose first event is the session record),
// net and kms, and fakes the engine to list and inspect them (plus volumes of other projects),
// and to list the project's containers (demoRunning).
func projectSession(t *testing.T, record func(ca *mtlstest.CA) map[string]string) (root string, ca *mtlstest.CA, e *enginetest.Engine) {
	t.Helper()
	ca = mtlstest.NewCA(t, "sharness.test")
	root = t.TempDir()
	for _, comp := range []string{"launcher", "net", "kms"} {
		dir := filepath.Join(root, "demo_audit-"+comp, "_data")
		os.MkdirAll(dir, 0o755)
		w, err := audit.Open(filepath.Join(dir, audit.FileName), audit.Config{Component: comp, Policy: auditPolicy, SessionCA: audit.CAHash(ca.Cert()), SVID: ca.SVID(t, comp)})
		if err != nil {
			t.Fatal(err)
		}
		e := audit.Event{Action: "egress", Decision: "deny", Caller: "agent", Destination: comp + ".example:443"}
		if r := record(ca); comp == "launcher" && r != nil {
			e = audit.Event{Action: "session_start", Decision: "allow", Fields: r}
		}
		if err := w.Log(e); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	e = &enginetest.Engine{}
	demoRunning = nil
	t.Cleanup(func() { demoRunning = nil })
	e.Hook = func(w http.ResponseWriter, r *http.Request, path string) bool {
		// The volumes are root's folders, as a test left them, and two others: the engine's name
		// filter matches anywhere in a name. The hook runs under e's lock.
		e.Volumes = []enginetest.Volume{{Name: "other_demo_audit-net"}, {Name: "demo_audit-Bad"}}
		entries, _ := os.ReadDir(root)
		for _, d := range entries {
			e.Volumes = append(e.Volumes, enginetest.Volume{Name: d.Name(), Mountpoint: filepath.Join(root, d.Name(), "_data")})
		}
		if path != "/containers/json" {
			return false
		}
		if !strings.Contains(r.URL.Query().Get("filters"), `"com.docker.compose.project=demo":true`) {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, `{"message":"unexpected filters %s"}`, r.URL.Query().Get("filters"))
			return true
		}
		cs := []container.Summary{}
		for _, comp := range demoRunning {
			cs = append(cs, container.Summary{ID: "id-" + comp, Names: []string{"/demo-" + comp + "-1"}, State: "running",
				Labels: map[string]string{"com.docker.compose.project": "demo", "com.docker.compose.service": comp, "com.docker.compose.oneoff": "False"}})
		}
		cs = append(cs, container.Summary{ID: "id-agent", Names: []string{"/demo-agent-run-1a2b"}, State: "exited",
			Labels: map[string]string{"com.docker.compose.project": "demo", "com.docker.compose.service": "agent", "com.docker.compose.oneoff": "True"}})
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(cs)
		return true
	}
	useAPI(t, e)
	return root, ca, e
}

// demoRunning are the components of project "demo" whose container runs, as the engine says
// (projectSession's fake): none, unless a test says so.
var demoRunning []string

// sessionRecord is the launcher's session record for ca, as the launcher writes it.
func sessionRecord(ca *mtlstest.CA) map[string]string {
	return map[string]string{"session_ca_sha256": audit.CAHash(ca.Cert()), "policy": auditPolicy, "ca_cert": base64.StdEncoding.EncodeToString(ca.Cert().Raw)}
}

func TestAuditProject(t *testing.T) {
	root, ca, e := projectSession(t, sessionRecord)
	trust := []string{"--project", "demo", "--policy-hash", auditPolicy}
	code, out, errOut := run(t, append([]string{"audit", "verify"}, trust...)...)
	got := strings.ReplaceAll(out+errOut, root, "ROOT")
	for _, want := range []string{
		"session CA sha256 " + audit.CAHash(ca.Cert()) + ", from the session record in ROOT/demo_audit-launcher/_data/audit.jsonl: compare it with session_ca_sha256 in the launcher's \"session started\" line (docker compose -p demo logs launcher)\n",
		"ok: ROOT/demo_audit-kms/_data/audit.jsonl: kms, 3 lines, 1 events",
		"ok: ROOT/demo_audit-launcher/_data/audit.jsonl: launcher, 3 lines",
		"ok: ROOT/demo_audit-net/_data/audit.jsonl: net, 3 lines",
	} {
		if code != ExitOK || !strings.Contains(got, want) {
			t.Errorf("verify --project: exit %d, output lacks %q:\n%s", code, want, got)
		}
	}
	if strings.Contains(got, "other_demo") || strings.Contains(got, "Bad") {
		t.Errorf("verify read volumes of another project, or not named for a component:\n%s", got)
	}
	wantCalls := []string{`GET /volumes?filters={"name":{"demo_audit-":true}}`, "GET /volumes/demo_audit-kms", "GET /volumes/demo_audit-launcher", "GET /volumes/demo_audit-net"}
	if diff := cmp.Diff(wantCalls, slices.DeleteFunc(e.Requests(), func(r string) bool { return !strings.HasPrefix(r, "GET /volumes") })); diff != "" {
		t.Errorf("volume requests (-want +got):\n%s", diff)
	}

	code, out, errOut = run(t, append([]string{"audit", "show", "--component", "net"}, trust...)...)
	if rows := strings.Split(strings.TrimSpace(out), "\n"); code != ExitOK || len(rows) != 2 || !strings.Contains(rows[1], "net.example:443") || !strings.Contains(errOut, "session CA sha256 "+audit.CAHash(ca.Cert())) {
		t.Errorf("show --project: exit %d\n%s\n%s", code, out, errOut)
	}
	if code, _, errOut := run(t, append([]string{"audit", "verify", "--ca-sha256", strings.Repeat("0", 64)}, trust...)...); code != ExitUsage || !strings.Contains(errOut, "not "+strings.Repeat("0", 64)) {
		t.Errorf("pinned to another CA: exit %d, %s", code, errOut)
	}

	// A log in another component's volume fails: the volume names the component.
	net, kms := filepath.Join(root, "demo_audit-net", "_data", audit.FileName), filepath.Join(root, "demo_audit-kms", "_data", audit.FileName)
	data, _ := os.ReadFile(kms)
	os.WriteFile(net, data, 0o600)
	if code, out, _ := run(t, append([]string{"audit", "verify"}, trust...)...); code != ExitRefused || !strings.Contains(out, "demo_audit-net/_data/audit.jsonl:1: component kms") {
		t.Errorf("kms's log in net's volume: exit %d\n%s", code, out)
	}
	// A volume without its log fails.
	os.Remove(net)
	if code, out, _ := run(t, append([]string{"audit", "verify"}, trust...)...); code != ExitRefused || !strings.Contains(out, "no log of component net in its volume") {
		t.Errorf("no log in net's volume: exit %d\n%s", code, out)
	}
}

func TestAuditProjectRefuses(t *testing.T) {
	other := mtlstest.NewCA(t, "sharness.test")
	trust := []string{"--project", "demo", "--policy-hash", auditPolicy}
	for _, tc := range []struct {
		name   string
		record func(*mtlstest.CA) map[string]string
		edit   func(root string)
		args   []string
		code   int
		want   string
	}{
		{"a CA that is not the one named", func(ca *mtlstest.CA) map[string]string {
			r := sessionRecord(ca)
			r["ca_cert"] = base64.StdEncoding.EncodeToString(other.Cert().Raw)
			return r
		}, nil, trust, ExitUsage, "the session record's ca_cert has SHA-256 " + audit.CAHash(other.Cert())},
		{"another session's record", func(*mtlstest.CA) map[string]string { return sessionRecord(other) }, nil, trust, ExitRefused, "a log of another session"},
		{"ca_cert not base64", func(ca *mtlstest.CA) map[string]string {
			r := sessionRecord(ca)
			r["ca_cert"] = "!"
			return r
		}, nil, trust, ExitUsage, "not base64"},
		{"no session record", func(*mtlstest.CA) map[string]string { return nil }, nil, trust, ExitUsage, "its first event is not the session record"},
		{"no launcher log", sessionRecord, func(root string) { os.Remove(filepath.Join(root, "demo_audit-launcher", "_data", audit.FileName)) }, trust, ExitUsage, "read the session record"},
		{"no launcher volume", sessionRecord, func(root string) { os.RemoveAll(filepath.Join(root, "demo_audit-launcher")) }, trust, ExitUsage, "no session record to take the session CA from"},
		{"files with --project", sessionRecord, nil, append([]string{"logs/"}, trust...), ExitUsage, "give no log files nor --ca with it"},
		{"--ca with --project", sessionRecord, nil, append([]string{"--ca", "ca.pem"}, trust...), ExitUsage, "give no log files nor --ca with it"},
		{"not a project name", sessionRecord, nil, []string{"--project", "Demo!", "--policy-hash", auditPolicy}, ExitUsage, "not a compose project name"},
		{"no volumes", sessionRecord, nil, []string{"--project", "nothing", "--policy-hash", auditPolicy}, ExitUsage, "no volume nothing_audit-<component> (docker volume ls): is the project name right?"},
		{"no policy hash", sessionRecord, nil, []string{"--project", "demo"}, ExitUsage, "--policy-hash"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("SHARNESS_AI_POLICY_HASH", "")
			root, _, _ := projectSession(t, tc.record)
			if tc.edit != nil {
				tc.edit(root)
			}
			code, out, errOut := run(t, append([]string{"audit", "verify"}, tc.args...)...)
			if code != tc.code || !strings.Contains(out+errOut, tc.want) {
				t.Errorf("exit %d, want %d with %q:\n%s%s", code, tc.code, tc.want, out, errOut)
			}
		})
	}
}

// TestAuditProjectRunning: on a running stack, `audit verify --project` verifies each log of a
// running component up to its last signed checkpoint and reports the rest as not yet
// checkpointed (exit 0), without --allow-running; the log of a component that does not run must
// still end signed, and a changed line fails whether its component runs or not. A missing policy
// hash is asked for by name before anything is read.
func TestAuditProjectRunning(t *testing.T) {
	t.Setenv("SHARNESS_AI_POLICY_HASH", "")
	trust := []string{"--project", "demo", "--policy-hash", auditPolicy}
	logOf := func(root, comp string) string {
		return filepath.Join(root, "demo_audit-"+comp, "_data", audit.FileName)
	}
	for _, tc := range []struct {
		name    string
		running []string
		edit    func(root string)
		args    []string
		code    int
		want    []string
		notWant []string
	}{
		{"running, ended signed", []string{"kms", "launcher", "net"}, nil, trust, ExitOK,
			[]string{"ok: ROOT/demo_audit-net/_data/audit.jsonl: net, 3 lines, 1 events, 1 checkpoints, 1 starts, ends with its shutdown checkpoint\n"}, []string{"not yet checkpointed"}},
		{"running, unsigned tails", []string{"kms", "launcher", "net"}, func(root string) {
			editFile(t, logOf(root, "net"), cutLast)
			editFile(t, logOf(root, "kms"), cutLast)
		}, trust, ExitOK, []string{
			"ok: ROOT/demo_audit-net/_data/audit.jsonl: net, 2 lines, 1 events, 0 checkpoints, 1 starts, running: no checkpoint signed yet, lines 1-2 not yet checkpointed\n",
			"ok: ROOT/demo_audit-launcher/_data/audit.jsonl: launcher, 3 lines, 1 events, 1 checkpoints, 1 starts, ends with its shutdown checkpoint\n",
			"running: 2 logs verified up to their last checkpoint; 4 lines after it not yet checkpointed (unsigned, so unproven: verify again after down for every line signed)\n",
		}, []string{"do not verify"}},
		{"--allow-running still accepted", []string{"kms", "launcher", "net"}, func(root string) { editFile(t, logOf(root, "net"), cutLast) },
			append([]string{"--allow-running"}, trust...), ExitOK, []string{"net, 2 lines", "running: 1 log verified up to its last checkpoint; 2 lines after it not yet checkpointed"}, nil},
		{"stopped component, unsigned tail", []string{"kms", "launcher"}, func(root string) { editFile(t, logOf(root, "net"), cutLast) }, trust, ExitRefused,
			[]string{"ROOT/demo_audit-net/_data/audit.jsonl:2: unsigned tail after line 0: lines 1-2 carry no valid checkpoint signature (the log was cut, or its component is still running)", "1 of 3 audit logs do not verify"}, nil},
		{"stopped stack, cut at the shutdown checkpoint", nil, func(root string) { editFile(t, logOf(root, "kms"), cutLast) }, trust, ExitRefused,
			[]string{"demo_audit-kms/_data/audit.jsonl:2: unsigned tail"}, nil},
		{"running, a signed line changed", []string{"kms", "launcher", "net"}, func(root string) {
			editFile(t, logOf(root, "net"), func(b []byte) []byte {
				return bytes.Replace(b, []byte(`net.example:443`), []byte(`evil.example:443`), 1)
			})
		}, trust, ExitRefused, []string{"ROOT/demo_audit-net/_data/audit.jsonl:3: prev is not the hash of line 2", "1 of 3 audit logs do not verify"}, nil},
		{"running, lines reordered", []string{"kms", "launcher", "net"}, func(root string) {
			editFile(t, logOf(root, "kms"), func(b []byte) []byte {
				l := bytes.SplitAfter(b, []byte("\n"))
				return bytes.Join([][]byte{l[0], l[2], l[1]}, nil)
			})
		}, trust, ExitRefused, []string{"ROOT/demo_audit-kms/_data/audit.jsonl:2: seq 3 follows seq 1", "1 of 3 audit logs do not verify"}, nil},
		{"running, another policy", []string{"kms", "launcher", "net"}, nil, []string{"--project", "demo", "--policy-hash", "sha256:" + strings.Repeat("cd", 32)}, ExitRefused,
			[]string{"another policy", "3 of 3 audit logs do not verify"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, _, _ := projectSession(t, sessionRecord)
			demoRunning = tc.running
			if tc.edit != nil {
				tc.edit(root)
			}
			code, out, errOut := run(t, append([]string{"audit", "verify"}, tc.args...)...)
			got := strings.ReplaceAll(out+errOut, root, "ROOT")
			if code != tc.code {
				t.Errorf("exit %d, want %d\n%s", code, tc.code, got)
			}
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("output lacks %q:\n%s", w, got)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(got, w) {
					t.Errorf("output has %q:\n%s", w, got)
				}
			}
		})
	}

	t.Run("no policy hash", func(t *testing.T) {
		_, _, e := projectSession(t, sessionRecord)
		for _, verb := range [][]string{{"audit", "verify"}, {"audit", "show"}} {
			code, out, errOut := run(t, append(verb, "--project", "demo")...)
			want := "sharness-ai: no policy hash to verify the logs against: give --policy-hash sha256:<hex> or set SHARNESS_AI_POLICY_HASH to the hash you trust"
			if code != ExitUsage || !strings.Contains(errOut, want) || strings.Contains(errOut, `policy hash ""`) {
				t.Errorf("%v without a hash: exit %d, want %d with %q\n%s%s", verb, code, ExitUsage, want, out, errOut)
			}
		}
		if reqs := e.Requests(); len(reqs) > 0 {
			t.Errorf("read the volumes before asking for the hash: %q", reqs)
		}
	})
}
