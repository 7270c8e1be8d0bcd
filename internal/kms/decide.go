// Package kms is custody's contract: the ops and their strict JSON (ParseRequest), the named
// refusals, the decision that admits or refuses a call in one fixed order (Decide, pure but for
// the session lookups it is handed), and the client llm uses (Client). The server that holds the
// identity is package custody; the process hardening is package hygiene.
//
// The protocol: the identity is a P-256 KEM key made inside kms at start, never imported or
// exported. Secrets reach kms only sealed to it (sharness-ai secret seal) and leave it only
// sealed again: to the caller's one-time key (unwrap), bound to the exact request body, or to
// another identity (seal_to).
//
// What it does not guarantee: that a caller does not leak what it unwraps (llm holds the key it
// asked for, and the client cannot scrub the copies Go's crypto makes of it); secrecy against
// root or the kernel; replay protection across a kms restart (nonces live in kms's memory; the
// timestamp window bounds the gap).
package kms

import (
	"cmp"
	"crypto/ed25519"
	"crypto/hpke"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/sharness-ai/sharness/internal/seal"
	"github.com/sharness-ai/sharness/policies/keys"
	"github.com/sharness-ai/sharness/policies/pbp"
)

// The error types of refusals, in the order Decide checks, then those of malformed calls.
const (
	ReasonCaller     = "caller_not_allowed"      // 403: the caller's role may not call kms
	ReasonOp         = "op_not_allowed"          // 403: business.kms.ops does not list the op
	ReasonDestroyed  = "destroyed"               // 410: the identity was destroyed
	ReasonNonce      = "nonce_reused"            // 409: the nonce was seen before
	ReasonNonceFull  = "nonce_store_full"        // 503: too many live nonces to remember one more
	ReasonTimestamp  = "timestamp_out_of_window" // 400: ts is more than Window away from kms's clock
	ReasonPolicy     = "policy_mismatch"         // 403: the caller runs under another policy
	ReasonUnknown    = "unknown_secret"          // 404: no <name>.sealed in the secrets folder
	ReasonInvalid    = "secret_invalid"          // 500: the file does not parse or does not open
	ReasonRecipient  = "wrong_recipient"         // 403: the file is sealed to another identity
	ReasonExpired    = "secret_expired"          // 403: the file's expiry has passed
	ReasonExpiry     = "bad_expiry"              // 400: seal_to asked for an expiry past the file's, or past
	ReasonSender     = "untrusted_sender"        // 403: not signed by a key of trusted_senders
	ReasonLimit      = "unwrap_limit"            // 429: business.kms.max_unwraps reached
	ReasonBadRequest = "bad_request"             // 400: the body is not the op's strict schema
	ReasonTooLarge   = "too_large"               // 413: the body exceeds seal.MaxFile
	ReasonNotFound   = "not_found"               // 404: no such op
	ReasonMethod     = "method_not_allowed"      // 405: not POST
	ReasonInternal   = "internal"                // 500
	ReasonAudit      = "audit_unavailable"       // 503: kms's audit log takes no more lines (a full or read-only volume)
)

// Window is how far a request's timestamp may be from kms's clock; nonces are remembered until
// ts + 2×Window, past which the timestamp check alone refuses a replay.
const Window = 60 * time.Second

var statuses = map[string]int{
	ReasonCaller: 403, ReasonOp: 403, ReasonDestroyed: 410, ReasonNonce: 409, ReasonNonceFull: 503,
	ReasonTimestamp: 400, ReasonPolicy: 403, ReasonUnknown: 404, ReasonInvalid: 500,
	ReasonRecipient: 403, ReasonExpired: 403, ReasonExpiry: 400, ReasonSender: 403, ReasonLimit: 429,
	ReasonBadRequest: 400, ReasonTooLarge: 413, ReasonNotFound: 404, ReasonMethod: 405, ReasonInternal: 500,
	ReasonAudit: 503,
}

// Refusal is a refused call: what kms answers ({"error":{"type","message"}} with Status) and what
// Client returns. It matches ErrRefused with errors.Is.
type Refusal struct {
	Status  int
	Type    string // one of the Reason constants
	Message string // public text: names the rule, never secret material
}

// JSON is the refusal's answer body.
func (r *Refusal) JSON() []byte {
	var e ErrorAnswer
	e.Error.Type, e.Error.Message = r.Type, r.Message
	out, _ := json.Marshal(e)
	return out
}

func (r *Refusal) Error() string { return "kms refused: " + r.Type + ": " + r.Message }

// Is makes errors.Is(err, ErrRefused) true for every refusal.
func (r *Refusal) Is(target error) bool { return target == ErrRefused }

// Refuse makes the refusal of reason, with its status and a public message.
func Refuse(reason, format string, args ...any) *Refusal {
	st := cmp.Or(statuses[reason], http.StatusInternalServerError)
	return &Refusal{Status: st, Type: reason, Message: fmt.Sprintf(format, args...)}
}

// Rules are kms's decision inputs that hold for the whole session.
type Rules struct {
	Callers     []string // components that may call kms: llm, and net when the manifest has net→kms
	Ops         []string // business.kms.ops; unset is none
	PolicyHash  string
	Fingerprint string              // of kms's own identity
	Senders     []ed25519.PublicKey // business.kms.trusted_senders
	AnySender   bool                // trusted_senders unset: unsigned files, and any signer, are accepted
	MaxUnwraps  int                 // business.kms.max_unwraps: < 0 no limit, 0 none
}

