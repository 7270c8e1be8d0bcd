package audit

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"errors"
	"fmt"
	"math/big"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"

	"github.com/sharness-ai/sharness/testkit/mtlstest"
)

var policy = "sha256:" + strings.Repeat("ab", 32)

// session is a throwaway session: its CA and the SVID of component net.
type session struct {
	ca  *mtlstest.CA
	net *x509svid.SVID
}

func newSession(tb testing.TB) session {
	tb.Helper()
	ca := mtlstest.NewCA(tb, "sharness.test")
	return session{ca, ca.SVID(tb, "net")}
}

func (s session) config() Config {
	return Config{Component: "net", Policy: policy, SessionCA: CAHash(s.ca.Cert()), SVID: s.net}
}

func (s session) trust() Trust { return Trust{CA: s.ca.Cert(), Policy: policy} }

// epoch is where clock starts: now, as certificates are valid from a minute ago.
var epoch = time.Now().UTC().Truncate(time.Second)

// clock is a Now that advances one second a call, so lines are reproducible and ordered.
func clock() func() time.Time {
	var mu sync.Mutex
	t := epoch
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		t = t.Add(time.Second)
		return t
	}
}

func event(i int) Event {
	return Event{Action: "connect", Decision: []string{"allow", "deny"}[i%2], Reason: "rule egress[0]", Caller: "agent", Destination: fmt.Sprintf("host%d.example:443", i), Fields: map[string]string{"method": "CONNECT"}}
}

