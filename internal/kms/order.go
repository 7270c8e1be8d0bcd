package kms

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/sharness-ai/sharness/internal/gate"
	"github.com/sharness-ai/sharness/internal/seal"
	"github.com/sharness-ai/sharness/policies/pbp"
)

// The approval gate (internal/gate, docs/gate.md) in kms: a caller's seal_to waits for the
// operator, and the operator's own orders (the host's `sharness-ai export`) re-seal secrets to a
// recipient without any endpoint. Both end in the same re-seal.

// RefuseApproval is the refusal of a caller's seal_to that the gate did not approve: the gate's
// reason is its type (approval_denied, approval_timeout, approval_unavailable, ...; docs/gate.md),
// with 503 when nobody could be asked and 403 otherwise.
func RefuseApproval(reason gate.Reason) *Refusal {
	status := 403
	if reason == gate.ReasonUnavailable {
		status = 503
	}
	return &Refusal{Status: status, Type: string(reason), Message: "seal_to needs the operator's approval: " + reason.Text()}
}

// ActionSealTo is the gate action of a caller's seal_to; its tier is every.
const ActionSealTo = "kms.seal_to"

// OrderSealTo is the one op the operator may order kms to carry out.
const OrderSealTo = "seal_to"

// MaxOrderSecrets bounds the secrets of one order (a result holds them all).
const MaxOrderSecrets = 256

// SealToCanonical is what an approval of a caller's seal_to binds: the secret's name, the
// recipient (its fingerprint, and the SHA-256 of its whole key, since a fingerprint is 64 bits),
// the expiry asked for and the caller. Keys in a fixed order, so the bytes are one per request.
func SealToCanonical(caller string, q *Request) []byte {
	sum := sha256.Sum256(q.Recipient.Key().Bytes())
	out, _ := json.Marshal(struct {
		V            int    `json:"v"`
		Op           string `json:"op"`
		Name         string `json:"name"`
		Recipient    string `json:"recipient"`
		RecipientKey string `json:"recipient_key_sha256"`
		Expires      string `json:"expires"`
		Caller       string `json:"caller"`
	}{1, "seal_to", q.Name, q.Recipient.Fingerprint(), hex.EncodeToString(sum[:]), q.Expires.UTC().Format(time.RFC3339), caller})
	return out
}

// SealToSummary is what the operator reads about a caller's seal_to: the secret's name, the
// recipient's fingerprint and the caller; never secret bytes.
func SealToSummary(caller string, q *Request) string {
	return fmt.Sprintf("re-seal secret %s to %s for %s, until %s", q.Name, q.Recipient.Fingerprint(), caller, q.Expires.UTC().Format(time.RFC3339))
}

// SealToOrder is what an operator's seal_to order asks: the named secrets, or all the sealed
// secrets kms holds, re-sealed to Recipient. Each keeps its own expiry: an export does not
// lengthen a secret's life.
type SealToOrder struct {
	Names     []string
	All       bool
	Recipient *seal.Bundle
}

// sealToArgs are an order's args, exactly these keys.
type sealToArgs struct {
	V         int             `json:"v"`
	Secrets   []string        `json:"secrets"`
	All       bool            `json:"all"`
	Recipient json.RawMessage `json:"recipient"`
}

// Args is o as an order's args.
func (o SealToOrder) Args() string {
	out, _ := json.Marshal(sealToArgs{V: 1, Secrets: o.Names, All: o.All, Recipient: o.Recipient.Marshal()})
	return string(out)
}

