package seal

import (
	"crypto/hpke"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"time"

	"github.com/sharness-ai/sharness/policies/keys"
)

// BundleKind is the kind of a kms identity bundle.
const BundleKind = "sharness.ai/kms-bundle/v1"

// Hygiene limits: a report is a handful of short lines.
const (
	maxHygiene      = 32
	maxHygieneValue = 256
)

var hygieneKey = regexp.MustCompile(`^[a-z0-9_]{1,32}$`)

// bundleFile is the JSON of a bundle, exactly these keys.
type bundleFile struct {
	V           int               `json:"v"`
	Kind        string            `json:"kind"`
	KEMPub      string            `json:"kem_pub"`
	Fingerprint string            `json:"fingerprint"`
	PolicyHash  string            `json:"policy_hash"`
	Created     string            `json:"created"`
	Hygiene     map[string]string `json:"hygiene"`
}

// BundleLogPrefix starts the one line on which sharness-kms prints its bundle at start
// (images/kms), and by which `sharness-ai kms bundle` and `doctor` find it in its log.
const BundleLogPrefix = "SHARNESS_AI_KMS_BUNDLE "

// Bundle is a kms identity's public description: what `sharness-ai secret seal --to` seals to.
// It holds public material only.
type Bundle struct {
	key        hpke.PublicKey
	policyHash string
	created    time.Time
	hygiene    map[string]string
}

// NewBundle describes the identity whose public key is pk, in the session of policyHash.
// hygiene is the kms memory-hygiene report (what it is to what it got: "ok" or a degradation).
func NewBundle(pk hpke.PublicKey, policyHash string, created time.Time, hygiene map[string]string) (*Bundle, error) {
	b := &Bundle{key: pk, policyHash: policyHash, created: created.UTC().Truncate(time.Second), hygiene: maps.Clone(hygiene)}
	if _, err := ParseBundle(b.Marshal()); err != nil { // one rule set for what we write and read
		return nil, err
	}
	return b, nil
}

// Key is the identity's KEM public key.
func (b *Bundle) Key() hpke.PublicKey { return b.key }

// Fingerprint names the identity (see Fingerprint).
func (b *Bundle) Fingerprint() string { return Fingerprint(b.key) }

// PolicyHash is the policy hash of the session the identity belongs to.
func (b *Bundle) PolicyHash() string { return b.policyHash }

// Created is when the identity was made.
func (b *Bundle) Created() time.Time { return b.created }

// Hygiene is a copy of the memory-hygiene report.
func (b *Bundle) Hygiene() map[string]string { return maps.Clone(b.hygiene) }

// Marshal writes the bundle as one line of JSON (no final newline), keys of hygiene sorted.
func (b *Bundle) Marshal() []byte {
	out, _ := json.Marshal(bundleFile{V: 1, Kind: BundleKind, KEMPub: b64.EncodeToString(b.key.Bytes()),
		Fingerprint: b.Fingerprint(), PolicyHash: b.policyHash, Created: formatTime(b.created), Hygiene: b.hygiene})
	return out
}

// ParseBundle reads a bundle strictly and checks its fingerprint is its key's.
func ParseBundle(data []byte) (*Bundle, error) {
	b, err := parseBundle(data)
	if err != nil {
		return nil, fmt.Errorf("kms bundle: %w", err)
	}
	return b, nil
}

func parseBundle(data []byte) (*Bundle, error) {
	if len(data) > MaxFile {
		return nil, fmt.Errorf("%d bytes, more than %d", len(data), MaxFile)
	}
	var f bundleFile
	if err := DecodeStrict(data, maxDepth, &f); err != nil {
		return nil, err
	}
	switch {
	case f.V != 1:
		return nil, fmt.Errorf("version %d, want 1", f.V)
	case f.Kind != BundleKind:
		return nil, fmt.Errorf("kind %q, want %q", f.Kind, BundleKind)
	case len(f.Hygiene) > maxHygiene:
		return nil, fmt.Errorf("hygiene has %d entries, at most %d", len(f.Hygiene), maxHygiene)
	}
	if err := keys.CheckHash(f.PolicyHash); err != nil {
		return nil, err
	}
	for k, v := range f.Hygiene {
		if !hygieneKey.MatchString(k) || len(v) > maxHygieneValue {
			return nil, fmt.Errorf("hygiene entry %q: keys are [a-z0-9_]{1,32}, values at most %d bytes", k, maxHygieneValue)
		}
	}
	key, err := ParsePublicKeyBase64(f.KEMPub)
	if err != nil {
		return nil, fmt.Errorf("kem_pub: %w", err)
	}
	if fp := Fingerprint(key); f.Fingerprint != fp {
		return nil, fmt.Errorf("fingerprint %q is not the key's (%s)", f.Fingerprint, fp)
	}
	created, err := parseCanonicalTime(f.Created)
	if err != nil {
		return nil, fmt.Errorf("created: %w", err)
	}
	return &Bundle{key: key, policyHash: f.PolicyHash, created: created, hygiene: f.Hygiene}, nil
}
