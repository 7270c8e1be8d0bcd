// Package keys holds the operator's Ed25519 keys in the spellings SHarness reads and writes (PEM
// files, the inline pin "ed25519:<base64>", the key id "sha256:<hex>") and the detached signature
// over a policy hash M that a pinned key must verify before a session starts. It also holds the
// one spelling of M, which is what is signed. It knows nothing of manifests: packages that only
// check keys, pins or signatures (the gate, sealed files, kms, the session) import it instead of
// the whole policy model.
//
// What it does not guarantee: that a pinned key is the right one (the person pins it), nor
// anything about a key's custody; a signature says a key signed M, not that M is a good policy.
package keys

import (
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
)

// ID names a public key by the hash of its PKIX DER encoding.
func ID(pub ed25519.PublicKey) string {
	der, _ := x509.MarshalPKIXPublicKey(pub)
	sum := sha256.Sum256(der)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// ParsePublic reads a PEM "PUBLIC KEY" holding an Ed25519 key.
func ParsePublic(data []byte) (ed25519.PublicKey, error) {
	b, _ := pem.Decode(data)
	if b == nil || b.Type != "PUBLIC KEY" {
		return nil, errors.New("public key: not a PEM PUBLIC KEY block")
	}
	k, err := x509.ParsePKIXPublicKey(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("public key: %w", err)
	}
	pub, ok := k.(ed25519.PublicKey)
	if !ok {
		return nil, fmt.Errorf("public key: %T is not an Ed25519 key", k)
	}
	return pub, nil
}

// ParsePrivate reads a PEM "PRIVATE KEY" (PKCS #8) holding an Ed25519 key.
func ParsePrivate(data []byte) (ed25519.PrivateKey, error) {
	b, _ := pem.Decode(data)
	if b == nil || b.Type != "PRIVATE KEY" {
		return nil, errors.New("private key: not a PEM PRIVATE KEY block")
	}
	k, err := x509.ParsePKCS8PrivateKey(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("private key: %w", err)
	}
	priv, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("private key: %T is not an Ed25519 key", k)
	}
	return priv, nil
}

// Encode returns the PEM encodings of an Ed25519 key pair.
func Encode(priv ed25519.PrivateKey) (privPEM, pubPEM []byte, err error) {
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, nil, err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(priv.Public())
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), nil
}

// pinPrefix marks a pinned key written inline: "ed25519:" and the standard base64 of the 32-byte
// public key, short enough for an environment variable or an instruction line.
const pinPrefix = "ed25519:"

// Pin writes pub in the inline pin form.
func Pin(pub ed25519.PublicKey) string {
	return pinPrefix + base64.StdEncoding.EncodeToString(pub)
}

// ParsePin reads a key in the inline pin form.
func ParsePin(s string) (ed25519.PublicKey, error) {
	b64, ok := strings.CutPrefix(s, pinPrefix)
	raw, err := base64.StdEncoding.Strict().DecodeString(b64)
	if !ok || err != nil || len(raw) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("pinned key %q is not of the form %s<base64 of the 32-byte public key> (sharness-ai keygen prints it)", s, pinPrefix)
	}
	return ed25519.PublicKey(raw), nil
}
