package record

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sharness-ai/sharness/internal/audit"
	"github.com/sharness-ai/sharness/testkit/mtlstest"
)

// TestScanRunning: a log marked Running verifies up to its last signed checkpoint and its
// unsigned tail is a notice; the same log not marked running fails, and a running log with a
// signed line changed or cut mid-line fails either way.
func TestScanRunning(t *testing.T) {
	ca := mtlstest.NewCA(t, "sharness.test")
	policy := "sha256:" + strings.Repeat("ab", 32)
	dir := t.TempDir()
	file := filepath.Join(dir, "net.jsonl")
	w, err := audit.Open(file, audit.Config{Component: "net", Policy: policy, SessionCA: audit.CAHash(ca.Cert()), SVID: ca.SVID(t, "net"), Every: 2})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := w.Log(audit.Event{Decision: "deny", Reason: "r", Destination: strings.Repeat("x", i+1)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	intact, _ := os.ReadFile(file)
	lines := bytes.SplitAfter(intact, []byte("\n"))
	// A checkpoint every 2 lines: start, event, checkpoint, event... Cut after the second event,
	// the log ends with an unsigned tail, as a running log does.
	running := bytes.Join(lines[:4], nil)
	if !bytes.Contains(lines[2], []byte(`"type":"checkpoint"`)) || !bytes.Contains(lines[3], []byte(`"type":"event"`)) {
		t.Fatalf("the log is not start, event, checkpoint, event...:\n%s", intact)
	}
	tr := audit.Trust{CA: ca.Cert(), Policy: policy}
	for _, tc := range []struct {
		name    string
		data    []byte
		running bool
		ok      bool
		final   bool
		reason  string // of the first failure, or of the notice
	}{
		{"intact, stopped", intact, false, true, true, ""},
		{"intact, running", intact, true, true, true, ""},
		{"unsigned tail, running", running, true, true, false, "unsigned tail after line"},
		{"unsigned tail, not running", running, false, false, false, "(the log was cut, or its component is still running)"},
		{"a signed line changed, running", bytes.Replace(running, []byte(`"destination":"x"`), []byte(`"destination":"y"`), 1), true, false, false, "prev is not the hash of line"},
		{"cut mid-line, running", running[:len(running)-5], true, false, false, "unterminated last line"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := filepath.Join(t.TempDir(), "audit.jsonl")
			os.WriteFile(f, tc.data, 0o600)
			rs, err := Scan([]Log{{File: f, Component: "net", Running: tc.running}}, &tr, func(string, audit.Entry) {})
			if err != nil || len(rs) != 1 {
				t.Fatalf("Scan: %v, %d results", err, len(rs))
			}
			r := rs[0]
			if r.OK != tc.ok || r.Report.Final != tc.final {
				t.Fatalf("ok %v final %v, want %v %v: %+v", r.OK, r.Report.Final, tc.ok, tc.final, r.Report)
			}
			var got string
			if len(r.Report.Failures) > 0 {
				got = r.Report.Failures[0].Reason
			} else if len(r.Report.Notices) > 0 {
				got = r.Report.Notices[len(r.Report.Notices)-1].Reason
			}
			if !strings.Contains(got, tc.reason) {
				t.Errorf("reason %q, want it to contain %q", got, tc.reason)
			}
		})
	}
}