// writeLog writes a log of n events with a checkpoint every 3 lines and closes it: for n = 7,
// lines 4 and 8 are periodic checkpoints and line 11 the shutdown checkpoint.
func writeLog(tb testing.TB, s session, n int) (string, []byte) {
	tb.Helper()
	c := s.config()
	c.Every, c.Now = 3, clock()
	path := filepath.Join(tb.TempDir(), "net.jsonl")
	w, err := Open(path, c)
	if err != nil {
		tb.Fatal(err)
	}
	for i := range n {
		if err := w.Log(event(i)); err != nil {
			tb.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	return path, data
}

// lines splits a log after each newline; an unterminated last line is the last element.
func lines(data []byte) [][]byte {
	ls := bytes.SplitAfter(data, []byte("\n"))
	if len(ls[len(ls)-1]) == 0 {
		ls = ls[:len(ls)-1]
	}
	return ls
}

func TestWriteVerify(t *testing.T) {
	s := newSession(t)
	_, data := writeLog(t, s, 7)
	at := func(s int) string { return epoch.Add(time.Duration(s) * time.Second).Format(time.RFC3339) }
	want := fmt.Sprintf(`{"seq":1,"time":"%s","component":"net","policy":"%s","type":"start","session_ca":"%s","prev":""}`, at(1), policy, CAHash(s.ca.Cert()))
	if got := string(lines(data)[0]); got != want+"\n" {
		t.Errorf("first line\n got %s\nwant %s", got, want)
	}
	want = fmt.Sprintf(`{"seq":2,"time":"%s","component":"net","policy":"%s","type":"event","action":"connect","decision":"allow","reason":"rule egress[0]","caller":"agent","destination":"host0.example:443","fields":{"method":"CONNECT"},"prev":"%s"}`, at(2), policy, hashLine(lines(data)[0][:len(lines(data)[0])-1]))
	if got := string(lines(data)[1]); got != want+"\n" {
		t.Errorf("event line\n got %s\nwant %s", got, want)
	}
	var got []Entry
	rep, err := Scan(bytes.NewReader(data), &Trust{CA: s.ca.Cert(), CASHA256: CAHash(s.ca.Cert()), Policy: policy, Component: "net", FinalSeq: map[string]uint64{"net": 11, "kms": 99}}, func(e Entry) { got = append(got, e) })
	if err != nil {
		t.Fatalf("Scan: %v\n%s", err, data)
	}
	wantRep := Report{Component: "net", Policy: policy, SessionCA: CAHash(s.ca.Cert()), Lines: 11, LastSeq: 11, Events: 7, Checkpoints: 3, Starts: 1, SignedThrough: 11, Final: true}
	if diff := cmp.Diff(wantRep, rep); diff != "" {
		t.Errorf("report (-want +got):\n%s", diff)
	}
	if len(got) != 7 || got[0].Line != 2 || got[0].Event.Destination != "host0.example:443" || got[6].Seq != 10 || !got[6].Time.Equal(epoch.Add(10*time.Second)) {
		t.Errorf("entries = %+v", got)
	}
}

// resign replaces a checkpoint's certificates and signature with ones made by svid.
func resign(tb testing.TB, line []byte, svid *x509svid.SVID, component string) []byte {
	tb.Helper()
	r, err := parse(bytes.TrimSuffix(line, []byte("\n")))
	if err != nil {
		tb.Fatal(err)
	}
	r.Certs, r.Sig = nil, nil
	if err := sign(Config{Component: component, SVID: svid}, r); err != nil {
		tb.Fatal(err)
	}
	b, _ := encode(r)
	return append(b, '\n')
}

// rechain rewrites every prev from line i on, as a forger without the key would.
func rechain(tb testing.TB, ls [][]byte, i int) [][]byte {
	for ; i < len(ls); i++ {
		r, err := parse(bytes.TrimSuffix(ls[i], []byte("\n")))
		if err != nil {
			tb.Fatal(err)
		}
		r.Prev = hashLine(bytes.TrimSuffix(ls[i-1], []byte("\n")))
		b, _ := encode(r)
		ls[i] = append(b, '\n')
	}
	return ls
}

// TestTamper: every kind of tampering fails, at the line that shows it, with its reason. The
// log is writeLog's: start, e, e, checkpoint, e, e, e, checkpoint, e, e, final checkpoint.
func TestTamper(t *testing.T) {
	s := newSession(t)
	_, data := writeLog(t, s, 7)
	other := mtlstest.NewCA(t, "sharness.test")
	_, otherLog := writeLog(t, session{other, other.SVID(t, "net")}, 7) // same component and policy, another session
	cases := []struct {
		name   string
		edit   func([][]byte) [][]byte
		trust  func(*Trust)
		line   int
		reason string
	}{
		{"changed line", func(ls [][]byte) [][]byte {
			ls[4] = bytes.Replace(ls[4], []byte(`"decision":"allow"`), []byte(`"decision":"deny"`), 1)
			return ls
		}, nil, 6, "prev is not the hash of line 5"},
		{"changed line, chain rewritten", func(ls [][]byte) [][]byte {
			ls[4] = bytes.Replace(ls[4], []byte(`"decision":"allow"`), []byte(`"decision":"deny"`), 1)
			return rechain(t, ls, 5)
		}, nil, 8, "the signature does not match the line"},
		{"deleted line", func(ls [][]byte) [][]byte { return append(ls[:4], ls[5:]...) }, nil, 5, "seq 6 follows seq 4"},
		{"inserted line", func(ls [][]byte) [][]byte { return append(ls[:5], append([][]byte{ls[4]}, ls[5:]...)...) }, nil, 6, "seq 5 follows seq 5"},
		{"inserted line, seq and chain rewritten", func(ls [][]byte) [][]byte {
			// A forger without the key inserts an event after line 5 and renumbers and relinks
			// every line after it: the next checkpoint's signature no longer matches.
			r, err := parse(bytes.TrimSuffix(ls[4], []byte("\n")))
			if err != nil {
				t.Fatal(err)
			}
			r.Seq, r.Destination = r.Seq+1, "forged.example:443"
			b, _ := encode(r)
			ls = slices.Insert(ls, 5, append(b, '\n'))
			for i := 6; i < len(ls); i++ {
				r, err := parse(bytes.TrimSuffix(ls[i], []byte("\n")))
				if err != nil {
					t.Fatal(err)
				}
				r.Seq++
				b, _ := encode(r)
				ls[i] = append(b, '\n')
			}
			return rechain(t, ls, 5)
		}, nil, 9, "checkpoint: the signature does not match the line"},
		{"reordered lines", func(ls [][]byte) [][]byte { ls[4], ls[5] = ls[5], ls[4]; return ls }, nil, 5, "seq 6 follows seq 4"},
		{"beginning removed", func(ls [][]byte) [][]byte { return ls[4:] }, nil, 1, "want the session start with seq 1"},
		{"truncated after an event", func(ls [][]byte) [][]byte { return ls[:9] }, nil, 9, "unsigned tail after line 8: lines 9-9"},
		{"truncated at a periodic checkpoint", func(ls [][]byte) [][]byte { return ls[:8] }, nil, 8, "no shutdown checkpoint"},
		{"truncated at the final checkpoint, final seq known", nil, func(tr *Trust) { tr.FinalSeq = map[string]uint64{"net": 14} }, 11, "the expected last seq is 14"},
		{"partial last line", func(ls [][]byte) [][]byte { ls[10] = ls[10][:40]; return ls }, nil, 11, "unterminated last line of 40 bytes"},
		{"re-signed by another CA", func(ls [][]byte) [][]byte {
			ls[10] = resign(t, ls[10], other.SVID(t, "net"), "net")
			return ls
		}, nil, 11, "the signer is no SVID of this session"},
		{"re-signed by another component", func(ls [][]byte) [][]byte {
			ls[10] = resign(t, ls[10], s.ca.SVID(t, "kms"), "kms")
			return ls
		}, nil, 11, "signed by spiffe://sharness.test/kms, not by component net"},
		{"another session", nil, func(tr *Trust) { tr.CA = other.Cert() }, 1, "a log of another session"},
		{"another session's log, this session's trust", func([][]byte) [][]byte { return lines(otherLog) }, nil, 1, "a log of another session"},
		{"another session's log, its checkpoints", func([][]byte) [][]byte { return lines(otherLog) }, nil, 4, "checkpoint: the signer is no SVID of this session"},
		{"another session's hash pinned", nil, func(tr *Trust) { tr.CASHA256 = CAHash(other.Cert()) }, 0, "the session CA's SHA-256 is"},
		{"policy mismatch", nil, func(tr *Trust) { tr.Policy = "sha256:" + strings.Repeat("cd", 32) }, 1, "another policy"},
		{"another component", nil, func(tr *Trust) { tr.Component = "kms" }, 1, "component net policy"},
		{"corrupt JSON", func(ls [][]byte) [][]byte { ls[4] = []byte("{\"seq\":5,\n"); return ls }, nil, 5, "json: unexpected end of data"},
		{"duplicate key", func(ls [][]byte) [][]byte {
			ls[4] = bytes.Replace(ls[4], []byte(`"seq":5,`), []byte(`"seq":5,"seq":5,`), 1)
			return ls
		}, nil, 5, `duplicate key "seq"`},
		{"non-canonical spacing", func(ls [][]byte) [][]byte { ls[4] = bytes.Replace(ls[4], []byte(`,`), []byte(`, `), 1); return ls }, nil, 5, "not in canonical form"},
		{"unknown key", func(ls [][]byte) [][]byte {
			ls[4] = bytes.Replace(ls[4], []byte(`"seq":5,`), []byte(`"seq":5,"x":1,`), 1)
			return ls
		}, nil, 5, `unknown field "x"`},
		{"event fields on a checkpoint", func(ls [][]byte) [][]byte {
			ls[3] = bytes.Replace(ls[3], []byte(`"type":"checkpoint",`), []byte(`"type":"checkpoint","decision":"allow",`), 1)
			return ls
		}, nil, 4, `record type "checkpoint" with fields of another type`},
		{"line after the shutdown checkpoint", func(ls [][]byte) [][]byte { return rechain(t, append(ls, ls[9]), 11) }, nil, 12, "after the shutdown checkpoint at line 11"},
		{"empty", func([][]byte) [][]byte { return nil }, nil, 1, "empty log"},
		{"too long", func(ls [][]byte) [][]byte { ls[4] = append(bytes.Repeat([]byte(" "), MaxLine+1), '\n'); return ls }, nil, 5, "longer than 65536 bytes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ls := lines(bytes.Clone(data))
			if tc.edit != nil {
				ls = tc.edit(ls)
			}
			tr := s.trust()
			if tc.trust != nil {
				tc.trust(&tr)
			}
			rep, err := Scan(bytes.NewReader(bytes.Join(ls, nil)), &tr, nil)
			if err == nil {
				t.Fatalf("Scan passed a tampered log")
			}
			if tc.line == 0 { // bad trust: not a verdict on the log
				if errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.reason) {
					t.Fatalf("error %v, want bad input containing %q", err, tc.reason)
				}
				return
			}
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			for _, f := range rep.Failures {
				if f.Line == tc.line && strings.Contains(f.Reason, tc.reason) {
					return
				}
			}
			t.Errorf("failures %+v\nwant line %d: …%s…", rep.Failures, tc.line, tc.reason)
		})
	}
}

