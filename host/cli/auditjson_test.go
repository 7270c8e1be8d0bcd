package cli

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestAuditVerifyJSONTampered: `audit verify --json` on a tampered log exits 1 and prints, for
// scripts, one JSON document on stdout: ok false, and for the broken log its failures, each with
// the line number and the reason; the intact log beside it is ok.
func TestAuditVerifyJSONTampered(t *testing.T) {
	logs, caPEM, _ := auditSession(t)
	editFile(t, filepath.Join(logs, "net.jsonl"), func(b []byte) []byte {
		return bytes.Replace(b, []byte(`"decision":"deny"`), []byte(`"decision":"allow"`), 1)
	})
	code, out, errOut := run(t, "audit", "verify", "--json", "--ca", caPEM, "--policy-hash", auditPolicy, logs)
	if code != ExitRefused || !strings.Contains(errOut, "1 of 2 audit logs do not verify") {
		t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, ExitRefused, out, errOut)
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("stdout is not one JSON document: %v\n%s", err, out)
	}
	keys := func(m map[string]json.RawMessage) []string {
		var k []string
		for key := range m {
			k = append(k, key)
		}
		slices.Sort(k)
		return k
	}
	if diff := cmp.Diff([]string{"logs", "ok", "policy", "session_ca", "session_ca_from"}, keys(doc)); diff != "" {
		t.Errorf("top-level keys (-want +got):\n%s", diff)
	}
	var got struct {
		OK   bool `json:"ok"`
		Logs []struct {
			File   string `json:"file"`
			OK     bool   `json:"ok"`
			Report struct {
				Component string `json:"component"`
				Failures  []struct {
					Line   int    `json:"line"`
					Reason string `json:"reason"`
				} `json:"failures"`
			} `json:"report"`
		} `json:"logs"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	if got.OK || len(got.Logs) != 2 {
		t.Fatalf("ok %v, %d logs, want false and 2\n%s", got.OK, len(got.Logs), out)
	}
	byComponent := map[string]int{}
	for i, l := range got.Logs {
		byComponent[l.Report.Component] = i
	}
	net, kms := got.Logs[byComponent["net"]], got.Logs[byComponent["kms"]]
	if net.OK || net.File != filepath.Join(logs, "net.jsonl") || len(net.Report.Failures) == 0 {
		t.Fatalf("net: %+v, want not ok with failures", net)
	}
	if f := net.Report.Failures[0]; f.Line != 4 || f.Reason != "prev is not the hash of line 3 (that line was changed, or lines were deleted, inserted or moved)" {
		t.Errorf("net's first failure %+v, want line 4: prev is not the hash of line 3…", f)
	}
	if !kms.OK || len(kms.Report.Failures) != 0 {
		t.Errorf("kms: %+v, want ok", kms)
	}
	// Each failure's keys are exactly line and reason.
	var raw struct {
		Logs []struct {
			Report struct {
				Failures []map[string]json.RawMessage `json:"failures"`
			} `json:"report"`
		} `json:"logs"`
	}
	json.Unmarshal([]byte(out), &raw)
	if diff := cmp.Diff([]string{"line", "reason"}, keys(raw.Logs[byComponent["net"]].Report.Failures[0])); diff != "" {
		t.Errorf("failure keys (-want +got):\n%s", diff)
	}
}
