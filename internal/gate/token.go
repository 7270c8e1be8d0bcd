package gate

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"time"

	"github.com/gowebpki/jcs"

	"github.com/sharness-ai/sharness/internal/strictjson"
	"github.com/sharness-ai/sharness/policies/keys"
)

// Limits of a decision token.
const (
	MaxToken   = 4096             // bytes of a decision file; a real one is under 1 KiB
	DefaultTTL = 10 * time.Minute // how long an approval stays usable when the operator gives no --ttl
	MaxTTL     = 8 * time.Hour    // the longest an approval may be usable: a working day
	// Skew is the clock difference tolerated between the host that signs and the component that
	// checks. They normally share one kernel clock; a remote Docker host may drift a little.
	Skew = 30 * time.Second
)

// signContext separates decision signatures from every other use of an Ed25519 key (a policy
// signature by the same key can never be replayed as an approval, nor the reverse).
const signContext = "sharness-ai gate decision v1\x00"

// Decision is what the operator decided.
type Decision string

const (
	Approve Decision = "approve"
	Deny    Decision = "deny"
)

// Scope is what an approval covers: the one request it names, or, for a session, every identical
// request (same action and digest) until it expires. A deny always covers its one request.
type Scope string

const (
	ScopeOnce    Scope = "once"
	ScopeSession Scope = "session"
)

// Reason is a verdict's stable code: a component passes it to the agent, tests match it.
type Reason string

const (
	ReasonApproved    Reason = "approved"               // the operator approved this request
	ReasonSession     Reason = "approved_session"       // a session approval of an identical request covers it
	ReasonAuto        Reason = "approved_auto"          // the action's tier is auto: no person is asked
	ReasonDenied      Reason = "approval_denied"        // the operator denied it
	ReasonTimeout     Reason = "approval_timeout"       // no decision before the request expired
	ReasonInvalid     Reason = "approval_invalid"       // a malformed or oversized token
	ReasonSignature   Reason = "approval_bad_signature" // not signed by the pinned operator key
	ReasonMismatch    Reason = "approval_mismatch"      // signed for another request
	ReasonExpired     Reason = "approval_expired"       // past its not_after
	ReasonNotYetValid Reason = "approval_not_yet_valid" // issued in the future
	ReasonReplayed    Reason = "approval_replayed"      // its request id or nonce was used already
	ReasonTier        Reason = "approval_tier"          // a session approval for an action whose tier is every
	ReasonUnavailable Reason = "approval_unavailable"   // the gate itself failed; the cause is in the log
)

// Verdict is the outcome of a request. Its zero value denies.
type Verdict struct {
	approved bool
	reason   Reason
	c        claims // of an approval
	id       string // of the request the operator was asked about
}

// Approved reports whether the action may go ahead.
func (v Verdict) Approved() bool { return v.approved }

// ID is the id of the request the operator was asked about, whatever the outcome, for the
// component's record; "" when nobody was asked (tier auto, a session approval in force, no gate).
func (v Verdict) ID() string { return v.id }

// Reason is the verdict's code; the zero Verdict's is approval_invalid.
func (v Verdict) Reason() Reason {
	if v.reason == "" {
		return ReasonInvalid
	}
	return v.reason
}

// envelope is a decision file: the claims exactly as signed, and the signature over them.
type envelope struct {
	Payload string `json:"payload"` // standard base64 of the claims' canonical JSON (RFC 8785)
	Key     string `json:"key"`     // the signer's key id (keys.ID); named in refusals, never trusted
	Sig     string `json:"sig"`     // standard base64 Ed25519 signature over signContext + payload
}

// claims are what the operator signs. Every request field but the summary is bound.
type claims struct {
	V         int       `json:"v"`
	ID        string    `json:"id"`
	Component string    `json:"component"`
	Action    string    `json:"action"`
	Digest    string    `json:"digest"`
	Policy    string    `json:"policy"`
	Decision  Decision  `json:"decision"`
	Tier      Scope     `json:"tier"`
	IssuedAt  time.Time `json:"issued_at"`
	NotAfter  time.Time `json:"not_after"`
	Nonce     string    `json:"nonce"`
}

func (c claims) canonical() ([]byte, error) {
	b, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	return jcs.Transform(b)
}

// sign makes the decision file for c.
func sign(c claims, key ed25519.PrivateKey) ([]byte, error) {
	payload, err := c.canonical()
	if err != nil {
		return nil, fmt.Errorf("encode decision: %w", err)
	}
	env := envelope{
		Payload: base64.StdEncoding.EncodeToString(payload),
		Key:     keys.ID(key.Public().(ed25519.PublicKey)),
		Sig:     base64.StdEncoding.EncodeToString(ed25519.Sign(key, append([]byte(signContext), payload...))),
	}
	data, err := json.Marshal(env)
	return append(data, '\n'), err
}

