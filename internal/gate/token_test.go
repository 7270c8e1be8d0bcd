package gate

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

var (
	operator = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{1}, 32))
	intruder = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{2}, 32))
	t0       = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
)

func pub(k ed25519.PrivateKey) ed25519.PublicKey { return k.Public().(ed25519.PublicKey) }

func hash(c byte) string { return "sha256:" + strings.Repeat(string(c), 64) }

// pending is the request the component holds in the table tests.
func pending(tier Tier) Request {
	return Request{ID: "AAAAAAAAAAAAAAAAAAAAAAAAAA", Component: "fs", Action: "fs.write", Digest: hash('d'), Summary: "write .envrc",
		Policy: hash('a'), Tier: tier, Created: t0, Expires: t0.Add(DefaultTimeout)}
}

// approval is the claims an operator signs for r at t0.
func approval(r Request) claims {
	return claims{V: 1, ID: r.ID, Component: r.Component, Action: r.Action, Digest: r.Digest, Policy: r.Policy,
		Decision: Approve, Tier: ScopeOnce, IssuedAt: t0, NotAfter: t0.Add(DefaultTTL), Nonce: "NNNNNNNNNNNNNNNNNNNNNNNNNN"}
}

func token(t testing.TB, key ed25519.PrivateKey, edit func(*claims)) []byte {
	t.Helper()
	c := approval(pending(Once))
	if edit != nil {
		edit(&c)
	}
	b, err := sign(c, key)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// signRaw signs payload as it is, canonical or not.
func signRaw(key ed25519.PrivateKey, payload string) []byte {
	env := envelope{Payload: base64.StdEncoding.EncodeToString([]byte(payload)), Key: "k",
		Sig: base64.StdEncoding.EncodeToString(ed25519.Sign(key, append([]byte(signContext), payload...)))}
	b, _ := json.Marshal(env)
	return b
}

func emptySet(t testing.TB) *Set {
	t.Helper()
	s, err := OpenSet(t.TempDir(), t0)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

type checkCase struct {
	name  string
	token []byte
	tier  Tier      // of the pending request; Once when empty
	now   time.Time // t0 when zero
	spent []string
	want  Reason
}

func checkCases(t testing.TB) []checkCase {
	canon, _ := approval(pending(Once)).canonical()
	good := token(t, operator, nil)
	flipped := bytes.Clone(good)
	flipped[bytes.Index(flipped, []byte(`"sig":"`))+8] ^= 1
	return []checkCase{
		{name: "approve once", token: good, want: ReasonApproved},
		{name: "approve within the skew after expiry", token: good, now: t0.Add(DefaultTTL + Skew - time.Second), want: ReasonApproved},
		{name: "deny", token: token(t, operator, func(c *claims) { c.Decision = Deny }), want: ReasonDenied},
		{name: "session for tier once", token: token(t, operator, func(c *claims) { c.Tier = ScopeSession }), want: ReasonApproved},
		{name: "session for tier every", token: token(t, operator, func(c *claims) { c.Tier = ScopeSession }), tier: Every, want: ReasonTier},
		{name: "once for tier every", token: good, tier: Every, want: ReasonApproved},
		{name: "bad signature", token: flipped, want: ReasonSignature},
		{name: "other operator key", token: token(t, intruder, nil), want: ReasonSignature},
		{name: "wrong id", token: token(t, operator, func(c *claims) { c.ID = "BBBBBBBBBBBBBBBBBBBBBBBBBB" }), want: ReasonMismatch},
		{name: "wrong component", token: token(t, operator, func(c *claims) { c.Component = "bash" }), want: ReasonMismatch},
		{name: "wrong action", token: token(t, operator, func(c *claims) { c.Action = "fs.delete" }), want: ReasonMismatch},
		{name: "wrong digest", token: token(t, operator, func(c *claims) { c.Digest = hash('e') }), want: ReasonMismatch},
		{name: "wrong policy", token: token(t, operator, func(c *claims) { c.Policy = hash('b') }), want: ReasonMismatch},
		{name: "expired", token: good, now: t0.Add(DefaultTTL + Skew + time.Second), want: ReasonExpired},
		{name: "not yet valid", token: good, now: t0.Add(-Skew - time.Second), want: ReasonNotYetValid},
		{name: "replay of the request id", token: good, spent: []string{pending(Once).ID}, want: ReasonReplayed},
		{name: "replay of the nonce", token: good, spent: []string{approval(pending(Once)).Nonce}, want: ReasonReplayed},
		{name: "oversized", token: append(bytes.Clone(good), bytes.Repeat([]byte(" "), MaxToken)...), want: ReasonInvalid},
		{name: "not json", token: []byte("approve"), want: ReasonInvalid},
		{name: "empty", token: nil, want: ReasonInvalid},
		{name: "duplicate envelope key", token: []byte(`{"payload":"","payload":"","key":"","sig":""}`), want: ReasonInvalid},
		{name: "case-folded envelope key", token: bytes.Replace(good, []byte(`{`), []byte(`{"SIG":"",`), 1), want: ReasonInvalid},
		{name: "unknown envelope field", token: bytes.Replace(good, []byte(`{`), []byte(`{"alg":"none",`), 1), want: ReasonInvalid},
		{name: "signature not base64", token: bytes.Replace(good, []byte(`"sig":"`), []byte(`"sig":"!`), 1), want: ReasonInvalid},
		{name: "unknown claim", token: signRaw(operator, strings.Replace(string(canon), `{`, `{"admin":true,`, 1)), want: ReasonInvalid},
		{name: "claims not canonical", token: signRaw(operator, strings.Replace(string(canon), `,`, `, `, 1)), want: ReasonInvalid},
		{name: "claim missing", token: signRaw(operator, strings.Replace(string(canon), `"v":1`, `"w":1`, 1)), want: ReasonInvalid},
		{name: "claims not json", token: signRaw(operator, "approve everything"), want: ReasonInvalid},
		{name: "version 2", token: token(t, operator, func(c *claims) { c.V = 2 }), want: ReasonInvalid},
		{name: "decision maybe", token: token(t, operator, func(c *claims) { c.Decision = "maybe" }), want: ReasonInvalid},
		{name: "tier forever", token: token(t, operator, func(c *claims) { c.Tier = "forever" }), want: ReasonInvalid},
		{name: "no nonce", token: token(t, operator, func(c *claims) { c.Nonce = "" }), want: ReasonInvalid},
		{name: "validity over the cap", token: token(t, operator, func(c *claims) { c.NotAfter = t0.Add(MaxTTL + time.Second) }), want: ReasonInvalid},
		{name: "validity negative", token: token(t, operator, func(c *claims) { c.NotAfter = t0.Add(-time.Second) }), want: ReasonInvalid},
	}
}

func TestCheck(t *testing.T) {
	for _, tc := range checkCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			used := emptySet(t)
			if len(tc.spent) > 0 {
				if err := used.Add(t0.Add(time.Hour), tc.spent...); err != nil {
					t.Fatal(err)
				}
			}
			now := tc.now
			if now.IsZero() {
				now = t0
			}
			r := pending(Once)
			if tc.tier != "" {
				r.Tier = tc.tier
			}
			v, err := Check(tc.token, pub(operator), r, now, used)
			if v.Reason() != tc.want {
				t.Fatalf("reason %s (%v), want %s", v.Reason(), err, tc.want)
			}
			wantOK := tc.want == ReasonApproved
			if v.Approved() != wantOK || (err == nil) != (wantOK || tc.want == ReasonDenied) {
				t.Errorf("approved %v, error %v; want approved %v", v.Approved(), err, wantOK)
			}
		})
	}
}

