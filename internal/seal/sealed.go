package seal

import (
	"crypto/ed25519"
	"crypto/hpke"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/sharness-ai/sharness/policies/keys"
	"github.com/sharness-ai/sharness/policies/pbp"
)

// SealedKind is the kind of a sealed secret file.
const SealedKind = "sharness.ai/sealed-secret/v1"

// Canonical-bytes contexts: what the AEAD authenticates and what a sender signs are different
// strings, so neither can stand in for the other.
const (
	headerContext = "sharness-ai/sealed-secret/v1 header"
	sigContext    = "sharness-ai/sealed-secret/v1 signature"
)

var fingerprintPattern = regexp.MustCompile(`^sha256:[0-9a-f]{16}$`)

// sealedFile is the JSON of a sealed secret file, exactly these keys.
type sealedFile struct {
	V       int    `json:"v"`
	Kind    string `json:"kind"`
	Name    string `json:"name"`
	To      string `json:"to"`
	Expires string `json:"expires"`
	Enc     string `json:"enc"`
	CT      string `json:"ct"`
	Sender  string `json:"sender,omitempty"`
	Sig     string `json:"sig,omitempty"`
}

// Sealed is a parsed sealed secret: well formed, and, when it names a sender, signed by it.
type Sealed struct {
	name, to string
	expires  time.Time
	enc, ct  []byte
	sender   ed25519.PublicKey // nil when unsigned
	sig      []byte
}

// Name is the secret's name (pbp.SecretName holds).
func (s *Sealed) Name() string { return s.name }

// To is the fingerprint of the identity the secret is sealed to.
func (s *Sealed) To() string { return s.to }

// Expires is when the secret stops being opened (whole seconds, UTC).
func (s *Sealed) Expires() time.Time { return s.expires }

// Sender is the key that signed the file, or nil for an unsigned file.
func (s *Sealed) Sender() ed25519.PublicKey { return s.sender }

// Seal seals secret to the identity to, under name, until expires (truncated to the second). A
// non-nil signer signs the file and names itself as its sender.
func Seal(to hpke.PublicKey, name string, secret []byte, expires time.Time, signer ed25519.PrivateKey) (*Sealed, error) {
	switch {
	case !pbp.SecretName(name):
		return nil, fmt.Errorf("seal: name %q is not a secret name (lower-case letters, digits, '.', '_', '-'; at most 64)", name)
	case len(secret) == 0 || len(secret) > MaxSecret:
		return nil, fmt.Errorf("seal: a secret has 1 to %d bytes, this one %d", MaxSecret, len(secret))
	case expires.IsZero():
		return nil, errors.New("seal: an expiry is required")
	}
	s := &Sealed{name: name, to: Fingerprint(to), expires: expires.UTC().Truncate(time.Second)}
	if signer != nil {
		s.sender = signer.Public().(ed25519.PublicKey)
	}
	out, err := sealAD(to, s.info(), s.header(), secret)
	if err != nil {
		return nil, fmt.Errorf("seal %s: %w", name, err)
	}
	s.enc, s.ct = out[:PubSize], out[PubSize:]
	if signer != nil {
		s.sig = ed25519.Sign(signer, s.signed())
	}
	return s, nil
}

// Open opens s with the identity's private key. The caller owns the result and scrubs it.
func Open(k hpke.PrivateKey, s *Sealed) ([]byte, error) {
	pt, err := openAD(k, s.info(), s.header(), s.enc, s.ct)
	if err != nil {
		return nil, fmt.Errorf("open sealed secret %s: %w", s.name, err)
	}
	return pt, nil
}

// ParseSealed reads a sealed secret file strictly and verifies its signature when it has one.
func ParseSealed(data []byte) (*Sealed, error) {
	s, err := parseSealed(data)
	if err != nil {
		return nil, fmt.Errorf("sealed secret: %w", err)
	}
	return s, nil
}

