package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sharness-ai/sharness/internal/audit"
	"github.com/sharness-ai/sharness/policies/pbp"
)

// checkRecord reads the launcher's audit log as `audit verify --project` does: the session CA
// from the session record, whose hash must be caSum, then the whole log against it.
func checkRecord(t *testing.T, m *pbp.Manifest, dir, caSum string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, audit.FileName))
	if err != nil {
		t.Fatal(err)
	}
	var events []audit.Event
	if _, err := audit.Scan(bytes.NewReader(data), nil, func(e audit.Entry) { events = append(events, e.Event) }); err != nil || len(events) == 0 {
		t.Fatalf("launcher audit log: %v, %d events", err, len(events))
	}
	rec := events[0]
	der, err := base64.StdEncoding.DecodeString(rec.Fields["ca_cert"])
	if err != nil {
		t.Fatalf("ca_cert: %v", err)
	}
	sum := sha256.Sum256(der)
	if rec.Action != "session_start" || rec.Fields["session_ca_sha256"] != caSum || hex.EncodeToString(sum[:]) != caSum || rec.Fields["policy"] != m.Hash {
		t.Errorf("session record %+v: want the session CA %s and policy %s", rec, caSum, m.Hash)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := audit.Scan(bytes.NewReader(data), &audit.Trust{CA: ca, CASHA256: caSum, Policy: m.Hash, Component: "launcher"}, nil)
	if err != nil || !rep.Final {
		t.Fatalf("verify the launcher's log: %v, %+v\n%s", err, rep, data)
	}
	want := []string{"session_start allow"}
	for _, role := range []string{"agent", "bash", "fs", "kms", "launcher", "llm", "net"} {
		want = append(want, "svid_issue allow spiffe://"+m.TrustDomain+"/"+role+" "+role)
	}
	want = append(want, "ca_key destroyed", "session_stop stopped signal")
	var got []string
	for _, e := range events {
		got = append(got, strings.TrimSpace(strings.Join([]string{e.Action, e.Decision, e.Destination, e.Fields["role"]}, " ")))
		if e.Action == "session_stop" {
			got[len(got)-1] += " " + e.Reason
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("launcher events (-want +got):\n%s", diff)
	}
}

// TestRecordRequired: without its audit folder the launcher refuses to start, before any role
// has a socket.
func TestRecordRequired(t *testing.T) {
	m := loadFull(t)
	cfg := testConfig(t, m, io.Discard)
	cfg.auditDir = filepath.Join(cfg.auditDir, "missing")
	err := run(context.Background(), cfg)
	if !errors.As(err, new(*refusal)) || !strings.Contains(err.Error(), "no audit folder") {
		t.Fatalf("run = %v, want a refusal naming the audit folder", err)
	}
	assertNoSockets(t, cfg.identityRoot)
}

// TestCACertFits: the session record carries the CA certificate in one event value, for the
// longest trust domain a manifest may name.
func TestCACertFits(t *testing.T) {
	m := loadFull(t)
	m.TrustDomain = strings.Repeat("a", 63)
	ids, err := issue(m, "launcher", maxSession, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if n := base64.StdEncoding.EncodedLen(len(ids.caDER)); n > audit.MaxValue {
		t.Errorf("ca_cert is %d bytes in base64, over audit.MaxValue %d", n, audit.MaxValue)
	} else {
		t.Logf("ca_cert: %d of %d bytes", n, audit.MaxValue)
	}
}
