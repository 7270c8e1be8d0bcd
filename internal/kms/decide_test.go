package kms

import (
	"crypto/ed25519"
	"crypto/rand"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sharness-ai/sharness/internal/seal"
	"github.com/sharness-ai/sharness/policies/keys"
	"github.com/sharness-ai/sharness/policies/pbp"
)

func loadFull(t testing.TB) *pbp.Manifest {
	t.Helper()
	m, err := pbp.Load(os.DirFS("../../policies/testdata/full"), "manifest.yaml")
	if err != nil {
		t.Fatalf("load fixture: %v", err)
	}
	return m
}

// fakeSession records which steps Decide reached.
type fakeSession struct {
	destroyed bool
	nonce     string // what UseNonce answers
	file      *seal.Sealed
	load      *Refusal
	usesLeft  bool
	calls     []string
	until     time.Time // what the nonce was last kept until
}

func (f *fakeSession) Destroyed() bool { return f.destroyed }
func (f *fakeSession) UseNonce(_ [16]byte, until time.Time) string {
	f.calls = append(f.calls, "nonce")
	f.until = until
	return f.nonce
}
func (f *fakeSession) Load(string) (*seal.Sealed, *Refusal) {
	f.calls = append(f.calls, "load")
	return f.file, f.load
}
func (f *fakeSession) TakeUse(int) bool {
	f.calls = append(f.calls, "use")
	return f.usesLeft
}