// Check decides whether token, a decision file, lets the component carry out pending: signed by
// pub, bound to every field of pending, within its validity (±Skew), not spent according to
// used, and not a session approval for a tier-every action. Check records nothing: the caller
// adds an approval's id and nonce to used (Gate does). A signed deny is a Verdict with
// ReasonDenied and a nil error; every refusal carries a non-nil error naming its cause.
func Check(token []byte, pub ed25519.PublicKey, pending Request, now time.Time, used *Set) (Verdict, error) {
	c, reason, err := verify(token, pub)
	if err != nil {
		return Verdict{reason: reason}, err
	}
	for _, f := range [][3]string{{"id", c.ID, pending.ID}, {"component", c.Component, pending.Component},
		{"action", c.Action, pending.Action}, {"digest", c.Digest, pending.Digest}, {"policy", c.Policy, pending.Policy}} {
		if f[1] != f[2] {
			return Verdict{reason: ReasonMismatch}, fmt.Errorf("approval is for %s %q, the request has %q", f[0], f[1], f[2])
		}
	}
	switch {
	case c.Decision == Approve && c.Tier == ScopeSession && pending.Tier != Once:
		return Verdict{reason: ReasonTier}, fmt.Errorf("a session approval for %s, whose tier is %s: each request needs its own approval", c.Action, pending.Tier)
	case now.Add(Skew).Before(c.IssuedAt):
		return Verdict{reason: ReasonNotYetValid}, fmt.Errorf("approval issued at %s, in the future", c.IssuedAt.Format(time.RFC3339))
	case now.Add(-Skew).After(c.NotAfter):
		return Verdict{reason: ReasonExpired}, fmt.Errorf("approval expired at %s", c.NotAfter.Format(time.RFC3339))
	case used == nil:
		return Verdict{reason: ReasonUnavailable}, fmt.Errorf("no record of spent approvals to check against")
	case used.Has(c.ID) || used.Has(c.Nonce):
		return Verdict{reason: ReasonReplayed}, fmt.Errorf("approval for request %s was used already", c.ID)
	case c.Decision == Deny:
		return Verdict{reason: ReasonDenied}, nil
	}
	return Verdict{approved: true, reason: ReasonApproved, c: c}, nil
}

// verify parses a decision file and checks its signature before it reads the claims.
func verify(token []byte, pub ed25519.PublicKey) (claims, Reason, error) {
	if len(token) > MaxToken {
		return claims{}, ReasonInvalid, fmt.Errorf("decision: more than %d bytes", MaxToken)
	}
	var env envelope
	if err := strictjson.Decode(token, 1, &env); err != nil {
		return claims{}, ReasonInvalid, fmt.Errorf("decision: %w", err)
	}
	payload, perr := base64.StdEncoding.Strict().DecodeString(env.Payload)
	sig, serr := base64.StdEncoding.Strict().DecodeString(env.Sig)
	switch {
	case perr != nil || serr != nil || len(sig) != ed25519.SignatureSize:
		return claims{}, ReasonInvalid, fmt.Errorf("decision: payload or signature is not standard base64 of the right size")
	case len(pub) != ed25519.PublicKeySize:
		return claims{}, ReasonSignature, fmt.Errorf("operator key: %d bytes, not an Ed25519 public key", len(pub))
	case !ed25519.Verify(pub, append([]byte(signContext), payload...), sig):
		return claims{}, ReasonSignature, fmt.Errorf("decision signature does not verify with the operator key %s (the decision names %.80q)", keys.ID(pub), env.Key)
	}
	c, err := parseClaims(payload)
	if err != nil {
		return claims{}, ReasonInvalid, err
	}
	return c, "", nil
}

// parseClaims reads signed claims. They must be exactly the canonical encoding of what they
// decode to, so there is one byte string per meaning (no alternate spellings, nothing missing).
func parseClaims(payload []byte) (claims, error) {
	var c claims
	if err := strictjson.Decode(payload, 1, &c); err != nil {
		return claims{}, fmt.Errorf("decision claims: %w", err)
	}
	canon, err := c.canonical()
	switch {
	case err != nil || !bytes.Equal(canon, payload):
		return claims{}, fmt.Errorf("decision claims: not in canonical form or missing a field")
	case c.V != 1:
		return claims{}, fmt.Errorf("decision claims: unknown version %d", c.V)
	case c.Decision != Approve && c.Decision != Deny:
		return claims{}, fmt.Errorf("decision claims: decision %q is neither approve nor deny", c.Decision)
	case c.Tier != ScopeOnce && c.Tier != ScopeSession:
		return claims{}, fmt.Errorf("decision claims: tier %q is neither once nor session", c.Tier)
	case !idPattern.MatchString(c.Nonce):
		return claims{}, fmt.Errorf("decision claims: malformed nonce")
	case !c.NotAfter.After(c.IssuedAt) || c.NotAfter.Sub(c.IssuedAt) > MaxTTL:
		return claims{}, fmt.Errorf("decision claims: validity must be positive and at most %s", MaxTTL)
	}
	return c, nil
}
