package seal

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const testPolicy = "sha256:0000000000000000000000000000000000000000000000000000000000000001"

var expiry = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

func TestSealOpenRoundTrip(t *testing.T) {
	sk, _ := GenerateKey()
	_, signer, _ := ed25519.GenerateKey(rand.Reader)
	for _, tc := range []struct {
		name   string
		signer ed25519.PrivateKey
	}{{"unsigned", nil}, {"signed", signer}} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Seal(sk.PublicKey(), "api-key", []byte("sk-ant-secret"), expiry.Add(999*time.Millisecond), tc.signer)
			if err != nil {
				t.Fatal(err)
			}
			parsed, err := ParseSealed(s.Marshal())
			if err != nil {
				t.Fatalf("ParseSealed(Marshal()): %v\n%s", err, s.Marshal())
			}
			if got, want := string(parsed.Marshal()), string(s.Marshal()); got != want {
				t.Errorf("Marshal after ParseSealed differs:\n%s", cmp.Diff(want, got))
			}
			if parsed.Name() != "api-key" || parsed.To() != Fingerprint(sk.PublicKey()) || !parsed.Expires().Equal(expiry) {
				t.Errorf("parsed %s %s %s", parsed.Name(), parsed.To(), parsed.Expires())
			}
			if tc.signer != nil && !parsed.Sender().Equal(tc.signer.Public()) || tc.signer == nil && parsed.Sender() != nil {
				t.Errorf("Sender() = %v", parsed.Sender())
			}
			pt, err := Open(sk, parsed)
			if err != nil || string(pt) != "sk-ant-secret" {
				t.Fatalf("Open = %q, %v", pt, err)
			}
			other, _ := GenerateKey()
			if _, err := Open(other, parsed); !errors.Is(err, ErrOpen) {
				t.Errorf("Open with another key: %v, want ErrOpen", err)
			}
		})
	}
}

func TestSealRefuses(t *testing.T) {
	sk, _ := GenerateKey()
	for _, tc := range []struct {
		name, secretName string
		secret           []byte
		expires          time.Time
		want             string
	}{
		{"bad name", "API_KEY", []byte("x"), expiry, "not a secret name"},
		{"empty", "k", nil, expiry, "1 to 8192 bytes"},
		{"too long", "k", bytes.Repeat([]byte("x"), MaxSecret+1), expiry, "1 to 8192 bytes"},
		{"no expiry", "k", []byte("x"), time.Time{}, "expiry is required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Seal(sk.PublicKey(), tc.secretName, tc.secret, tc.expires, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Seal: %v, want %q", err, tc.want)
			}
		})
	}
	if _, err := Seal(sk.PublicKey(), "k", bytes.Repeat([]byte("x"), MaxSecret), expiry, nil); err != nil {
		t.Errorf("Seal of a secret of MaxSecret bytes: %v", err)
	}
}

// fileWith returns a valid sealed file as a map, edited by edit, re-encoded.
func fileWith(t testing.TB, signed bool, edit func(map[string]any)) []byte {
	t.Helper()
	sk, _ := GenerateKey()
	var signer ed25519.PrivateKey
	if signed {
		_, signer, _ = ed25519.GenerateKey(rand.Reader)
	}
	s, err := Seal(sk.PublicKey(), "api-key", []byte("v"), expiry, signer)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	json.Unmarshal(s.Marshal(), &m)
	edit(m)
	out, _ := json.Marshal(m)
	return out
}