// TestRunning: a log whose component still runs ends unsigned; with AllowRunning that is
// listed in the report, not failed, and nothing else is excused.
func TestRunning(t *testing.T) {
	s := newSession(t)
	_, data := writeLog(t, s, 7)
	cut := bytes.Join(lines(data)[:9], nil)
	tr := s.trust()
	tr.AllowRunning = true
	rep, err := Scan(bytes.NewReader(cut), &tr, nil)
	if err != nil || rep.Final || rep.UnsignedFrom != 9 || rep.SignedThrough != 8 || len(rep.Notices) != 1 || !strings.Contains(rep.Notices[0].Reason, "unsigned tail after line 8") {
		t.Errorf("running log: %v, %+v", err, rep)
	}
	tampered := bytes.Replace(cut, []byte(`"decision":"deny"`), []byte(`"decision":"allow"`), 1)
	if _, err := Scan(bytes.NewReader(tampered), &tr, nil); err == nil {
		t.Error("AllowRunning passed a tampered line")
	}
}

// TestRestart: a restarted writer continues the chain; after a crash it says so, and an
// unterminated last line is removed and named, never dropped silently.
func TestRestart(t *testing.T) {
	s := newSession(t)
	path, _ := writeLog(t, s, 2)
	c := s.config()
	w, err := Open(path, c)
	if err != nil {
		t.Fatal(err)
	}
	w.Log(event(1))
	w.timer.Stop()
	w.f.Close() // a crash: no shutdown checkpoint
	partial := []byte(`{"seq":9,"time":"2026-01-`)
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.Write(partial)
	f.Close()
	if w, err = Open(path, c); err != nil {
		t.Fatal(err)
	}
	w.Log(event(2))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	tr := s.trust()
	rep, err := Scan(bytes.NewReader(data), &tr, nil)
	if err != nil {
		t.Fatalf("Scan: %v\n%s", err, data)
	}
	want := []Finding{
		{8, "restart after line 7 without a shutdown checkpoint (the previous process did not close the log)"},
		{8, fmt.Sprintf("restart removed an unterminated line of %d bytes (sha256 %s) left by a crash after line 7", len(partial), hashLine(partial))},
	}
	if diff := cmp.Diff(want, rep.Notices); diff != "" || rep.Starts != 3 || rep.Events != 4 {
		t.Errorf("notices (-want +got):\n%s\nreport %+v", diff, rep)
	}
}

