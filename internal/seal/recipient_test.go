package seal

import (
	"bytes"
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"strings"
	"testing"
	"time"
)

// TestRecipientKeyRoundTrip: a recipient key written and read back opens what is sealed to its
// bundle, and the bundle reads back as a recipient, not a kms.
func TestRecipientKeyRoundTrip(t *testing.T) {
	sk, _ := GenerateKey()
	data, err := MarshalPrivateKey(sk)
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParsePrivateKey(data)
	if err != nil {
		t.Fatalf("ParsePrivateKey(MarshalPrivateKey()): %v\n%s", err, data)
	}
	b, err := NewRecipient(back.PublicKey(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := ParseBundle(b.Marshal())
	if err != nil {
		t.Fatalf("ParseBundle of a recipient: %v", err)
	}
	if !parsed.IsRecipient() || parsed.Fingerprint() != Fingerprint(sk.PublicKey()) {
		t.Errorf("recipient bundle: IsRecipient %v, fingerprint %s, want %s", parsed.IsRecipient(), parsed.Fingerprint(), Fingerprint(sk.PublicKey()))
	}
	s, err := Seal(parsed.Key(), "api-key", []byte("sk-secret"), time.Now().Add(time.Hour), nil)
	if err != nil {
		t.Fatal(err)
	}
	if pt, err := Open(back, s); err != nil || string(pt) != "sk-secret" {
		t.Errorf("Open with the parsed key = %q, %v", pt, err)
	}
	kms, _ := NewBundle(sk.PublicKey(), testPolicy, time.Now(), nil)
	if kms.IsRecipient() {
		t.Error("a kms bundle is taken for a recipient")
	}
}

func TestParsePrivateKeyRefuses(t *testing.T) {
	sk, _ := GenerateKey()
	good, _ := MarshalPrivateKey(sk)
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	der384, _ := x509.MarshalPKCS8PrivateKey(p384)
	_, edk, _ := ed25519.GenerateKey(rand.Reader)
	derEd, _ := x509.MarshalPKCS8PrivateKey(edk)
	x, _ := ecdh.X25519().GenerateKey(rand.Reader)
	derX, _ := x509.MarshalPKCS8PrivateKey(x)
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"trailing data", append(bytes.Clone(good), "junk"...)},
		{"two blocks", append(bytes.Clone(good), good...)},
		{"wrong type", bytes.Replace(good, []byte("PRIVATE KEY"), []byte("EC PRIVATE KEY"), 2)},
		{"P-384", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der384})},
		{"Ed25519", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: derEd})},
		{"X25519", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: derX})},
		{"not DER", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte("nope")})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := ParsePrivateKey(tc.data); err == nil || !strings.HasPrefix(err.Error(), "recipient key") {
				t.Errorf("ParsePrivateKey = %v, want a recipient key error", err)
			}
		})
	}
}
