package seal

import (
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hpke"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
	"time"
)

// NoSession is the policy hash of a person's recipient bundle (NewRecipient): all zeros, the
// hash of no policy. A recipient is an identity outside every session, made on a host by
// `sharness-ai recipient init` so that kms can re-seal secrets to it for an export
// (docs/exit.md). The bundle format is kms's own, so kms's seal_to accepts it as a recipient and
// `secret seal --to` seals to it; the zero hash keeps it from being taken for a kms.
const NoSession = "sha256:0000000000000000000000000000000000000000000000000000000000000000"

// NewRecipient describes a person's recipient key pk as a bundle of no session.
func NewRecipient(pk hpke.PublicKey, created time.Time) (*Bundle, error) {
	return NewBundle(pk, NoSession, created, map[string]string{})
}

// IsRecipient reports whether b is a person's recipient bundle rather than a kms's.
func (b *Bundle) IsRecipient() bool { return b.policyHash == NoSession }

// privatePEM is the PEM type of a recipient key: PKCS #8, which openssl reads too.
const privatePEM = "PRIVATE KEY"

// MarshalPrivateKey writes the P-256 KEM private key k as PEM (PKCS #8). The caller owns the
// result and scrubs it; the copies crypto/x509 makes on the way cannot be scrubbed.
func MarshalPrivateKey(k hpke.PrivateKey) ([]byte, error) {
	scalar, err := k.Bytes()
	if err != nil {
		return nil, fmt.Errorf("recipient key: %w", err)
	}
	defer clear(scalar)
	ek, err := ecdh.P256().NewPrivateKey(scalar)
	if err != nil {
		return nil, fmt.Errorf("recipient key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(ek)
	if err != nil {
		return nil, fmt.Errorf("recipient key: %w", err)
	}
	defer clear(der)
	return pem.EncodeToMemory(&pem.Block{Type: privatePEM, Bytes: der}), nil
}

// ParsePrivateKey reads what MarshalPrivateKey wrote: exactly one PEM block holding a P-256
// key in PKCS #8, and nothing else.
func ParsePrivateKey(data []byte) (hpke.PrivateKey, error) {
	block, rest := pem.Decode(data)
	if block == nil || block.Type != privatePEM || strings.TrimSpace(string(rest)) != "" {
		return nil, errors.New("recipient key: want exactly one PEM \"PRIVATE KEY\" block")
	}
	defer clear(block.Bytes)
	key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("recipient key: %w", err)
	}
	ek, ok := key.(*ecdsa.PrivateKey)
	if !ok || ek.Curve != elliptic.P256() {
		return nil, errors.New("recipient key: not a P-256 key")
	}
	dh, err := ek.ECDH()
	if err != nil {
		return nil, fmt.Errorf("recipient key: %w", err)
	}
	scalar := dh.Bytes()
	defer clear(scalar)
	return NewPrivateKey(scalar)
}