func TestOpenRefuses(t *testing.T) {
	s := newSession(t)
	path, data := writeLog(t, s, 7)
	broken := filepath.Join(t.TempDir(), "broken.jsonl")
	os.WriteFile(broken, bytes.Replace(data, []byte(`"decision":"deny"`), []byte(`"decision":"allow"`), 1), 0o600)
	other := mtlstest.NewCA(t, "sharness.test")
	cases := []struct {
		name, path string
		edit       func(*Config)
		want       string
	}{
		{"broken chain", broken, nil, "line 4: prev is not the hash of line 3 (that line was changed, or lines were deleted, inserted or moved): refusing to continue a broken chain"},
		{"another session", path, func(c *Config) { c.SessionCA = CAHash(other.Cert()) }, "line 1: session CA"},
		{"another policy", path, func(c *Config) { c.Policy = "sha256:" + strings.Repeat("cd", 32) }, "line 1: component net policy"},
		{"another component's SVID", path, func(c *Config) { c.SVID = s.ca.SVID(t, "kms") }, "SVID spiffe://sharness.test/kms is not component net's"},
		{"no policy", path, func(c *Config) { c.Policy = "" }, "needs a component, a policy hash"},
		{"no SVID", path, func(c *Config) { c.SVID = nil }, "needs a component, a policy hash"},
		{"missing folder", filepath.Join(t.TempDir(), "none", "net.jsonl"), nil, "no such file"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := s.config()
			if tc.edit != nil {
				tc.edit(&c)
			}
			w, err := Open(tc.path, c)
			if err == nil {
				w.Close()
				t.Fatal("Open succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v\nwant it to contain %q", err, tc.want)
			}
		})
	}
	after, _ := os.ReadFile(path)
	if !bytes.Equal(after, data) {
		t.Error("a refused Open changed the log")
	}
	w, err := Open(path, s.config())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := Open(path, s.config()); err == nil || !strings.Contains(err.Error(), "another writer holds it") {
		t.Errorf("second writer: %v", err)
	}
}

