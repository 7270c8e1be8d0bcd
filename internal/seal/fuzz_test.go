package seal

import (
	"bytes"
	"testing"

	"github.com/sharness-ai/sharness/policies/keys"
	"github.com/sharness-ai/sharness/policies/pbp"
)

// FuzzParseSealed: whatever it accepts is well formed and reads back to the same bytes.
func FuzzParseSealed(f *testing.F) {
	f.Add(fileWith(f, false, func(map[string]any) {}))
	f.Add(fileWith(f, true, func(map[string]any) {}))
	for _, tc := range invalidSealed(f) {
		f.Add(tc.data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseSealed(data)
		if err != nil {
			if s != nil {
				t.Fatal("refused but returned a file")
			}
			return
		}
		if !pbp.SecretName(s.Name()) || !fingerprintPattern.MatchString(s.To()) || len(s.enc) != PubSize {
			t.Fatalf("accepted a malformed file: %+v", s)
		}
		again, err := ParseSealed(s.Marshal())
		if err != nil || !bytes.Equal(again.Marshal(), s.Marshal()) {
			t.Fatalf("Marshal of an accepted file does not read back: %v", err)
		}
	})
}

// FuzzParseBundle: whatever it accepts has its own key's fingerprint and reads back the same.
func FuzzParseBundle(f *testing.F) {
	f.Add(bundleWith(f, func(map[string]any) {}))
	for _, tc := range invalidBundles(f) {
		f.Add(tc.data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := ParseBundle(data)
		if err != nil {
			return
		}
		if keys.CheckHash(b.PolicyHash()) != nil || b.Fingerprint() != Fingerprint(b.Key()) {
			t.Fatalf("accepted a malformed bundle: %s", data)
		}
		again, err := ParseBundle(b.Marshal())
		if err != nil || !bytes.Equal(again.Marshal(), b.Marshal()) {
			t.Fatalf("Marshal of an accepted bundle does not read back: %v", err)
		}
	})
}

// FuzzOpenResponse: no input panics, and only the sealed answer to this request opens.
func FuzzOpenResponse(f *testing.F) {
	sk, _ := GenerateKey()
	req := []byte(`{"v":1}`)
	good, _ := SealResponse(sk.PublicKey(), req, []byte("secret"))
	f.Add(req, good)
	f.Add([]byte{}, []byte{4})
	f.Fuzz(func(t *testing.T, request, sealed []byte) {
		pt, err := OpenResponse(sk, request, sealed)
		if err == nil && (!bytes.Equal(request, req) || string(pt) != "secret") {
			t.Fatalf("opened a forged response: %q", pt)
		}
	})
}