// invalidSealed lists one file per rejection rule of ParseSealed.
func invalidSealed(t testing.TB) []struct {
	name, want string
	data       []byte
} {
	set := func(k string, v any) func(map[string]any) { return func(m map[string]any) { m[k] = v } }
	del := func(k string) func(map[string]any) { return func(m map[string]any) { delete(m, k) } }
	valid := string(fileWith(t, false, func(map[string]any) {}))
	return []struct {
		name, want string
		data       []byte
	}{
		{"not json", "json", []byte("{")},
		{"array", "json", []byte("[]")},
		{"trailing data", "json", []byte(valid + "{}")},
		{"duplicate key", "json", []byte(strings.Replace(valid, `"v":1`, `"v":1,"v":1`, 1))},
		{"case-variant duplicate", "json", []byte(strings.Replace(valid, `"v":1`, `"v":1,"V":1`, 1))},
		{"case-variant key alone", "unknown field \"NAME\"", []byte(strings.Replace(valid, `"name"`, `"NAME"`, 1))},
		{"unknown key", "unknown field", fileWith(t, false, set("note", "x"))},
		{"too large", "more than 16384", []byte(valid[:len(valid)-1] + `,"x":"` + strings.Repeat("a", MaxFile) + `"}`)},
		{"version", "version 2", fileWith(t, false, set("v", 2))},
		{"no version", "version 0", fileWith(t, false, del("v"))},
		{"kind", "kind", fileWith(t, false, set("kind", "sharness.ai/kms-bundle/v1"))},
		{"name", "not a secret name", fileWith(t, false, set("name", "../etc/passwd"))},
		{"to", "not a fingerprint", fileWith(t, false, set("to", "sha256:ABC"))},
		{"no expiry", "expires", fileWith(t, false, del("expires"))},
		{"expiry with offset", "expires", fileWith(t, false, set("expires", "2030-01-02T04:04:05+01:00"))},
		{"expiry fractional", "expires", fileWith(t, false, set("expires", "2030-01-02T03:04:05.5Z"))},
		{"enc short", "enc", fileWith(t, false, set("enc", "BAAA"))},
		{"enc unpadded", "enc", fileWith(t, false, func(m map[string]any) { m["enc"] = strings.TrimRight(m["enc"].(string), "=") + "A" })},
		{"ct empty", "ct", fileWith(t, false, set("ct", ""))},
		{"ct tag only", "ct", fileWith(t, false, set("ct", b64.EncodeToString(make([]byte, 16))))},
		{"ct newline", "ct", fileWith(t, false, func(m map[string]any) { m["ct"] = m["ct"].(string) + "\n" })},
		{"sender without sig", "together", fileWith(t, true, del("sig"))},
		{"sig without sender", "together", fileWith(t, true, del("sender"))},
		{"bad sender", "sender", fileWith(t, true, set("sender", "ed25519:AAAA"))},
		{"bad sig", "sig is not", fileWith(t, true, set("sig", "AAAA"))},
		{"wrong sig", "does not verify", fileWith(t, true, set("sig", b64.EncodeToString(make([]byte, 64))))},
		{"signed field edited", "does not verify", fileWith(t, true, set("expires", "2031-01-02T03:04:05Z"))},
	}
}

