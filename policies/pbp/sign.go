package pbp

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"strings"
)

// signContext separates policy signatures from anything else the same key might sign.
const signContext = "sharness-ai policy signature v1\n"

// Signature is the detached signature file written beside a manifest (manifest.yaml.sig).
type Signature struct {
	Format    int    `json:"pbp_signature"`
	Policy    string `json:"policy"`
	Key       string `json:"key"` // "sha256:" + hex of the public key's DER: which key signed
	Signature string `json:"signature"`
}

// KeyID names a public key by the hash of its PKIX DER encoding.
func KeyID(pub ed25519.PublicKey) string {
	der, _ := x509.MarshalPKIXPublicKey(pub)
	sum := sha256.Sum256(der)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Sign signs the policy hash M with priv.
func Sign(policyHash string, priv ed25519.PrivateKey) ([]byte, error) {
	if err := CheckHash(policyHash); err != nil {
		return nil, err
	}
	sig := Signature{
		Format:    1,
		Policy:    policyHash,
		Key:       KeyID(priv.Public().(ed25519.PublicKey)),
		Signature: base64.StdEncoding.EncodeToString(ed25519.Sign(priv, []byte(signContext+policyHash))),
	}
	out, err := json.MarshalIndent(sig, "", "  ")
	return append(out, '\n'), err
}

// VerifySignature checks that sigFile is a valid signature of policyHash by the pinned key.
func VerifySignature(policyHash string, sigFile []byte, pinned ed25519.PublicKey) error {
	var s Signature
	dec := json.NewDecoder(bytes.NewReader(sigFile))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return fmt.Errorf("signature file: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("signature file: data after the signature object")
	}
	if len(pinned) != ed25519.PublicKeySize {
		return fmt.Errorf("pinned key: %d bytes, an Ed25519 public key has %d", len(pinned), ed25519.PublicKeySize)
	}
	raw, err := base64.StdEncoding.Strict().DecodeString(s.Signature)
	switch {
	case s.Format != 1:
		return fmt.Errorf("signature file: unknown format %d", s.Format)
	case s.Policy != policyHash:
		return fmt.Errorf("signature is for policy %s, not %s", s.Policy, policyHash)
	case s.Key != KeyID(pinned):
		return fmt.Errorf("signature is by key %s, not the pinned key %s", s.Key, KeyID(pinned))
	case err != nil || len(raw) != ed25519.SignatureSize:
		return errors.New("signature file: signature is not a base64 Ed25519 signature")
	case !ed25519.Verify(pinned, []byte(signContext+policyHash), raw):
		return errors.New("signature does not verify with the pinned key")
	}
	return nil
}

// ParsePublicKey reads a PEM "PUBLIC KEY" holding an Ed25519 key.
func ParsePublicKey(data []byte) (ed25519.PublicKey, error) {
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

// ParsePrivateKey reads a PEM "PRIVATE KEY" (PKCS #8) holding an Ed25519 key.
func ParsePrivateKey(data []byte) (ed25519.PrivateKey, error) {
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

// EncodeKeys returns the PEM encodings of an Ed25519 key pair.
func EncodeKeys(priv ed25519.PrivateKey) (privPEM, pubPEM []byte, err error) {
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

// PinString writes pub in the inline pin form.
func PinString(pub ed25519.PublicKey) string {
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
