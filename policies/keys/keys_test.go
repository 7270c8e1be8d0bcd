package keys

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSignVerify(t *testing.T) {
	priv := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{1}, 32))
	other := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{2}, 32))
	pub := priv.Public().(ed25519.PublicKey)
	h := "sha256:" + strings.Repeat("9f", 32) // a well-formed M; its value is not the point
	h2 := "sha256:" + strings.Repeat("0", 64)

	good, err := Sign(h, priv)
	if err != nil {
		t.Fatal(err)
	}
	var sig Signature
	if err := json.Unmarshal(good, &sig); err != nil {
		t.Fatal(err)
	}
	edit := func(f func(m map[string]any)) []byte {
		var m map[string]any
		if err := json.Unmarshal(good, &m); err != nil {
			t.Fatal(err)
		}
		f(m)
		b, _ := json.Marshal(m)
		return b
	}
	raw, _ := base64.StdEncoding.DecodeString(sig.Signature)
	flipped := bytes.Clone(raw)
	flipped[10] ^= 0x01
	signedOther, _ := Sign(h2, priv)

	tests := []struct {
		name    string
		hash    string
		file    []byte
		key     ed25519.PublicKey
		wantErr string // "" = valid
	}{
		{"good", h, good, pub, ""},
		{"wrong key", h, good, other.Public().(ed25519.PublicKey), "not the pinned key"},
		{"signed by another key, key id edited", h, edit(func(m map[string]any) { m["key"] = ID(pub) }), pub, ""},
		{"tampered hash", h2, good, pub, "signature is for policy"},
		{"signature of another policy relabelled", h, edit(func(m map[string]any) {
			var s Signature
			_ = json.Unmarshal(signedOther, &s)
			m["signature"] = s.Signature
		}), pub, "does not verify"},
		{"tampered signature bytes", h, edit(func(m map[string]any) { m["signature"] = base64.StdEncoding.EncodeToString(flipped) }), pub, "does not verify"},
		{"truncated signature", h, edit(func(m map[string]any) { m["signature"] = base64.StdEncoding.EncodeToString(raw[:63]) }), pub, "not a base64 Ed25519 signature"},
		{"signature not base64", h, edit(func(m map[string]any) { m["signature"] = "!!" + sig.Signature[2:] }), pub, "not a base64 Ed25519 signature"},
		{"unknown field", h, edit(func(m map[string]any) { m["comment"] = "hi" }), pub, "unknown field"},
		{"wrong format", h, edit(func(m map[string]any) { m["pbp_signature"] = 2 }), pub, "unknown format 2"},
		{"missing format", h, edit(func(m map[string]any) { delete(m, "pbp_signature") }), pub, "unknown format 0"},
		{"format as string", h, edit(func(m map[string]any) { m["pbp_signature"] = "1" }), pub, "signature file"},
		{"not JSON", h, []byte("pbp_signature: 1\n"), pub, "signature file"},
		{"empty", h, nil, pub, "signature file"},
		{"trailing data after the object", h, append(bytes.Clone(good), []byte(`{"pbp_signature": 1}`)...), pub, "signature file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "signed by another key, key id edited" {
				// Signed by other, relabelled as the pinned key: the Ed25519 check must catch it.
				s, _ := Sign(h, other)
				var m map[string]any
				_ = json.Unmarshal(s, &m)
				m["key"] = ID(pub)
				tc.file, _ = json.Marshal(m)
				tc.wantErr = "does not verify"
			}
			err := Verify(tc.hash, tc.file, tc.key)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("Verify = %v, want success", err)
			case tc.wantErr != "" && err == nil:
				t.Errorf("Verify succeeded, want an error containing %q", tc.wantErr)
			case tc.wantErr != "" && !strings.Contains(err.Error(), tc.wantErr):
				t.Errorf("Verify = %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}

	t.Run("sign refuses a malformed hash", func(t *testing.T) {
		for _, bad := range []string{"", "sha256:ABC", strings.ToUpper(h), h + "0", "md5:" + h[7:]} {
			if _, err := Sign(bad, priv); err == nil {
				t.Errorf("Sign(%q) succeeded", bad)
			}
		}
	})

	t.Run("signature file fields", func(t *testing.T) {
		want := Signature{Format: 1, Policy: h, Key: ID(pub), Signature: sig.Signature}
		if d := cmp.Diff(want, sig); d != "" {
			t.Errorf("(-want +got):\n%s", d)
		}
		if !ed25519.Verify(pub, []byte(signContext+h), raw) {
			t.Error("the signature is not over the context and the hash")
		}
		if ed25519.Verify(pub, []byte(h), raw) {
			t.Error("the signature verifies without the context string")
		}
	})

	t.Run("keys round-trip through PEM", func(t *testing.T) {
		privPEM, pubPEM, err := Encode(priv)
		if err != nil {
			t.Fatal(err)
		}
		p2, err := ParsePrivate(privPEM)
		if err != nil || !p2.Equal(priv) {
			t.Fatalf("ParsePrivate = %v, %v", p2, err)
		}
		k2, err := ParsePublic(pubPEM)
		if err != nil || !k2.Equal(pub) {
			t.Fatalf("ParsePublic = %v, %v", k2, err)
		}
		if _, err := ParsePublic(privPEM); err == nil {
			t.Error("ParsePublic accepted a private key")
		}
		if _, err := ParsePrivate(pubPEM); err == nil {
			t.Error("ParsePrivate accepted a public key")
		}
	})

	t.Run("a malformed pinned key is an error, not a panic", func(t *testing.T) {
		for _, k := range []ed25519.PublicKey{nil, pub[:16]} {
			file := edit(func(m map[string]any) { m["key"] = ID(k) })
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Errorf("Verify with a %d-byte pinned key panicked: %v", len(k), r)
					}
				}()
				if err := Verify(h, file, k); err == nil {
					t.Errorf("Verify with a %d-byte pinned key succeeded", len(k))
				}
			}()
		}
	})
}