// ParseSealToOrder reads an order's args strictly: either names (distinct secret names, at most
// MaxOrderSecrets) or all, and a recipient bundle.
func ParseSealToOrder(args string) (SealToOrder, error) {
	var a sealToArgs
	if err := seal.DecodeStrict([]byte(args), maxDepth, &a); err != nil {
		return SealToOrder{}, fmt.Errorf("seal_to order: %w", err)
	}
	switch {
	case a.V != 1:
		return SealToOrder{}, fmt.Errorf("seal_to order: version %d, want 1", a.V)
	case a.All == (len(a.Secrets) > 0):
		return SealToOrder{}, errors.New("seal_to order: name the secrets or ask for all, not both nor neither")
	case len(a.Secrets) > MaxOrderSecrets:
		return SealToOrder{}, fmt.Errorf("seal_to order: %d secrets, at most %d", len(a.Secrets), MaxOrderSecrets)
	}
	for i, n := range a.Secrets {
		if !pbp.SecretName(n) || slices.Contains(a.Secrets[:i], n) {
			return SealToOrder{}, fmt.Errorf("seal_to order: %q is not a secret name, or is named twice", n)
		}
	}
	b, err := seal.ParseBundle(a.Recipient)
	if err != nil {
		return SealToOrder{}, fmt.Errorf("seal_to order: recipient: %w", err)
	}
	return SealToOrder{Names: a.Secrets, All: a.All, Recipient: b}, nil
}

// OrderAnswer is kms's output for a seal_to order it carried out: its own bundle (the host checks
// the policy hash and identity it names) and the re-sealed files, public material only.
type OrderAnswer struct {
	KMS    *seal.Bundle
	Sealed []*seal.Sealed
}

type orderAnswer struct {
	V      int             `json:"v"`
	KMS    json.RawMessage `json:"kms"`
	Sealed []string        `json:"sealed"` // each a sealed secret file
}

// Marshal writes a as an order's output.
func (a OrderAnswer) Marshal() string {
	files := make([]string, len(a.Sealed))
	for i, s := range a.Sealed {
		files[i] = string(s.Marshal())
	}
	out, _ := json.Marshal(orderAnswer{V: 1, KMS: a.KMS.Marshal(), Sealed: files})
	return string(out)
}

// ParseOrderAnswer reads an order's output strictly: a bundle, and sealed files of distinct names.
func ParseOrderAnswer(output string) (OrderAnswer, error) {
	var a orderAnswer
	if err := seal.DecodeStrict([]byte(output), maxDepth, &a); err != nil {
		return OrderAnswer{}, fmt.Errorf("kms order answer: %w", err)
	}
	if a.V != 1 || len(a.Sealed) > MaxOrderSecrets {
		return OrderAnswer{}, fmt.Errorf("kms order answer: version %d, want 1, with at most %d files", a.V, MaxOrderSecrets)
	}
	b, err := seal.ParseBundle(a.KMS)
	if err != nil {
		return OrderAnswer{}, fmt.Errorf("kms order answer: %w", err)
	}
	ans := OrderAnswer{KMS: b}
	for _, f := range a.Sealed {
		s, err := seal.ParseSealed([]byte(f))
		if err != nil {
			return OrderAnswer{}, fmt.Errorf("kms order answer: %w", err)
		}
		if slices.ContainsFunc(ans.Sealed, func(o *seal.Sealed) bool { return o.Name() == s.Name() }) {
			return OrderAnswer{}, fmt.Errorf("kms order answer: secret %s twice", s.Name())
		}
		ans.Sealed = append(ans.Sealed, s)
	}
	return ans, nil
}

// CheckFile applies to a sealed file the rules Decide applies before kms opens it, for an order
// of the operator: sealed to this identity, not expired, from a trusted sender. business.kms.ops,
// max_unwraps and the nonce and timestamp rules bind callers, not the operator.
func CheckFile(r Rules, name string, f *seal.Sealed, now time.Time) *Refusal {
	if f.To() != r.Fingerprint {
		return Refuse(ReasonRecipient, "secret %s is sealed to %s, this kms is %s", name, f.To(), r.Fingerprint)
	}
	if !now.Before(f.Expires()) {
		return Refuse(ReasonExpired, "secret %s expired at %s", name, f.Expires().Format(time.RFC3339))
	}
	if !r.AnySender && !slices.ContainsFunc(r.Senders, func(k ed25519.PublicKey) bool { return k.Equal(f.Sender()) }) {
		return Refuse(ReasonSender, "secret %s is not signed by a trusted sender (business.kms.trusted_senders)", name)
	}
	return nil
}
