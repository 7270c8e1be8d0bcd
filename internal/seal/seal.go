// Package seal is the sealing of SHarness: HPKE envelopes (RFC 9180, base mode, single shot,
// DHKEM(P-256) + HKDF-SHA256 + AES-256-GCM) and the two public file formats built on them, the
// kms identity bundle and the sealed secret file. It is pure: no network, no files, no logs.
//
// What it guarantees: a sealed secret opens only with the private key of the identity it is
// addressed to, and only under the name, expiry and sender it was sealed with (they are bound
// into the HPKE info and associated data, so editing the file makes it unopenable); a signed
// file's signature covers every other field; an unwrap response opens only for the request it
// answers (its associated data is the SHA-256 of the exact request body). Parsers refuse any
// byte they do not understand: unknown, duplicate or case-variant keys, non-canonical base64.
//
// What it does not guarantee: who sealed an unsigned file (anyone holding the public bundle
// can); that a sender key is trustworthy (kms decides that from its policy); that an expiry is
// enforced (the opener checks it against its clock); forward secrecy for sealed files (whoever
// later holds the identity key opens every file sealed to it). A fingerprint is 64 bits of
// SHA-256: a label to address files and to compare by eye, not a proof of the key.
package seal

import (
	"crypto/ecdh"
	"crypto/hpke"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/sharness-ai/sharness/internal/strictjson"
)

// Sizes the formats hold to.
const (
	MaxFile   = 16 << 10 // a sealed secret file, a bundle, a kms request
	MaxSecret = 8 << 10  // a secret's value
	PubSize   = 65       // an uncompressed P-256 point, the KEM's public key and its enc
	maxDepth  = 4
)

// Info strings (RFC 9180 §5.1 "info"): each binds a ciphertext to its one purpose, so a
// response can never be presented as a sealed secret or the other way round.
const (
	infoSecret   = "sharness-ai/secret/v1"
	infoResponse = "sharness-ai/kms-response/v1"
)

var (
	kem  = hpke.DHKEM(ecdh.P256())
	kdf  = hpke.HKDFSHA256()
	aead = hpke.AES256GCM()
	b64  = base64.StdEncoding.Strict()
)

// ErrOpen is returned (wrapped) when a ciphertext does not open: wrong key, wrong context, or
// tampered bytes. HPKE cannot tell them apart, and neither does this package.
var ErrOpen = errors.New("does not open")

// GenerateKey makes a fresh P-256 KEM key pair.
func GenerateKey() (hpke.PrivateKey, error) { return kem.GenerateKey() }

// NewPrivateKey rebuilds a private key from its 32-byte scalar (hpke.PrivateKey.Bytes), which
// kms keeps in secret memory between operations.
func NewPrivateKey(scalar []byte) (hpke.PrivateKey, error) {
	k, err := kem.NewPrivateKey(scalar)
	if err != nil {
		return nil, fmt.Errorf("identity key: %w", err)
	}
	return k, nil
}

// ParsePublicKey reads an uncompressed P-256 point and checks it is on the curve.
func ParsePublicKey(raw []byte) (hpke.PublicKey, error) {
	if len(raw) != PubSize || raw[0] != 4 {
		return nil, fmt.Errorf("public key: %d bytes, want an uncompressed P-256 point of %d", len(raw), PubSize)
	}
	pk, err := kem.NewPublicKey(raw)
	if err != nil {
		return nil, fmt.Errorf("public key: %w", err)
	}
	return pk, nil
}

// ParsePublicKeyBase64 is ParsePublicKey of the standard base64 form used on the wire.
func ParsePublicKeyBase64(s string) (hpke.PublicKey, error) {
	raw, err := DecodeBase64(s)
	if err != nil {
		return nil, fmt.Errorf("public key: %w", err)
	}
	return ParsePublicKey(raw)
}

// Fingerprint names a public key: "sha256:" and the first 16 hex digits of the SHA-256 of its
// uncompressed encoding.
func Fingerprint(pk hpke.PublicKey) string {
	sum := sha256.Sum256(pk.Bytes())
	return "sha256:" + hex.EncodeToString(sum[:8])
}

// SealResponse seals an unwrap answer to the caller's one-time key. The associated data is the
// SHA-256 of the exact request body, so the answer cannot be replayed to another request.
func SealResponse(to hpke.PublicKey, request, secret []byte) ([]byte, error) {
	ad := sha256.Sum256(request)
	return sealAD(to, []byte(infoResponse), ad[:], secret)
}

// OpenResponse opens what SealResponse sealed for request.
func OpenResponse(k hpke.PrivateKey, request, sealed []byte) ([]byte, error) {
	if len(sealed) < PubSize {
		return nil, fmt.Errorf("response: %w (too short)", ErrOpen)
	}
	ad := sha256.Sum256(request)
	return openAD(k, []byte(infoResponse), ad[:], sealed[:PubSize], sealed[PubSize:])
}

// sealAD is single-shot HPKE with associated data, returning enc || ciphertext.
func sealAD(to hpke.PublicKey, info, ad, plaintext []byte) ([]byte, error) {
	enc, s, err := hpke.NewSender(to, kdf, aead, info)
	if err != nil {
		return nil, fmt.Errorf("hpke sender: %w", err)
	}
	ct, err := s.Seal(ad, plaintext)
	if err != nil {
		return nil, fmt.Errorf("hpke seal: %w", err)
	}
	return append(enc, ct...), nil
}

func openAD(k hpke.PrivateKey, info, ad, enc, ct []byte) ([]byte, error) {
	r, err := hpke.NewRecipient(enc, k, kdf, aead, info)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrOpen, err)
	}
	pt, err := r.Open(ad, ct)
	if err != nil {
		return nil, ErrOpen
	}
	return pt, nil
}

// DecodeStrict decodes one JSON object into the struct v points to (v must be a pointer to a
// struct), refusing what encoding/json v1 lets through: invalid JSON, trailing data, duplicate
// keys at any depth and nesting deeper than maxDepth (internal/strictjson), unknown fields, and
// top-level keys that match a field only case-insensitively ({"NAME":…} for "name"). A missing
// field stays zero; each format checks its required fields after.
func DecodeStrict(data []byte, maxDepth int, v any) error {
	if err := strictjson.Check(data, maxDepth); err != nil {
		return err
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil || top == nil {
		return errors.New("json: want an object")
	}
	known := fieldNames(reflect.TypeOf(v).Elem())
	for k := range top {
		if !slices.Contains(known, k) {
			return fmt.Errorf("json: unknown field %q", k)
		}
	}
	return strictjson.Decode(data, maxDepth, v)
}

// DecodeBase64 reads standard padded base64 in its one canonical spelling only: the standard
// decoder skips line breaks, and a value that is signed, hashed or compared must have exactly
// one encoding.
func DecodeBase64(s string) ([]byte, error) {
	raw, err := b64.DecodeString(s)
	if err != nil || b64.EncodeToString(raw) != s {
		return nil, errors.New("not canonical standard base64")
	}
	return raw, nil
}

// EncodeBase64 is the encoding DecodeBase64 reads.
func EncodeBase64(b []byte) string { return b64.EncodeToString(b) }

func fieldNames(t reflect.Type) []string {
	var names []string
	for f := range t.Fields() {
		if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name != "" && name != "-" {
			names = append(names, name)
		}
	}
	return names
}