func parseSealed(data []byte) (*Sealed, error) {
	if len(data) > MaxFile {
		return nil, fmt.Errorf("%d bytes, more than %d", len(data), MaxFile)
	}
	var f sealedFile
	if err := DecodeStrict(data, maxDepth, &f); err != nil {
		return nil, err
	}
	switch {
	case f.V != 1:
		return nil, fmt.Errorf("version %d, want 1", f.V)
	case f.Kind != SealedKind:
		return nil, fmt.Errorf("kind %q, want %q", f.Kind, SealedKind)
	case !pbp.SecretName(f.Name):
		return nil, fmt.Errorf("name %q is not a secret name", f.Name)
	case !fingerprintPattern.MatchString(f.To):
		return nil, fmt.Errorf("to %q is not a fingerprint (sha256:<16 hex>)", f.To)
	}
	s := &Sealed{name: f.Name, to: f.To}
	var err error
	if s.expires, err = parseCanonicalTime(f.Expires); err != nil {
		return nil, fmt.Errorf("expires: %w", err)
	}
	if s.enc, err = DecodeBase64(f.Enc); err != nil || len(s.enc) != PubSize || s.enc[0] != 4 {
		return nil, errors.New("enc is not the base64 of an uncompressed P-256 point")
	}
	// AES-256-GCM adds a 16-byte tag to a secret of 1 to MaxSecret bytes.
	if s.ct, err = DecodeBase64(f.CT); err != nil || len(s.ct) <= 16 || len(s.ct) > MaxSecret+16 {
		return nil, fmt.Errorf("ct is not the base64 of a ciphertext of 17 to %d bytes", MaxSecret+16)
	}
	if (f.Sender == "") != (f.Sig == "") {
		return nil, errors.New("sender and sig come together or not at all")
	}
	if f.Sender == "" {
		return s, nil
	}
	if s.sender, err = keys.ParsePin(f.Sender); err != nil {
		return nil, fmt.Errorf("sender: %w", err)
	}
	if s.sig, err = DecodeBase64(f.Sig); err != nil || len(s.sig) != ed25519.SignatureSize {
		return nil, errors.New("sig is not the base64 of an Ed25519 signature")
	}
	if !ed25519.Verify(s.sender, s.signed(), s.sig) {
		return nil, errors.New("sig does not verify with the sender's key")
	}
	return s, nil
}

// Marshal writes the file: indented JSON and a final newline.
func (s *Sealed) Marshal() []byte {
	f := sealedFile{V: 1, Kind: SealedKind, Name: s.name, To: s.to, Expires: formatTime(s.expires),
		Enc: b64.EncodeToString(s.enc), CT: b64.EncodeToString(s.ct)}
	if s.sender != nil {
		f.Sender, f.Sig = keys.Pin(s.sender), b64.EncodeToString(s.sig)
	}
	out, _ := json.MarshalIndent(f, "", "  ") // a struct of strings and an int cannot fail
	return append(out, '\n')
}

// info binds the HPKE context to the name and the recipient (RFC 9180 §5.1).
func (s *Sealed) info() []byte { return canon(infoSecret, []byte(s.name), []byte(s.to)) }

// header is the associated data: every field but the ciphertext and the signature, so an
// unsigned file cannot have its expiry or sender edited either.
func (s *Sealed) header() []byte {
	return canon(headerContext, []byte("1"), []byte(SealedKind), []byte(s.name), []byte(s.to),
		[]byte(formatTime(s.expires)), []byte(s.senderPin()))
}

// signed is what the sender signs: every field of the file but the signature itself.
func (s *Sealed) signed() []byte {
	return canon(sigContext, []byte("1"), []byte(SealedKind), []byte(s.name), []byte(s.to),
		[]byte(formatTime(s.expires)), s.enc, s.ct, []byte(s.senderPin()))
}

func (s *Sealed) senderPin() string {
	if s.sender == nil {
		return ""
	}
	return keys.Pin(s.sender)
}

// canon is an unambiguous byte string: the context, then each field prefixed by its 4-byte
// big-endian length, so no two different field lists give the same bytes.
func canon(context string, fields ...[]byte) []byte {
	out := append([]byte(context), 0)
	for _, f := range fields {
		out = binary.BigEndian.AppendUint32(out, uint32(len(f)))
		out = append(out, f...)
	}
	return out
}

func formatTime(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// parseCanonicalTime accepts only the form formatTime writes (UTC, whole seconds, "Z"), so a
// time has one spelling in the canonical bytes.
func parseCanonicalTime(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil || formatTime(t) != s {
		return time.Time{}, fmt.Errorf("%q is not an RFC 3339 UTC time in whole seconds (2006-01-02T15:04:05Z)", s)
	}
	return t, nil
}