func TestZeroVerdictDenies(t *testing.T) {
	var v Verdict
	if v.Approved() || v.Reason() != ReasonInvalid {
		t.Errorf("zero Verdict: approved %v, reason %s", v.Approved(), v.Reason())
	}
}

func TestCheckWithoutSpentSetRefuses(t *testing.T) {
	v, err := Check(token(t, operator, nil), pub(operator), pending(Once), t0, nil)
	if v.Approved() || v.Reason() != ReasonUnavailable || err == nil {
		t.Errorf("got %v %s %v, want a refusal", v.Approved(), v.Reason(), err)
	}
}

func TestReplayAfterSuccessAndRestart(t *testing.T) {
	dir := t.TempDir()
	used, err := OpenSet(dir, t0)
	if err != nil {
		t.Fatal(err)
	}
	tok := token(t, operator, nil)
	v, err := Check(tok, pub(operator), pending(Once), t0, used)
	if !v.Approved() {
		t.Fatalf("first use: %s %v", v.Reason(), err)
	}
	if err := used.Add(v.c.NotAfter, v.c.ID, v.c.Nonce); err != nil {
		t.Fatal(err)
	}
	if err := used.Add(v.c.NotAfter, v.c.ID, v.c.Nonce); err == nil {
		t.Error("Add of a spent key succeeded")
	}
	if v, _ := Check(tok, pub(operator), pending(Once), t0.Add(time.Second), used); v.Reason() != ReasonReplayed {
		t.Errorf("replay after success: %s, want %s", v.Reason(), ReasonReplayed)
	}
	restarted, err := OpenSet(dir, t0.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := Check(tok, pub(operator), pending(Once), t0.Add(time.Minute), restarted); v.Reason() != ReasonReplayed {
		t.Errorf("replay after restart: %s, want %s", v.Reason(), ReasonReplayed)
	}
	// Once the approval is past its validity the record forgets it; Check refuses it as expired.
	later := t0.Add(DefaultTTL + Skew + time.Second)
	forgot, err := OpenSet(dir, later)
	if err != nil {
		t.Fatal(err)
	}
	if forgot.Has(v.c.Nonce) {
		t.Error("an expired entry was kept")
	}
	if v, _ := Check(tok, pub(operator), pending(Once), later, forgot); v.Reason() != ReasonExpired {
		t.Errorf("after expiry: %s, want %s", v.Reason(), ReasonExpired)
	}
}

func TestOpenSetRefusesACorruptRecord(t *testing.T) {
	for _, content := range []string{"12 \n", "x AAAAAAAAAAAAAAAAAAAAAAAAAA\n", "12 ../../etc\n"} {
		dir := t.TempDir()
		if err := writeTestFile(dir, usedFile, content); err != nil {
			t.Fatal(err)
		}
		if _, err := OpenSet(dir, t0); err == nil {
			t.Errorf("OpenSet accepted %q", content)
		}
	}
}

// FuzzCheck feeds arbitrary decision files, seeded with the table, to Check: it must never
// panic, and whatever it approves must be signed claims bound to the request.
func FuzzCheck(f *testing.F) {
	for _, tc := range checkCases(f) {
		f.Add(tc.token)
	}
	used := emptySet(f)
	r := pending(Once)
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := Check(data, pub(operator), r, t0, used)
		if !v.Approved() {
			return
		}
		c, _, verr := verify(data, pub(operator))
		if err != nil || verr != nil || c.ID != r.ID || c.Digest != r.Digest || c.Decision != Approve {
			t.Fatalf("approved %q: %v %v %+v", data, err, verr, c)
		}
	})
}

// FuzzParseClaims feeds arbitrary signed payloads to the claims parser: what it accepts is
// exactly the canonical encoding of what it returns.
func FuzzParseClaims(f *testing.F) {
	for _, tc := range checkCases(f) {
		var env envelope
		if json.Unmarshal(tc.token, &env) == nil {
			p, _ := base64.StdEncoding.DecodeString(env.Payload)
			f.Add(p)
		}
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		c, err := parseClaims(payload)
		if err != nil {
			return
		}
		if canon, err := c.canonical(); err != nil || !bytes.Equal(canon, payload) {
			t.Fatalf("accepted %q, which encodes as %q", payload, canon)
		}
	})
}
