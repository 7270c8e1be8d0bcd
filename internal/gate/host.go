package gate

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/sharness-ai/sharness/policies/keys"
)

// Errors of Decide, for errors.Is.
var (
	ErrUnknown = errors.New("no such pending request")
	ErrExpired = errors.New("request expired")
	ErrDecided = errors.New("request already decided")
)

// Decide writes the operator's decision on request id of the gate directory dir as
// <dir>/decisions/<id>.json, signed with key and usable for ttl (0 is DefaultTTL). scope is
// ScopeOnce or ScopeSession, which a request of tier every refuses; a deny is always once. It
// returns the request decided.
func Decide(dir, id string, d Decision, key ed25519.PrivateKey, scope Scope, ttl time.Duration) (Request, error) {
	ttl = orDefault(ttl, DefaultTTL)
	if d == Deny {
		scope = ScopeOnce
	}
	switch {
	case d != Approve && d != Deny || scope != ScopeOnce && scope != ScopeSession:
		return Request{}, fmt.Errorf("decision %q, scope %q: want approve or deny, once or session", d, scope)
	case ttl > MaxTTL:
		return Request{}, fmt.Errorf("an approval may last at most %s, not %s", MaxTTL, ttl)
	case len(key) != ed25519.PrivateKeySize:
		return Request{}, errors.New("no operator key")
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return Request{}, fmt.Errorf("open gate directory: %w", err)
	}
	defer root.Close()
	r, err := readRequest(root, id)
	now := time.Now().UTC().Truncate(time.Second)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return Request{}, fmt.Errorf("%w %q in %s", ErrUnknown, id, dir)
	case err != nil:
		return Request{}, err
	case !now.Before(r.Expires):
		return r, fmt.Errorf("%s: %w at %s (the component stopped waiting)", id, ErrExpired, r.Expires.Format(time.RFC3339))
	case scope == ScopeSession && r.Tier != Once:
		return r, fmt.Errorf("%s: %s needs an approval every time (tier %s): a session approval is refused", id, r.Action, r.Tier)
	}
	token, err := sign(claims{V: 1, ID: r.ID, Component: r.Component, Action: r.Action, Digest: r.Digest, Policy: r.Policy,
		Decision: d, Tier: scope, IssuedAt: now, NotAfter: now.Add(ttl), Nonce: rand.Text()}, key)
	if err != nil {
		return r, err
	}
	if err := writeFile(root, decisionFile(id), token, 0o644, true); errors.Is(err, fs.ErrExist) {
		return r, fmt.Errorf("%s: %w", id, ErrDecided)
	} else if err != nil {
		return r, fmt.Errorf("write decision: %w", err)
	}
	return r, nil
}

// GenerateOperatorKey makes an operator key and writes it to path (PEM, PKCS #8, mode 0600),
// refusing to overwrite a file. It returns the public key to give the components.
func GenerateOperatorKey(path string) (ed25519.PublicKey, error) {
	pub, priv, _ := ed25519.GenerateKey(nil) // crypto/rand; it cannot fail
	data, _, err := keys.Encode(priv)
	if err == nil {
		err = os.MkdirAll(filepath.Dir(path), 0o700)
	}
	var root *os.Root
	if err == nil {
		root, err = os.OpenRoot(filepath.Dir(path))
	}
	if err != nil {
		return nil, fmt.Errorf("operator key: %w", err)
	}
	defer root.Close()
	if err := writeFile(root, filepath.Base(path), data, 0o600, true); errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("operator key %s: %w: refusing to overwrite it", path, fs.ErrExist)
	} else if err != nil {
		return nil, fmt.Errorf("operator key: %w", err)
	}
	return pub, nil
}

// ReadOperatorKey reads the operator key at path, refusing a file that others than its owner may
// read or write: the key is what approves.
func ReadOperatorKey(path string) (ed25519.PrivateKey, error) {
	if st, err := os.Stat(path); err == nil && st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("operator key %s: mode %04o gives others access; chmod 600 it", path, st.Mode().Perm())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("operator key: %w", err)
	}
	key, err := keys.ParsePrivate(data)
	if err != nil {
		return nil, fmt.Errorf("operator key %s: %w", path, err)
	}
	return key, nil
}

// ParsePublicKey reads the operator public key as a component receives it, from a file or the
// environment: PEM ("PUBLIC KEY") or "ed25519:<base64>" (FormatPublicKey).
func ParsePublicKey(data []byte) (ed25519.PublicKey, error) {
	if s := bytes.TrimSpace(data); bytes.HasPrefix(s, []byte("ed25519:")) {
		return keys.ParsePin(string(s))
	}
	return keys.ParsePublic(data)
}

// FormatPublicKey writes pub as "ed25519:<base64>", short enough for an environment variable.
func FormatPublicKey(pub ed25519.PublicKey) string { return keys.Pin(pub) }
