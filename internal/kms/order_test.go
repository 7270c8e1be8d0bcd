package kms

import (
	"crypto/ed25519"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sharness-ai/sharness/internal/seal"
	"github.com/sharness-ai/sharness/policies/pbp"
)

func recipient(t testing.TB) *seal.Bundle {
	t.Helper()
	sk, _ := seal.GenerateKey()
	b, err := seal.NewRecipient(sk.PublicKey(), time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// orderArgs are seal_to order args with fields replaced: a nil value removes the field.
func orderArgs(t testing.TB, edit map[string]any) string {
	m := map[string]any{"v": 1, "secrets": []string{"api-key"}, "all": false, "recipient": json.RawMessage(recipient(t).Marshal())}
	for k, v := range edit {
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
	}
	out, _ := json.Marshal(m)
	return string(out)
}

func TestParseSealToOrder(t *testing.T) {
	to := recipient(t)
	for _, o := range []SealToOrder{{Names: []string{"api-key", "db"}, Recipient: to}, {All: true, Recipient: to}} {
		got, err := ParseSealToOrder(o.Args())
		if err != nil || !slices.Equal(got.Names, o.Names) || got.All != o.All || got.Recipient.Fingerprint() != to.Fingerprint() {
			t.Errorf("ParseSealToOrder(%s) = %+v, %v", o.Args(), got, err)
		}
	}
	many := make([]string, MaxOrderSecrets+1)
	for i := range many {
		many[i] = "s" + strings.Repeat("x", i%60) + string(rune('a'+i%26)) + string(rune('a'+i/26%26))
	}
	for _, tc := range []struct{ name, args string }{
		{"neither names nor all", orderArgs(t, map[string]any{"secrets": []string{}})},
		{"both names and all", orderArgs(t, map[string]any{"all": true})},
		{"names missing and all false", orderArgs(t, map[string]any{"secrets": nil})},
		{"a name twice", orderArgs(t, map[string]any{"secrets": []string{"a", "a"}})},
		{"not a secret name", orderArgs(t, map[string]any{"secrets": []string{"../etc/passwd"}})},
		{"too many", orderArgs(t, map[string]any{"secrets": many})},
		{"version 2", orderArgs(t, map[string]any{"v": 2})},
		{"unknown field", orderArgs(t, map[string]any{"expires": "2030-01-01T00:00:00Z"})},
		{"no recipient", orderArgs(t, map[string]any{"recipient": nil})},
		{"recipient not a bundle", orderArgs(t, map[string]any{"recipient": map[string]any{"v": 1}})},
		{"duplicate key", strings.Replace(orderArgs(t, nil), `"v":1`, `"v":1,"v":1`, 1)},
		{"not json", "seal everything"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := ParseSealToOrder(tc.args); err == nil {
				t.Errorf("ParseSealToOrder accepted %s", tc.args)
			}
		})
	}
}

func TestOrderAnswerRoundTrip(t *testing.T) {
	m := loadFull(t)
	sk, _ := seal.GenerateKey()
	kmsBundle, _ := seal.NewBundle(sk.PublicKey(), m.Hash, time.Now(), map[string]string{"mlockall": "ok"})
	to := recipient(t)
	var files []*seal.Sealed
	for _, n := range []string{"api-key", "db"} {
		s, _ := seal.Seal(to.Key(), n, []byte("x"), time.Now().Add(time.Hour), nil)
		files = append(files, s)
	}
	out := OrderAnswer{KMS: kmsBundle, Sealed: files}.Marshal()
	a, err := ParseOrderAnswer(out)
	if err != nil || a.KMS.PolicyHash() != m.Hash || len(a.Sealed) != 2 || a.Sealed[1].Name() != "db" {
		t.Fatalf("ParseOrderAnswer(Marshal()) = %+v, %v", a, err)
	}
	twice := OrderAnswer{KMS: kmsBundle, Sealed: []*seal.Sealed{files[0], files[0]}}.Marshal()
	for _, bad := range []string{twice, strings.Replace(out, `"v":1`, `"v":2`, 1), `{"v":1,"kms":{},"sealed":[]}`, "[]"} {
		if _, err := ParseOrderAnswer(bad); err == nil {
			t.Errorf("ParseOrderAnswer accepted %.100s", bad)
		}
	}
}

// TestCheckFile: an operator's order passes the file rules alone, in Decide's order.
func TestCheckFile(t *testing.T) {
	sk, _ := seal.GenerateKey()
	now := time.Now()
	trusted, _, _ := ed25519.GenerateKey(nil)
	r := Rules{Fingerprint: seal.Fingerprint(sk.PublicKey()), AnySender: true}
	ok, _ := seal.Seal(sk.PublicKey(), "a", []byte("x"), now.Add(time.Hour), nil)
	expired, _ := seal.Seal(sk.PublicKey(), "a", []byte("x"), now.Add(-time.Hour), nil)
	other, _ := seal.GenerateKey()
	elsewhere, _ := seal.Seal(other.PublicKey(), "a", []byte("x"), now.Add(time.Hour), nil)
	strict := r
	strict.AnySender, strict.Senders = false, append(strict.Senders, trusted)
	for _, tc := range []struct {
		name string
		r    Rules
		f    *seal.Sealed
		want string
	}{
		{"ok", r, ok, ""},
		{"another identity", r, elsewhere, ReasonRecipient},
		{"expired", r, expired, ReasonExpired},
		{"unsigned with trusted senders", strict, ok, ReasonSender},
	} {
		ref := CheckFile(tc.r, "a", tc.f, now)
		if got := ""; ref != nil {
			got = ref.Type
			if got != tc.want {
				t.Errorf("%s: %s, want %q", tc.name, got, tc.want)
			}
		} else if tc.want != "" {
			t.Errorf("%s: passed, want %s", tc.name, tc.want)
		}
	}
}

// FuzzParseSealToOrder: what it accepts is well formed.
func FuzzParseSealToOrder(f *testing.F) {
	f.Add(orderArgs(f, nil))
	f.Add(orderArgs(f, map[string]any{"secrets": []string{}, "all": true}))
	f.Add(orderArgs(f, map[string]any{"secrets": []string{"a", "a"}}))
	f.Fuzz(func(t *testing.T, args string) {
		o, err := ParseSealToOrder(args)
		if err != nil {
			return
		}
		if o.All == (len(o.Names) > 0) || o.Recipient == nil || slices.ContainsFunc(o.Names, func(n string) bool { return !pbp.SecretName(n) }) {
			t.Fatalf("accepted a malformed order %q: %+v", args, o)
		}
	})
}

// FuzzParseOrderAnswer: no input panics, and what it accepts names distinct secrets.
func FuzzParseOrderAnswer(f *testing.F) {
	m := loadFull(f)
	sk, _ := seal.GenerateKey()
	kmsBundle, _ := seal.NewBundle(sk.PublicKey(), m.Hash, time.Now(), nil)
	s, _ := seal.Seal(sk.PublicKey(), "api-key", []byte("x"), time.Now().Add(time.Hour), nil)
	f.Add(OrderAnswer{KMS: kmsBundle, Sealed: []*seal.Sealed{s}}.Marshal())
	f.Add(`{"v":1,"kms":{},"sealed":[]}`)
	f.Fuzz(func(t *testing.T, out string) {
		a, err := ParseOrderAnswer(out)
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, f := range a.Sealed {
			if seen[f.Name()] {
				t.Fatalf("accepted %s twice", f.Name())
			}
			seen[f.Name()] = true
		}
	})
}
