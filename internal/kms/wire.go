package kms

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/sharness-ai/sharness/internal/seal"
	"github.com/sharness-ai/sharness/policies/keys"
	"github.com/sharness-ai/sharness/policies/pbp"
)

// maxDepth bounds request nesting: seal_to's recipient bundle and its hygiene are the deepest.
const maxDepth = 4

// The request bodies, exactly these keys (seal.DecodeStrict). Every op has v; those that act
// also carry a one-time nonce, a timestamp and the caller's policy hash.
type (
	publicBody struct {
		V int `json:"v"`
	}
	unwrapBody struct {
		V          int    `json:"v"`
		Name       string `json:"name"`
		EphPub     string `json:"eph_pub"`
		Nonce      string `json:"nonce"`
		TS         string `json:"ts"`
		PolicyHash string `json:"policy_hash"`
	}
	sealToBody struct {
		V          int             `json:"v"`
		Name       string          `json:"name"`
		Recipient  json.RawMessage `json:"recipient"`
		Expires    string          `json:"expires"`
		Nonce      string          `json:"nonce"`
		TS         string          `json:"ts"`
		PolicyHash string          `json:"policy_hash"`
	}
	destroyBody struct {
		V          int    `json:"v"`
		Nonce      string `json:"nonce"`
		TS         string `json:"ts"`
		PolicyHash string `json:"policy_hash"`
	}
)

// Answers: a refusal is ErrorAnswer with its status; an op's success is 200 with the op's answer
// (public: the bundle; seal_to: the sealed file; unwrap and destroy: these).
type (
	UnwrapAnswer struct {
		V         int    `json:"v"`
		Sealed    string `json:"sealed"`     // HPKE enc || ct to eph_pub, AD = SHA-256 of the request body
		ExpiresIn int64  `json:"expires_in"` // seconds until the sealed file expires
	}
	DestroyAnswer struct {
		V         int  `json:"v"`
		Destroyed bool `json:"destroyed"`
	}
	ErrorAnswer struct {
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
)

// ParseRequest reads the body of op strictly. Any error is a bad request.
func ParseRequest(op string, body []byte) (*Request, error) {
	var (
		q     Request
		fresh destroyBody // the nonce, ts and policy hash of the ops that act
		err   error
	)
	switch op {
	case "public":
		var b publicBody
		if err := seal.DecodeStrict(body, maxDepth, &b); err != nil {
			return nil, err
		}
		return &q, version(b.V)
	case "unwrap":
		var b unwrapBody
		if err := seal.DecodeStrict(body, maxDepth, &b); err != nil {
			return nil, err
		}
		if q.EphPub, err = seal.ParsePublicKeyBase64(b.EphPub); err != nil {
			return nil, fmt.Errorf("eph_pub: %w", err)
		}
		q.Name, fresh = b.Name, destroyBody{b.V, b.Nonce, b.TS, b.PolicyHash}
	case "seal_to":
		var b sealToBody
		if err := seal.DecodeStrict(body, maxDepth, &b); err != nil {
			return nil, err
		}
		if q.Recipient, err = seal.ParseBundle(b.Recipient); err != nil {
			return nil, fmt.Errorf("recipient: %w", err)
		}
		if q.Expires, err = time.Parse(time.RFC3339, b.Expires); err != nil {
			return nil, fmt.Errorf("expires: not an RFC 3339 time")
		}
		q.Name, fresh = b.Name, destroyBody{b.V, b.Nonce, b.TS, b.PolicyHash}
	case "destroy":
		if err := seal.DecodeStrict(body, maxDepth, &fresh); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("no op %q", op)
	}
	if op != "destroy" && !pbp.SecretName(q.Name) {
		return nil, fmt.Errorf("name %q is not a secret name", q.Name)
	}
	if err := version(fresh.V); err != nil {
		return nil, err
	}
	nonce, err := seal.DecodeBase64(fresh.Nonce)
	if err != nil || len(nonce) != len(q.Nonce) {
		return nil, fmt.Errorf("nonce: want the base64 of %d random bytes", len(q.Nonce))
	}
	copy(q.Nonce[:], nonce)
	if q.TS, err = time.Parse(time.RFC3339, fresh.TS); err != nil {
		return nil, fmt.Errorf("ts: not an RFC 3339 time")
	}
	if err := keys.CheckHash(fresh.PolicyHash); err != nil {
		return nil, err
	}
	q.PolicyHash = fresh.PolicyHash
	return &q, nil
}

func version(v int) error {
	if v != 1 {
		return fmt.Errorf("version %d, want 1", v)
	}
	return nil
}
