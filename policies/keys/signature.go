package keys

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
)

// hashPattern is the one spelling of a policy or layer hash.
var hashPattern = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// CheckHash reports whether s is a well-formed hash string: "sha256:" and 64 lower-case hex
// digits, as a policy hash M (what Sign signs) and a layer hash are written.
func CheckHash(s string) error {
	if !hashPattern.MatchString(s) {
		return fmt.Errorf("policy hash %q is not of the form sha256:<64 lower-case hex digits>", s)
	}
	return nil
}

// signContext separates policy signatures from anything else the same key might sign.
const signContext = "sharness-ai policy signature v1\n"

// Signature is the detached signature file written beside a manifest (manifest.yaml.sig).
type Signature struct {
	Format    int    `json:"pbp_signature"`
	Policy    string `json:"policy"`
	Key       string `json:"key"` // "sha256:" + hex of the public key's DER: which key signed
	Signature string `json:"signature"`
}

// Sign signs the policy hash M with priv.
func Sign(policyHash string, priv ed25519.PrivateKey) ([]byte, error) {
	if err := CheckHash(policyHash); err != nil {
		return nil, err
	}
	sig := Signature{
		Format:    1,
		Policy:    policyHash,
		Key:       ID(priv.Public().(ed25519.PublicKey)),
		Signature: base64.StdEncoding.EncodeToString(ed25519.Sign(priv, []byte(signContext+policyHash))),
	}
	out, err := json.MarshalIndent(sig, "", "  ")
	return append(out, '\n'), err
}

// Verify checks that sigFile is a valid signature of policyHash by the pinned key.
func Verify(policyHash string, sigFile []byte, pinned ed25519.PublicKey) error {
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
	case s.Key != ID(pinned):
		return fmt.Errorf("signature is by key %s, not the pinned key %s", s.Key, ID(pinned))
	case err != nil || len(raw) != ed25519.SignatureSize:
		return errors.New("signature file: signature is not a base64 Ed25519 signature")
	case !ed25519.Verify(pinned, []byte(signContext+policyHash), raw):
		return errors.New("signature does not verify with the pinned key")
	}
	return nil
}