func TestEventRules(t *testing.T) {
	cases := []struct {
		name string
		e    Event
		want string // "" for accepted
	}{
		{"plain", Event{Decision: "deny", Reason: "no rule for <host>"}, ""},
		{"names about secrets", Event{Decision: "allow", Fields: map[string]string{"secret_name": "github", "key_id": "k1", "token_count": "3"}}, ""},
		{"no decision", Event{Reason: "x"}, "event without a decision, or with more than 16 fields"},
		{"token", Event{Decision: "allow", Fields: map[string]string{"token": "x"}}, `field name "token" names secret material`},
		{"api_key", Event{Decision: "allow", Fields: map[string]string{"api_key": "x"}}, "names secret material"},
		{"db_password", Event{Decision: "allow", Fields: map[string]string{"db_password": "x"}}, "names secret material"},
		{"upper case", Event{Decision: "allow", Fields: map[string]string{"Token": "x"}}, "is not 1 to 32 of [a-z0-9_]"},
		{"dash", Event{Decision: "allow", Fields: map[string]string{"a-b": "x"}}, "is not 1 to 32"},
		{"invalid UTF-8", Event{Decision: "allow", Reason: "\xff"}, "not valid UTF-8"},
		{"too long", Event{Decision: "allow", Caller: strings.Repeat("a", MaxValue+1)}, "longer than 1024"},
		{"too many fields", Event{Decision: "allow", Fields: func() map[string]string {
			m := map[string]string{}
			for i := range MaxFields + 1 {
				m[fmt.Sprintf("f%d", i)] = ""
			}
			return m
		}()}, "more than 16 fields"},
	}
	s := newSession(t)
	w, err := Open(filepath.Join(t.TempDir(), "net.jsonl"), s.config())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := w.Log(tc.e)
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("Log: %v, want %q", err, tc.want)
			}
		})
	}
}

// ed25519SVID makes a CA and an Ed25519 SVID for spiffe://sharness.test/net.
func ed25519SVID(t *testing.T) (*x509.Certificate, *x509svid.SVID) {
	caPub, caKey, _ := ed25519.GenerateKey(rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign, URIs: []*url.URL{{Scheme: "spiffe", Host: "sharness.test"}}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, caPub, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(der)
	pub, key, _ := ed25519.GenerateKey(rand.Reader)
	id := spiffeid.RequireFromString("spiffe://sharness.test/net")
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), NotBefore: tmpl.NotBefore, NotAfter: tmpl.NotAfter, KeyUsage: x509.KeyUsageDigitalSignature, URIs: []*url.URL{id.URL()}}
	if der, err = x509.CreateCertificate(rand.Reader, leaf, ca, pub, caKey); err != nil {
		t.Fatal(err)
	}
	leaf, _ = x509.ParseCertificate(der)
	return ca, &x509svid.SVID{ID: id, Certificates: []*x509.Certificate{leaf}, PrivateKey: key}
}

func TestEd25519(t *testing.T) {
	ca, svid := ed25519SVID(t)
	path := filepath.Join(t.TempDir(), "net.jsonl")
	w, err := Open(path, Config{Component: "net", Policy: policy, SessionCA: CAHash(ca), SVID: svid})
	if err != nil {
		t.Fatal(err)
	}
	w.Log(event(0))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	if _, err := Scan(bytes.NewReader(data), &Trust{CA: ca, Policy: policy}, nil); err != nil {
		t.Fatal(err)
	}
	// Any ECDSA curve signs (with SHA-256 digests), not only the launcher's P-256.
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err := sign(Config{Component: "net", SVID: &x509svid.SVID{ID: svid.ID, Certificates: svid.Certificates, PrivateKey: p384}}, &record{}); err != nil {
		t.Errorf("P-384 key refused: %v", err)
	}
}

