package audit

import (
	"bytes"
	"context"
	"crypto/x509"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/spiffe/go-spiffe/v2/bundle/x509bundle"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"

	"github.com/sharness-ai/sharness/policies/compile"
	"github.com/sharness-ai/sharness/testkit/mtlstest"
)

// identity is what mtls.Source hands a component: its SVID and the session bundle.
type identity struct {
	*x509svid.SVID
	*x509bundle.Bundle
}

func TestDefaultDirIsTheCompilersAuditDir(t *testing.T) {
	if DefaultDir != compile.AuditDir {
		t.Errorf("DefaultDir = %q, compile.AuditDir = %q: the stack mounts the volume where the compiler says", DefaultDir, compile.AuditDir)
	}
}

func TestOpenComponent(t *testing.T) {
	ca := mtlstest.NewCA(t, "sharness.test")
	id := identity{ca.SVID(t, "net"), ca.Bundle()}
	dir := t.TempDir()
	for range 2 { // the second start continues the first's chain
		w, err := OpenComponent(dir, id, "net", policy)
		if err != nil {
			t.Fatal(err)
		}
		w.Record(slog.New(slog.DiscardHandler), Event{Action: "connect", Decision: "deny", Destination: strings.Repeat("a", 2*MaxValue)})
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.Open(filepath.Join(dir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rep, err := Scan(f, &Trust{CA: ca.Cert(), Policy: policy, Component: "net"}, nil)
	if err != nil || rep.Starts != 2 || rep.Events != 2 || !rep.Final {
		t.Errorf("Scan: %v, %+v; want two starts, two events and a shutdown checkpoint", err, rep)
	}
}

// TestOpenComponentArchives: a log of an earlier session on the same volume is kept under its
// session's hash, intact, and the new session starts its own.
func TestOpenComponentArchives(t *testing.T) {
	dir := t.TempDir()
	var cas []*mtlstest.CA
	for range 2 {
		ca := mtlstest.NewCA(t, "sharness.test")
		cas = append(cas, ca)
		w, err := OpenComponent(dir, identity{ca.SVID(t, "net"), ca.Bundle()}, "net", policy)
		if err != nil {
			t.Fatal(err)
		}
		w.Record(slog.New(slog.DiscardHandler), Event{Decision: "allow"})
		w.Finish(slog.New(slog.DiscardHandler))
	}
	for name, ca := range map[string]*mtlstest.CA{FileName: cas[1], "audit-" + CAHash(cas[0].Cert()) + ".jsonl": cas[0]} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if rep, err := Scan(bytes.NewReader(data), &Trust{CA: ca.Cert(), Policy: policy}, nil); err != nil || rep.Starts != 1 {
			t.Errorf("%s: %v, %d starts; want one session's intact log", name, err, rep.Starts)
		}
	}
}

func TestOpenComponentRefuses(t *testing.T) {
	ca := mtlstest.NewCA(t, "sharness.test")
	other := mtlstest.NewCA(t, "sharness.test")
	td := spiffeid.RequireTrustDomainFromString("sharness.test")
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o600)
	blocked := t.TempDir()
	os.Mkdir(filepath.Join(blocked, FileName), 0o700) // the log's name is taken by a folder
	corrupt := t.TempDir()
	os.WriteFile(filepath.Join(corrupt, FileName), []byte("{}\n"), 0o600)
	good := identity{ca.SVID(t, "net"), ca.Bundle()}
	tests := []struct {
		name, dir string
		id        Identity
		component string
		want      string
	}{
		{"missing folder", filepath.Join(t.TempDir(), "none"), good, "net", "no audit folder"},
		{"no folder given", "", good, "net", `no audit folder ""`},
		{"a file, not a folder", file, good, "net", "no audit folder"},
		{"log not writable", blocked, good, "net", "audit folder " + blocked + " (must be writable"},
		{"corrupt log", corrupt, good, "net", "refusing to continue a broken chain"},
		{"two authorities", t.TempDir(), identity{good.SVID, x509bundle.FromX509Authorities(td, []*x509.Certificate{ca.Cert(), other.Cert()})}, "net", "holds 2 authorities"},
		{"SVID of another CA", t.TempDir(), identity{other.SVID(t, "net"), ca.Bundle()}, "net", "not the session CA's"},
		{"no bundle for the SVID's trust domain", t.TempDir(), identity{ca.SVIDFor(t, "other.test/net"), ca.Bundle()}, "net", "open audit log"},
		{"another component's SVID", t.TempDir(), good, "kms", "is not component kms's"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, err := OpenComponent(tt.dir, tt.id, tt.component, policy)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("OpenComponent = %v, want an error containing %q", err, tt.want)
			}
			if w != nil {
				w.Close()
			}
		})
	}
}