func TestCheckHash(t *testing.T) {
	good := "sha256:" + strings.Repeat("0a", 32)
	for s, want := range map[string]bool{
		good: true, "sha256:" + strings.Repeat("f", 64): true,
		"": false, "sha256:": false, strings.ToUpper(good): false, "sha256:" + strings.Repeat("0A", 32): false,
		good + "0": false, good[:len(good)-1]: false, "md5:" + good[7:]: false, good[7:]: false,
		" " + good: false, good + "\n": false, "sha256:" + strings.Repeat("g", 64): false,
	} {
		if err := CheckHash(s); (err == nil) != want {
			t.Errorf("CheckHash(%q) = %v, want ok %v", s, err, want)
		}
	}
}

func TestPin(t *testing.T) {
	pub := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{3}, 32)).Public().(ed25519.PublicKey)
	pin := Pin(pub)
	if got, err := ParsePin(pin); err != nil || !got.Equal(pub) {
		t.Fatalf("ParsePin(Pin(pub)) = %v, %v; want pub", got, err)
	}
	b64 := strings.TrimPrefix(pin, "ed25519:")
	for _, bad := range []string{"", b64, "ed25519:", "ed25519:" + b64[:len(b64)-4], "ed25519:" + b64 + "AAAA",
		"ED25519:" + b64, "ed25519:" + strings.TrimRight(b64, "="), "ed25519: " + b64, "sha256:" + b64} {
		if _, err := ParsePin(bad); err == nil {
			t.Errorf("ParsePin(%q) succeeded", bad)
		}
	}
}

// FuzzVerify: a signature file is untrusted bytes. Verify must never panic, and must accept only
// a file whose signature the pinned key made over the context and this hash.
func FuzzVerify(f *testing.F) {
	priv := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{1}, 32))
	pub := priv.Public().(ed25519.PublicKey)
	h := "sha256:" + strings.Repeat("9f", 32)
	good, err := Sign(h, priv)
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range [][]byte{good, nil, []byte("{}"), []byte(`{"pbp_signature": 1}`), append(bytes.Clone(good), '{')} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if Verify(h, data, pub) != nil {
			return
		}
		var s Signature
		if err := json.Unmarshal(data, &s); err != nil {
			t.Fatalf("accepted a file that does not decode: %v", err)
		}
		raw, err := base64.StdEncoding.DecodeString(s.Signature)
		if err != nil || !ed25519.Verify(pub, []byte(signContext+h), raw) {
			t.Fatalf("accepted a signature the pinned key did not make: %q", data)
		}
	})
}