func TestDecide(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	policy := "sha256:" + strings.Repeat("a", 64)
	sk, _ := seal.GenerateKey()
	fp := seal.Fingerprint(sk.PublicKey())
	_, trusted, _ := ed25519.GenerateKey(rand.Reader)
	_, stranger, _ := ed25519.GenerateKey(rand.Reader)
	file := func(signer ed25519.PrivateKey, expires time.Time) *seal.Sealed {
		s, err := seal.Seal(sk.PublicKey(), "api-key", []byte("v"), expires, signer)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	other, _ := seal.GenerateKey()
	elsewhere, _ := seal.Seal(other.PublicKey(), "api-key", []byte("v"), now.Add(time.Hour), nil)
	good := file(trusted, now.Add(time.Hour))
	base := Rules{Callers: []string{"llm"}, Ops: []string{"public", "unwrap", "seal_to", "destroy"}, PolicyHash: policy,
		Fingerprint: fp, Senders: []ed25519.PublicKey{trusted.Public().(ed25519.PublicKey)}, MaxUnwraps: 5}
	req := func(edit func(*Request)) *Request {
		q := &Request{Name: "api-key", TS: now, PolicyHash: policy, Expires: now.Add(time.Minute)}
		if edit != nil {
			edit(q)
		}
		return q
	}
	ok := func() *fakeSession { return &fakeSession{file: good, usesLeft: true} }
	all := []string{"nonce", "load", "use"}
	cases := []struct {
		name  string
		rules func(*Rules)
		call  Call
		sess  func(*fakeSession)
		want  string // "" allowed
		steps []string
	}{
		{name: "unwrap allowed", call: Call{Caller: "llm", Op: "unwrap", Request: req(nil)}, steps: all},
		{name: "seal_to allowed", call: Call{Caller: "llm", Op: "seal_to", Request: req(nil)}, steps: all},
		{name: "public allowed", call: Call{Caller: "llm", Op: "public", Request: req(nil)}},
		{name: "destroy allowed", call: Call{Caller: "llm", Op: "destroy", Request: req(nil)}, steps: []string{"nonce"}},
		{name: "destroy again", call: Call{Caller: "llm", Op: "destroy", Malformed: Refuse(ReasonBadRequest, "x")}, sess: func(f *fakeSession) { f.destroyed = true }},
		// Every check fails from here on; the first in the order must answer.
		{name: "caller first", call: Call{Caller: "agent", Op: "nope", Malformed: Refuse(ReasonTooLarge, "x")},
			sess: func(f *fakeSession) { f.destroyed, f.nonce = true, ReasonNonce }, want: ReasonCaller},
		{name: "no caller", call: Call{Op: "unwrap", Request: req(nil)}, want: ReasonCaller},
		{name: "op", call: Call{Caller: "llm", Op: "seal_to", Malformed: Refuse(ReasonTooLarge, "x")}, rules: func(r *Rules) { r.Ops = []string{"unwrap"} },
			sess: func(f *fakeSession) { f.destroyed = true }, want: ReasonOp},
		{name: "ops unset", call: Call{Caller: "llm", Op: "public"}, rules: func(r *Rules) { r.Ops = nil }, want: ReasonOp},
		{name: "destroyed", call: Call{Caller: "llm", Op: "unwrap", Malformed: Refuse(ReasonTooLarge, "x")}, sess: func(f *fakeSession) { f.destroyed = true }, want: ReasonDestroyed},
		{name: "malformed", call: Call{Caller: "llm", Op: "unwrap", Malformed: Refuse(ReasonTooLarge, "x")}, want: ReasonTooLarge},
		{name: "nonce reused", call: Call{Caller: "llm", Op: "unwrap", Request: req(func(q *Request) { q.TS = now.Add(time.Hour); q.PolicyHash = "x" })},
			sess: func(f *fakeSession) { f.nonce = ReasonNonce }, want: ReasonNonce, steps: []string{"nonce"}},
		{name: "nonce store full", call: Call{Caller: "llm", Op: "destroy", Request: req(nil)}, sess: func(f *fakeSession) { f.nonce = ReasonNonceFull }, want: ReasonNonceFull, steps: []string{"nonce"}},
		{name: "ts late", call: Call{Caller: "llm", Op: "unwrap", Request: req(func(q *Request) { q.TS = now.Add(-61 * time.Second); q.PolicyHash = "x" })}, want: ReasonTimestamp, steps: []string{"nonce"}},
		{name: "ts early", call: Call{Caller: "llm", Op: "unwrap", Request: req(func(q *Request) { q.TS = now.Add(61 * time.Second) })}, want: ReasonTimestamp, steps: []string{"nonce"}},
		{name: "ts at the edge", call: Call{Caller: "llm", Op: "unwrap", Request: req(func(q *Request) { q.TS = now.Add(-Window) })}, steps: all},
		{name: "policy", call: Call{Caller: "llm", Op: "unwrap", Request: req(func(q *Request) { q.PolicyHash = "sha256:" + strings.Repeat("b", 64) })},
			sess: func(f *fakeSession) { f.load = Refuse(ReasonUnknown, "x") }, want: ReasonPolicy, steps: []string{"nonce"}},
		{name: "destroy checks policy", call: Call{Caller: "llm", Op: "destroy", Request: req(func(q *Request) { q.PolicyHash = "x" })}, want: ReasonPolicy, steps: []string{"nonce"}},
		{name: "unknown secret", call: Call{Caller: "llm", Op: "unwrap", Request: req(nil)}, sess: func(f *fakeSession) { f.file, f.load = nil, Refuse(ReasonUnknown, "x") }, want: ReasonUnknown, steps: []string{"nonce", "load"}},
		{name: "recipient", call: Call{Caller: "llm", Op: "unwrap", Request: req(nil)}, sess: func(f *fakeSession) { f.file = elsewhere }, want: ReasonRecipient, steps: []string{"nonce", "load"}},
		{name: "expired", call: Call{Caller: "llm", Op: "unwrap", Request: req(nil)}, sess: func(f *fakeSession) { f.file = file(stranger, now) }, want: ReasonExpired, steps: []string{"nonce", "load"}},
		{name: "seal_to past the file's expiry", call: Call{Caller: "llm", Op: "seal_to", Request: req(func(q *Request) { q.Expires = now.Add(2 * time.Hour) })},
			sess: func(f *fakeSession) { f.file = file(stranger, now.Add(time.Hour)) }, want: ReasonExpiry, steps: []string{"nonce", "load"}},
		{name: "seal_to in the past", call: Call{Caller: "llm", Op: "seal_to", Request: req(func(q *Request) { q.Expires = now })}, want: ReasonExpiry, steps: []string{"nonce", "load"}},
		{name: "untrusted sender", call: Call{Caller: "llm", Op: "unwrap", Request: req(nil)}, sess: func(f *fakeSession) { f.file, f.usesLeft = file(stranger, now.Add(time.Hour)), false }, want: ReasonSender, steps: []string{"nonce", "load"}},
		{name: "unsigned with senders set", call: Call{Caller: "llm", Op: "unwrap", Request: req(nil)}, sess: func(f *fakeSession) { f.file = file(nil, now.Add(time.Hour)) }, want: ReasonSender, steps: []string{"nonce", "load"}},
		{name: "senders set but empty", call: Call{Caller: "llm", Op: "unwrap", Request: req(nil)}, rules: func(r *Rules) { r.Senders = nil }, want: ReasonSender, steps: []string{"nonce", "load"}},
		{name: "senders unset: unsigned", call: Call{Caller: "llm", Op: "unwrap", Request: req(nil)}, rules: func(r *Rules) { r.Senders, r.AnySender = nil, true },
			sess: func(f *fakeSession) { f.file = file(nil, now.Add(time.Hour)) }, steps: all},
		{name: "senders unset: any signer", call: Call{Caller: "llm", Op: "unwrap", Request: req(nil)}, rules: func(r *Rules) { r.Senders, r.AnySender = nil, true },
			sess: func(f *fakeSession) { f.file = file(stranger, now.Add(time.Hour)) }, steps: all},
		{name: "limit", call: Call{Caller: "llm", Op: "unwrap", Request: req(nil)}, sess: func(f *fakeSession) { f.usesLeft = false }, want: ReasonLimit, steps: all},
		{name: "no limit", call: Call{Caller: "llm", Op: "unwrap", Request: req(nil)}, rules: func(r *Rules) { r.MaxUnwraps = -1 }, sess: func(f *fakeSession) { f.usesLeft = false }, steps: []string{"nonce", "load"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := base
			r.Senders = slices.Clone(base.Senders)
			if tc.rules != nil {
				tc.rules(&r)
			}
			s := ok()
			if tc.sess != nil {
				tc.sess(s)
			}
			f, ref := Decide(r, tc.call, now, s)
			got := ""
			if ref != nil {
				got = ref.Type
				if ref.Status != statuses[got] || ref.Message == "" || f != nil {
					t.Errorf("refusal %+v, file %v", ref, f)
				}
			}
			if got != tc.want {
				t.Errorf("Decide = %q (%v), want %q", got, ref, tc.want)
			}
			if diff := cmp.Diff(tc.steps, s.calls); diff != "" {
				t.Errorf("steps reached (-want +got):\n%s", diff)
			}
			needsFile := ref == nil && (tc.call.Op == "unwrap" || tc.call.Op == "seal_to")
			if needsFile != (f != nil) {
				t.Errorf("file = %v, want one: %v", f, needsFile)
			}
		})
	}
}

func TestNewRules(t *testing.T) {
	m := loadFull(t)
	r, err := NewRules(m, "kms", "sha256:0123456789abcdef")
	if err != nil {
		t.Fatal(err)
	}
	want := Rules{Callers: []string{"llm"}, Ops: []string{"destroy", "public", "unwrap"}, PolicyHash: m.Hash,
		Fingerprint: "sha256:0123456789abcdef", AnySender: true, MaxUnwraps: 200}
	if diff := cmp.Diff(want, r); diff != "" {
		t.Errorf("NewRules (-want +got):\n%s", diff)
	}

	// net→kms makes net a caller; an edge from any other role never does.
	m.Edges = append(m.Edges, pbp.Edge{From: "net", To: "kms"}, pbp.Edge{From: "agent", To: "kms"}, pbp.Edge{From: "bash", To: "kms"})
	pin, _, _ := ed25519.GenerateKey(rand.Reader)
	pins := []string{keys.Pin(pin)}
	zero := 0
	m.Component("kms").Business.KMS = &pbp.KMSRules{TrustedSenders: &pins, MaxUnwraps: &zero}
	r, err = NewRules(m, "kms", "fp")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"llm", "net"}, r.Callers); diff != "" || r.AnySender || len(r.Senders) != 1 || r.MaxUnwraps != 0 || r.Ops != nil {
		t.Errorf("with net→kms and trusted senders: %+v %s", r, diff)
	}
	m.Component("kms").Business.KMS = nil
	if r, _ := NewRules(m, "kms", "fp"); r.Ops != nil || !r.AnySender || r.MaxUnwraps != -1 {
		t.Errorf("without kms rules: %+v, want no ops, any sender, no limit", r)
	}
	if _, err := NewRules(m, "llm", "fp"); err == nil {
		t.Error("NewRules for llm: want an error")
	}
}

// TestNonceRetention: a nonce is kept until the timestamp check alone would refuse its replay,
// and a timestamp far in the future (refused next) cannot keep it longer than one in the window.
func TestNonceRetention(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	policy := "sha256:" + strings.Repeat("a", 64)
	for _, tc := range []struct {
		name      string
		ts        time.Time
		wantUntil time.Time
	}{
		{"in the window", now.Add(-30 * time.Second), now.Add(-30*time.Second + 2*Window)},
		{"far future", now.Add(24 * time.Hour), now.Add(3 * Window)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &fakeSession{usesLeft: true, load: Refuse("unknown_secret", "stop here")}
			q := &Request{Name: "api-key", TS: tc.ts, PolicyHash: policy}
			Decide(Rules{Ops: []string{"unwrap"}, Callers: []string{"llm"}, PolicyHash: policy}, Call{Op: "unwrap", Caller: "llm", Request: q}, now, s)
			if !s.until.Equal(tc.wantUntil) {
				t.Errorf("nonce kept until %v, want %v", s.until, tc.wantUntil)
			}
		})
	}
}