// NewRules reads the rules of component self of m, whose identity has the given fingerprint.
func NewRules(m *pbp.Manifest, self, fingerprint string) (Rules, error) {
	c := m.Component(self)
	if c == nil || c.Kind != pbp.KindKMS {
		return Rules{}, fmt.Errorf("component %q is no kms of policy %s", self, m.Hash)
	}
	r := Rules{PolicyHash: m.Hash, Fingerprint: fingerprint, AnySender: true, MaxUnwraps: -1}
	for _, e := range m.Edges {
		// mtls already refuses a client without an edge; kms also refuses every role but these.
		if from := m.Component(e.From); e.To == self && from != nil && (from.Kind == pbp.KindLLM || from.Kind == pbp.KindNet) {
			r.Callers = append(r.Callers, from.Name)
		}
	}
	k := cmp.Or(c.Business.KMS, &pbp.KMSRules{})
	if k.Ops != nil {
		r.Ops = slices.Clone(*k.Ops)
	}
	if k.MaxUnwraps != nil {
		r.MaxUnwraps = *k.MaxUnwraps
	}
	if k.TrustedSenders != nil {
		r.AnySender = false
		for _, s := range *k.TrustedSenders {
			pub, err := keys.ParsePin(s)
			if err != nil {
				return Rules{}, fmt.Errorf("business.kms.trusted_senders: %w", err)
			}
			r.Senders = append(r.Senders, pub)
		}
	}
	return r, nil
}

// Request is a call's parsed body; fields its op does not have are zero.
type Request struct {
	Name       string         // unwrap, seal_to
	EphPub     hpke.PublicKey // unwrap: the caller's one-time key
	Recipient  *seal.Bundle   // seal_to
	Expires    time.Time      // seal_to
	Nonce      [16]byte       // unwrap, seal_to, destroy
	TS         time.Time
	PolicyHash string
}

// Call is one call as Decide sees it.
type Call struct {
	Caller    string   // component name from the peer's SVID ("" if none)
	Op        string   // one of pbp.KMSOps
	Request   *Request // nil when Malformed is set
	Malformed *Refusal // why the body was refused (too large, not the schema)
}

// Session is the state Decide consults; each method is called only when every check before it
// passed, so a refused caller never consumes a nonce, a file read or a use.
type Session interface {
	Destroyed() bool
	// UseNonce records nonce until the given time; "" if it was unused, else a Reason.
	UseNonce(nonce [16]byte, until time.Time) string
	// Load reads the named sealed file.
	Load(name string) (*seal.Sealed, *Refusal)
	// TakeUse counts one opening if fewer than max were counted.
	TakeUse(max int) bool
}

// Decide checks a call in the design's order (docs/architecture.md, "The model path and
// custody") and returns the first refusal, or nil and, for unwrap and seal_to, the sealed file to
// open. A destroy after destroy is allowed (idempotent) and does nothing.
func Decide(r Rules, c Call, now time.Time, s Session) (*seal.Sealed, *Refusal) {
	if !slices.Contains(r.Callers, c.Caller) {
		return nil, Refuse(ReasonCaller, "component %q may not call kms", c.Caller)
	}
	if !slices.Contains(r.Ops, c.Op) {
		return nil, Refuse(ReasonOp, "the policy does not allow kms op %q (business.kms.ops)", c.Op)
	}
	if s.Destroyed() {
		if c.Op == "destroy" {
			return nil, nil
		}
		return nil, Refuse(ReasonDestroyed, "the kms identity was destroyed")
	}
	if c.Malformed != nil {
		return nil, c.Malformed
	}
	if c.Op == "public" {
		return nil, nil
	}
	q := c.Request
	// Kept until the timestamp check alone refuses a replay; a timestamp beyond the window is
	// refused next anyway, so it cannot pin its nonce in the store for longer.
	if reason := s.UseNonce(q.Nonce, minTime(q.TS, now.Add(Window)).Add(2*Window)); reason != "" {
		return nil, Refuse(reason, "nonce %x", q.Nonce[:4])
	}
	if d := q.TS.Sub(now); d > Window || d < -Window {
		return nil, Refuse(ReasonTimestamp, "ts is %s from kms's clock, more than %s", d.Round(time.Second), Window)
	}
	if q.PolicyHash != r.PolicyHash {
		return nil, Refuse(ReasonPolicy, "caller runs policy %s, kms runs %s", q.PolicyHash, r.PolicyHash)
	}
	if c.Op == "destroy" {
		return nil, nil
	}
	f, ref := s.Load(q.Name)
	if ref != nil {
		return nil, ref
	}
	if f.To() != r.Fingerprint {
		return nil, Refuse(ReasonRecipient, "secret %s is sealed to %s, this kms is %s", q.Name, f.To(), r.Fingerprint)
	}
	if !now.Before(f.Expires()) {
		return nil, Refuse(ReasonExpired, "secret %s expired at %s", q.Name, f.Expires().Format(time.RFC3339))
	}
	if c.Op == "seal_to" && (q.Expires.After(f.Expires()) || !now.Before(q.Expires)) {
		return nil, Refuse(ReasonExpiry, "seal_to expiry %s must be in the future and not after the secret's own, %s", q.Expires.Format(time.RFC3339), f.Expires().Format(time.RFC3339))
	}
	if !r.AnySender && !slices.ContainsFunc(r.Senders, func(k ed25519.PublicKey) bool { return k.Equal(f.Sender()) }) {
		return nil, Refuse(ReasonSender, "secret %s is not signed by a trusted sender (business.kms.trusted_senders)", q.Name)
	}
	if r.MaxUnwraps >= 0 && !s.TakeUse(r.MaxUnwraps) {
		return nil, Refuse(ReasonLimit, "this session's %d openings are used (business.kms.max_unwraps)", r.MaxUnwraps)
	}
	return f, nil
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