func TestParseSealedRefuses(t *testing.T) {
	for _, tc := range invalidSealed(t) {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseSealed(tc.data)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "sealed secret: ") {
				t.Errorf("ParseSealed: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestUnsignedFieldsBound: editing the expiry, name, recipient or sender of a file (unsigned, so
// the parser cannot tell) makes it unopenable, and so does swapping in another file's ciphertext.
func TestUnsignedFieldsBound(t *testing.T) {
	sk, _ := GenerateKey()
	s, _ := Seal(sk.PublicKey(), "api-key", []byte("v"), expiry, nil)
	other, _ := Seal(sk.PublicKey(), "other", []byte("w"), expiry, nil)
	_, signer, _ := ed25519.GenerateKey(rand.Reader)
	edits := map[string]func(*Sealed){
		"expires": func(c *Sealed) { c.expires = c.expires.Add(time.Hour) },
		"name":    func(c *Sealed) { c.name = "other" },
		"to":      func(c *Sealed) { c.to = "sha256:0123456789abcdef" },
		"sender":  func(c *Sealed) { c.sender = signer.Public().(ed25519.PublicKey) },
		"ct":      func(c *Sealed) { c.enc, c.ct = other.enc, other.ct },
	}
	for name, edit := range edits {
		t.Run(name, func(t *testing.T) {
			c := *s
			edit(&c)
			if _, err := Open(sk, &c); !errors.Is(err, ErrOpen) {
				t.Errorf("Open after editing %s: %v, want ErrOpen", name, err)
			}
		})
	}
}

func TestResponse(t *testing.T) {
	sk, _ := GenerateKey()
	req := []byte(`{"v":1,"name":"api-key"}`)
	sealed, err := SealResponse(sk.PublicKey(), req, []byte("secret"))
	if err != nil {
		t.Fatal(err)
	}
	if pt, err := OpenResponse(sk, req, sealed); err != nil || string(pt) != "secret" {
		t.Fatalf("OpenResponse = %q, %v", pt, err)
	}
	for name, tc := range map[string]struct{ req, sealed []byte }{
		"another request": {[]byte(`{"v":1,"name":"api-key" }`), sealed},
		"truncated":       {req, sealed[:PubSize]},
		"short":           {req, sealed[:10]},
		"flipped":         {req, append(append([]byte{}, sealed[:len(sealed)-1]...), sealed[len(sealed)-1]^1)},
	} {
		if _, err := OpenResponse(sk, tc.req, tc.sealed); !errors.Is(err, ErrOpen) {
			t.Errorf("%s: %v, want ErrOpen", name, err)
		}
	}
	// A response is no sealed secret: the info strings differ.
	s := &Sealed{name: "api-key", to: Fingerprint(sk.PublicKey()), expires: expiry, enc: sealed[:PubSize], ct: sealed[PubSize:]}
	if _, err := Open(sk, s); !errors.Is(err, ErrOpen) {
		t.Errorf("a response opened as a sealed secret: %v", err)
	}
}

func TestPrivateKeyBytesRoundTrip(t *testing.T) {
	sk, _ := GenerateKey()
	raw, err := sk.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	back, err := NewPrivateKey(raw)
	if err != nil || !bytes.Equal(back.PublicKey().Bytes(), sk.PublicKey().Bytes()) {
		t.Fatalf("NewPrivateKey: %v", err)
	}
	if _, err := NewPrivateKey(make([]byte, 32)); err == nil {
		t.Error("NewPrivateKey(zero scalar): want an error")
	}
	if _, err := ParsePublicKey(make([]byte, PubSize)); err == nil {
		t.Error("ParsePublicKey(zeros): want an error")
	}
	if fp := Fingerprint(sk.PublicKey()); !fingerprintPattern.MatchString(fp) {
		t.Errorf("Fingerprint = %q", fp)
	}
}

func bundleWith(t testing.TB, edit func(map[string]any)) []byte {
	t.Helper()
	sk, _ := GenerateKey()
	b, err := NewBundle(sk.PublicKey(), testPolicy, expiry, map[string]string{"mlockall": "ok", "memfd_secret": "degraded: ENOSYS"})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	json.Unmarshal(b.Marshal(), &m)
	edit(m)
	out, _ := json.Marshal(m)
	return out
}

func invalidBundles(t testing.TB) []struct {
	name, want string
	data       []byte
} {
	set := func(k string, v any) func(map[string]any) { return func(m map[string]any) { m[k] = v } }
	other, _ := GenerateKey()
	valid := string(bundleWith(t, func(map[string]any) {}))
	return []struct {
		name, want string
		data       []byte
	}{
		{"not json", "json", []byte("nope")},
		{"duplicate nested key", "json", []byte(strings.Replace(valid, `"mlockall":"ok"`, `"mlockall":"ok","mlockall":"no"`, 1))},
		{"case-variant key", "unknown field", []byte(strings.Replace(valid, `"kem_pub"`, `"KEM_PUB"`, 1))},
		{"unknown key", "unknown field", bundleWith(t, set("private", "x"))},
		{"version", "version", bundleWith(t, set("v", 0))},
		{"kind", "kind", bundleWith(t, set("kind", SealedKind))},
		{"policy hash", "policy hash", bundleWith(t, set("policy_hash", "sha256:00"))},
		{"kem_pub", "kem_pub", bundleWith(t, set("kem_pub", "AAAA"))},
		{"kem_pub off curve", "kem_pub", bundleWith(t, set("kem_pub", b64.EncodeToString(append([]byte{4}, make([]byte, 64)...))))},
		{"fingerprint", "not the key's", bundleWith(t, set("fingerprint", Fingerprint(other.PublicKey())))},
		{"created", "created", bundleWith(t, set("created", "yesterday"))},
		{"hygiene key", "hygiene entry", bundleWith(t, set("hygiene", map[string]any{"Bad Key": "ok"}))},
		{"hygiene value", "json", bundleWith(t, set("hygiene", map[string]any{"mlock": 1}))},
	}
}

func TestBundle(t *testing.T) {
	sk, _ := GenerateKey()
	orig, err := NewBundle(sk.PublicKey(), testPolicy, expiry, map[string]string{"mlockall": "ok", "memfd_secret": "degraded: ENOSYS"})
	if err != nil {
		t.Fatal(err)
	}
	data := orig.Marshal()
	b, err := ParseBundle(data)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b.Marshal(), data) {
		t.Errorf("Marshal after ParseBundle:\n%s\nwant\n%s", b.Marshal(), data)
	}
	if bytes.ContainsRune(b.Marshal(), '\n') {
		t.Error("a bundle must be one line")
	}
	want := map[string]string{"mlockall": "ok", "memfd_secret": "degraded: ENOSYS"}
	if diff := cmp.Diff(want, b.Hygiene()); diff != "" || b.PolicyHash() != testPolicy || !b.Created().Equal(expiry) {
		t.Errorf("parsed bundle: %s %s %s", diff, b.PolicyHash(), b.Created())
	}
	if _, err := NewBundle(b.Key(), "not a hash", expiry, nil); err == nil {
		t.Error("NewBundle with a bad policy hash: want an error")
	}
	for _, tc := range invalidBundles(t) {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseBundle(tc.data)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ParseBundle: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestDecodeStrict(t *testing.T) {
	type msg struct {
		Name string `json:"name"`
		N    int    `json:"n,omitempty"`
		Skip string `json:"-"`
	}
	for _, tc := range []struct {
		in   string
		want *msg
	}{
		{`{"name":"a","n":2}`, &msg{Name: "a", N: 2}},
		{`{}`, &msg{}},
		{`{"Name":"a"}`, nil},
		{`{"name":"a","NAME":"b"}`, nil},
		{`{"Skip":"a"}`, nil},
		{`{"name":"a"} {}`, nil},
		{`[1]`, nil},
		{`null`, nil},
	} {
		var got msg
		err := DecodeStrict([]byte(tc.in), 4, &got)
		if tc.want == nil {
			if err == nil {
				t.Errorf("DecodeStrict(%s) = %+v, want an error", tc.in, got)
			}
			continue
		}
		if err != nil || got != *tc.want {
			t.Errorf("DecodeStrict(%s) = %+v, %v; want %+v", tc.in, got, err, *tc.want)
		}
	}
}
