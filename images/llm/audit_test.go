package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spiffe/go-spiffe/v2/bundle/x509bundle"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"

	"github.com/sharness-ai/sharness/internal/audit"
	"github.com/sharness-ai/sharness/testkit/mtlstest"
)

// TestAuditLog: each request is one event in llm's audit log, with its verdict, reason, model
// and token usage, and nothing of the prompt or the key; the log verifies once llm stops.
func TestAuditLog(t *testing.T) {
	h := newHarness(t, llmPolicy(t))
	ca := mtlstest.NewCA(t, "sharness.test")
	policy := "sha256:" + strings.Repeat("ab", 32)
	dir := t.TempDir()
	w, err := audit.OpenComponent(dir, struct {
		*x509svid.SVID
		*x509bundle.Bundle
	}{ca.SVID(t, "llm"), ca.Bundle()}, "llm", policy)
	if err != nil {
		t.Fatal(err)
	}
	h.s.audit, h.s.caller = w, "agent"
	h.post(t, "/v1/messages", req(`,"stream":true,"tools":`+testTools))
	h.post(t, "/v1/messages", strings.Replace(req(""), "hello", planted, 1))
	h.srv.Close() // waits for the handlers, and so for their records
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, audit.FileName))
	if err != nil {
		t.Fatal(err)
	}
	if l := string(data); strings.Contains(l, planted) || strings.Contains(l, realKey) || strings.Contains(l, "hello") {
		t.Errorf("the audit log holds content or the key:\n%s", l)
	}
	var got []audit.Event
	if _, err := audit.Scan(strings.NewReader(string(data)), &audit.Trust{CA: ca.Cert(), Policy: policy, Component: "llm"}, func(e audit.Entry) { got = append(got, e.Event) }); err != nil {
		t.Fatal(err)
	}
	fields := func(stream, status, in, out, cacheRead, spent, tools, hits, where string) map[string]string {
		return map[string]string{"model": model, "stream": stream, "status": status, "input_tokens": in, "output_tokens": out,
			"cache_creation_tokens": "0", "cache_read_tokens": cacheRead, "spent_tokens": spent, "tools": tools,
			"filter_hits": hits, "filter_where": where, "redacted": "false", "request_id": map[string]string{"200": "req_test"}[status]}
	}
	want := []audit.Event{
		{Action: "request", Decision: "allow", Caller: "agent", Destination: "POST /v1/messages", Fields: fields("true", "200", "25", "15", "5", "45", "read_file", "", "")},
		{Action: "request", Decision: "deny", Reason: "secret", Caller: "agent", Destination: "POST /v1/messages", Fields: fields("false", "400", "0", "0", "0", "45", "", "planted", "messages[0]")},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("audit events (-want +got):\n%s", diff)
	}
}