func TestClip(t *testing.T) {
	long := strings.Repeat("é", MaxValue) // 2 bytes each: the cut falls inside one
	e := Clip(Event{Decision: "deny", Reason: long, Destination: "bad\xffhost", Fields: map[string]string{"rule": long}})
	if err := e.check(); err != nil {
		t.Fatalf("a clipped event does not fit the format: %v", err)
	}
	if len(e.Reason) > MaxValue || !strings.HasSuffix(e.Reason, "…") || !utf8.ValidString(e.Reason) || !strings.HasPrefix(long, strings.TrimSuffix(e.Reason, "…")) {
		t.Errorf("clipped reason of %d bytes: %q…", len(e.Reason), e.Reason[:16])
	}
	if diff := cmp.Diff("bad\uFFFDhost", e.Destination); diff != "" {
		t.Errorf("destination (-want +got):\n%s", diff)
	}
	if e.Fields["rule"] != e.Reason {
		t.Error("fields are not clipped as the other values are")
	}
	short := Event{Decision: "allow", Fields: map[string]string{"rule": "r"}}
	if diff := cmp.Diff(short, Clip(short)); diff != "" {
		t.Errorf("a short event changed (-want +got):\n%s", diff)
	}
}

// TestRecord: a failed Log goes to the component's log, not to its caller; nil records nothing.
func TestRecord(t *testing.T) {
	var nilWriter *Writer
	nilWriter.Record(slog.New(slog.DiscardHandler), Event{Decision: "allow"})
	nilWriter.Finish(slog.New(slog.DiscardHandler))

	ca := mtlstest.NewCA(t, "sharness.test")
	w, err := OpenComponent(t.TempDir(), identity{ca.SVID(t, "net"), ca.Bundle()}, "net", policy)
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	w.Record(log, Event{Action: "connect", Decision: "deny"})
	w.Finish(log)
	if got := buf.String(); !strings.Contains(got, `"msg":"audit log failed: this decision is not recorded","action":"connect","decision":"deny","error":"audit: log closed"`) {
		t.Errorf("log = %s", got)
	}
}

// TestOpenOwn: the folder comes from EnvDir; with no identity given and no Workload API socket
// the component refuses to start rather than run without its record; done writes the shutdown
// checkpoint.
func TestOpenOwn(t *testing.T) {
	ca := mtlstest.NewCA(t, "sharness.test")
	dir := t.TempDir()
	t.Setenv(EnvDir, dir)
	w, done, err := OpenOwn(context.Background(), identity{ca.SVID(t, "fs"), ca.Bundle()}, "fs", policy)
	if err != nil {
		t.Fatal(err)
	}
	w.Record(slog.New(slog.DiscardHandler), Event{Action: "fs.write", Decision: "allow"})
	done(slog.New(slog.DiscardHandler))
	data, err := os.ReadFile(filepath.Join(dir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	r, err := Scan(bytes.NewReader(data), &Trust{CA: ca.Cert(), Policy: policy, Component: "fs"}, nil)
	if err != nil || !r.Final || r.Events != 1 {
		t.Errorf("the log OpenOwn wrote: %+v, %v; want one event and a shutdown checkpoint", r, err)
	}

	t.Setenv("SPIFFE_ENDPOINT_SOCKET", "")
	if _, _, err := OpenOwn(context.Background(), nil, "fs", policy); err == nil || !strings.Contains(err.Error(), "refusing to start") {
		t.Errorf("OpenOwn without a Workload API: %v, want a refusal", err)
	}
}