// TestInterval: a quiet component's lines are signed within Interval, without a new line.
func TestInterval(t *testing.T) {
	s := newSession(t)
	c := s.config()
	c.Interval = 20 * time.Millisecond
	path := filepath.Join(t.TempDir(), "net.jsonl")
	w, err := Open(path, c)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	w.Log(event(0))
	tr := s.trust()
	tr.AllowRunning = true
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		data, _ := os.ReadFile(path)
		if rep, err := Scan(bytes.NewReader(data), &tr, nil); err == nil && rep.Events == 1 && rep.SignedThrough == rep.Lines {
			return
		}
	}
	t.Fatal("no checkpoint within the interval")
}

func TestConcurrent(t *testing.T) {
	s := newSession(t)
	c := s.config()
	c.Every = 7
	path := filepath.Join(t.TempDir(), "net.jsonl")
	w, err := Open(path, c)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				if err := w.Log(event(g*50 + i)); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Go(func() { w.Checkpoint() })
	wg.Wait()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Log(event(0)); err == nil {
		t.Error("Log after Close succeeded")
	}
	data, _ := os.ReadFile(path)
	tr := s.trust()
	if rep, err := Scan(bytes.NewReader(data), &tr, nil); err != nil || rep.Events != 400 {
		t.Errorf("Scan: %v, %d events", err, rep.Events)
	}
}

// FuzzParse: a line parse accepts is exactly the canonical encoding of what it decoded.
func FuzzParse(f *testing.F) {
	_, data := writeLog(f, newSession(f), 7)
	for _, l := range lines(data) {
		f.Add(bytes.TrimSuffix(l, []byte("\n")))
	}
	f.Add([]byte(`{"seq":1,"seq":1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := parse(b)
		if err != nil {
			return
		}
		if again, err := encode(r); err != nil || !bytes.Equal(again, b) {
			t.Fatalf("accepted %q, which encodes as %q", b, again)
		}
	})
}

// FuzzVerify: Scan with a Trust never panics, fails exactly when it lists a failure, and every
// failure names a line of the input; seeded with the tamper table's logs.
func FuzzVerify(f *testing.F) {
	s := newSession(f)
	_, data := writeLog(f, s, 7)
	ls := lines(data)
	f.Add(data)
	f.Add(bytes.Join(ls[:9], nil))
	f.Add(bytes.Join(append(append([][]byte{}, ls[:4]...), ls[5:]...), nil))
	f.Add(data[:len(data)-20])
	f.Add([]byte("{}\n"))
	tr := s.trust()
	f.Fuzz(func(t *testing.T, b []byte) {
		rep, err := Scan(bytes.NewReader(b), &tr, nil)
		if (err != nil) != (len(rep.Failures) > 0) {
			t.Fatalf("error %v with failures %v", err, rep.Failures)
		}
		for _, fl := range rep.Failures {
			if fl.Line < 1 || fl.Line > bytes.Count(b, []byte("\n"))+1 {
				t.Fatalf("failure at line %d of a %d-line input", fl.Line, bytes.Count(b, []byte("\n")))
			}
		}
		if err == nil && !bytes.Equal(b, data) { // only the genuine log verifies
			t.Fatalf("a log the writer did not write verifies:\n%s", b)
		}
	})
}

// TestErrAfterAFailedWrite: once a line cannot be written (here the file is gone from under the
// writer, as a full or read-only volume refuses it), Err names the failure and keeps naming it,
// so that a component refuses its decisions instead of deciding unrecorded (issue 22); a nil
// Writer and a healthy one have none.
func TestErrAfterAFailedWrite(t *testing.T) {
	var none *Writer
	if err := none.Err(); err != nil {
		t.Errorf("a nil Writer's Err = %v, want nil", err)
	}
	s := newSession(t)
	w, err := Open(filepath.Join(t.TempDir(), FileName), s.config())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Log(event(1)); err != nil || w.Err() != nil {
		t.Fatalf("a healthy log: Log %v, Err %v", err, w.Err())
	}
	w.timer.Stop()
	w.f.Close() // every write fails from now on
	logErr := w.Log(event(2))
	if logErr == nil || w.Err() == nil || w.Err().Error() != logErr.Error() {
		t.Fatalf("after a failed write: Log %v, Err %v; want the same failure", logErr, w.Err())
	}
	if !strings.Contains(w.Err().Error(), "write line") {
		t.Errorf("Err %q does not say which line failed", w.Err())
	}
	w.Log(event(3))
	if w.Err().Error() != logErr.Error() {
		t.Errorf("Err changed to %v: the first failure is the one to name", w.Err())
	}
}
