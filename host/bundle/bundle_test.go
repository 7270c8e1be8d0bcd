package bundle_test

import (
	"bytes"
	"crypto/ed25519"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sharness-ai/sharness/host/bundle"
	"github.com/sharness-ai/sharness/policies/pbp"
	"github.com/sharness-ai/sharness/testkit/bundletest"
)

// exported is a bundle as export makes one: the default policy's files, two audit logs, their
// verification and one sealed secret, signed with key.
func exported(t testing.TB, key ed25519.PrivateKey) []byte {
	t.Helper()
	manifest := filepath.Join("..", "..", "policies", "default", "manifest.yaml")
	m, err := pbp.Load(os.DirFS(filepath.Dir(manifest)), "manifest.yaml")
	if err != nil {
		t.Fatal(err)
	}
	parts, err := bundle.PolicyParts(manifest, m)
	if err != nil {
		t.Fatal(err)
	}
	parts["audit/kms.jsonl"], parts["audit/net.jsonl"] = []byte("{\"seq\":1}\n"), []byte("{\"seq\":1}\n{\"seq\":2}\n")
	parts[bundle.VerifyPath] = []byte("{\n  \"ok\": true\n}")
	parts["secrets/anthropic-api-key.sealed"] = []byte(`{"v":1,"name":"anthropic-api-key"}`)
	h := bundle.Header{V: 1, Kind: bundle.Kind, Created: "2030-01-01T00:00:00Z", Project: "demo", PolicyHash: m.Hash, Secrets: []string{"anthropic-api-key"}, AuditOK: true}
	data, err := bundle.Marshal(h, parts, key)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestReadRefusesTampered: every change to a bundle after export is refused by Read, naming the
// part, or (a policy hash that is not its files') by Policy; the bundle as made reads whole.
func TestReadRefusesTampered(t *testing.T) {
	key := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{5}, 32))
	data := exported(t, key)
	b, err := bundle.Read(data)
	if err != nil {
		t.Fatalf("the bundle as made: %v", err)
	}
	if _, err := b.Policy(); err != nil || len(b.Parts()) != len(b.Header().Parts) || b.AuditLogs() != 2 || !b.Operator().Equal(key.Public()) {
		t.Fatalf("the bundle as made: policy %v, %d parts for %d listed, %d logs", err, len(b.Parts()), len(b.Header().Parts), b.AuditLogs())
	}
	for _, tc := range bundletest.Tamperings(t, data, key) {
		t.Run(tc.Name, func(t *testing.T) {
			b, err := bundle.Read(tc.Data)
			if err == nil {
				_, err = b.Policy()
			}
			if err == nil || !strings.Contains(err.Error(), tc.Want) {
				t.Errorf("got %v, want an error naming %q", err, tc.Want)
			}
		})
	}
}

// FuzzReadExport: no input panics, and what Read accepts lists exactly the parts it holds,
// each with its hash, under a manifest signed by the key it names.
func FuzzReadExport(f *testing.F) {
	key := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{3}, 32))
	parts := map[string][]byte{"policy/manifest.yaml": []byte("pbp: 1\n"), "audit/kms.jsonl": []byte("{}\n"), "audit/verify.json": []byte("{}"),
		"secrets/api-key.sealed": []byte("{}")}
	h := bundle.Header{V: 1, Kind: bundle.Kind, Created: "2030-01-01T00:00:00Z", PolicyHash: "sha256:" + strings.Repeat("a", 64), Secrets: []string{"api-key"}}
	good, err := bundle.Marshal(h, parts, key)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	for _, tc := range bundletest.Tamperings(f, good, key) {
		f.Add(tc.Data)
	}
	for _, tc := range bundletest.Tamperings(f, exported(f, key), key) {
		f.Add(tc.Data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := bundle.Read(data)
		if err != nil {
			return
		}
		if len(b.Parts()) != len(b.Header().Parts) {
			t.Fatalf("accepted %d parts for %d listed", len(b.Parts()), len(b.Header().Parts))
		}
		for p := range b.Parts() {
			if !bundle.ValidPart(p) {
				t.Fatalf("accepted a part at %q", p)
			}
		}
	})
}
