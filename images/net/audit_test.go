package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spiffe/go-spiffe/v2/bundle/x509bundle"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"

	"github.com/sharness-ai/sharness/internal/audit"
	"github.com/sharness-ai/sharness/testkit/mtlstest"
)

// TestAuditLog: every decision net logs is also in its audit log, with the verdict, rule,
// reason, caller and host:port, and the log verifies against the session once net stops.
func TestAuditLog(t *testing.T) {
	h := newHarness(t)
	ca := mtlstest.NewCA(t, "sharness.test")
	policy := "sha256:" + strings.Repeat("ab", 32)
	dir := t.TempDir()
	w, err := audit.OpenComponent(dir, struct {
		*x509svid.SVID
		*x509bundle.Bundle
	}{ca.SVID(t, "net"), ca.Bundle()}, "net", policy)
	if err != nil {
		t.Fatal(err)
	}
	h.s.audit = w
	h.start(t, nil, nil)
	tc, err := h.connectTLS(t, fmt.Sprintf("allowed.test:%d", h.tlsPort), "allowed.test")
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(tc, "GET / HTTP/1.1\r\nHost: allowed.test\r\nConnection: close\r\n\r\n")
	io.ReadAll(tc)
	tc.Close()
	h.log.waitDecision(t, "hosts")
	h.raw(t, fmt.Sprintf("GET http://denied.test:%d/ HTTP/1.1\r\nHost: a\r\n\r\n", h.plainPort))
	h.log.waitDecision(t, "host-not-allowed")
	h.cancel()
	select {
	case <-h.done:
	case <-time.After(20 * time.Second):
		t.Fatal("net did not stop")
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	f, err := os.Open(filepath.Join(dir, audit.FileName))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var got []audit.Entry
	if _, err := audit.Scan(f, &audit.Trust{CA: ca.Cert(), Policy: policy, Component: "net"}, func(e audit.Entry) { got = append(got, e) }); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(h.log.decisions()) {
		t.Errorf("%d audit events for %d decisions", len(got), len(h.log.decisions()))
	}
	want := map[string]string{
		"allow " + fmt.Sprintf("allowed.test:%d", h.tlsPort): "hosts CONNECT",
		"deny " + fmt.Sprintf("denied.test:%d", h.plainPort): "host-not-allowed GET",
	}
	for _, e := range got {
		key := e.Decision + " " + e.Destination
		if w, ok := want[key]; ok && w == e.Fields["rule"]+" "+e.Fields["method"] && e.Caller == "agent" && e.Action == "egress" && e.Reason != "" {
			delete(want, key)
		}
	}
	if len(want) > 0 {
		t.Errorf("missing audit events %v in %+v", want, got)
	}
}

// TestAuditFailureRefuses: once net's audit log takes no more lines (here it is closed; in the
// stack a full or read-only volume), net decides nothing: an allowed CONNECT is refused 503
// audit-unavailable, naming what the person must do (issue 22; e2e TestFaults/net/disk-full).
func TestAuditFailureRefuses(t *testing.T) {
	h := newHarness(t)
	ca := mtlstest.NewCA(t, "sharness.test")
	w, err := audit.OpenComponent(t.TempDir(), struct {
		*x509svid.SVID
		*x509bundle.Bundle
	}{ca.SVID(t, "net"), ca.Bundle()}, "net", "sha256:"+strings.Repeat("ab", 32))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	h.s.audit = w
	h.start(t, nil, nil)
	resp, body, c := h.raw(t, fmt.Sprintf("CONNECT allowed.test:%d HTTP/1.1\r\nHost: allowed.test\r\n\r\n", h.tlsPort))
	if c != nil {
		c.Close()
	}
	if resp == nil || resp.StatusCode != 503 || resp.Header.Get("X-Sharness-Deny") != "audit-unavailable" || !strings.Contains(body, "restart net") {
		t.Errorf("an allowed CONNECT with the audit log closed: %v %q, want 503 audit-unavailable saying to restart net", resp, body)
	}
}
