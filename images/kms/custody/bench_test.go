package custody

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"slices"
	"testing"
	"time"

	"github.com/sharness-ai/sharness/policies/pbp"
)

// BenchmarkUnwrap measures one unwrap round trip as llm makes it (a fresh one-time key and
// nonce, POST over an established TLS 1.3 mTLS connection, kms reading and opening the sealed
// file from disk and sealing the answer, the client opening it) against a named baseline in the
// same run: one RSA-4096 OAEP (SHA-256) decryption, the operation a classic KMS "decrypt" call
// costs on the server alone, with the key generated once. The ratio is reported as ×baseline:
//
//	go test -run '^$' -bench Unwrap -benchtime 2s ./internal/kms
func BenchmarkUnwrap(b *testing.B) {
	var baseline []float64
	b.Run("baseline=rsa4096-oaep-decrypt", func(b *testing.B) {
		key, err := rsa.GenerateKey(rand.Reader, 4096)
		if err != nil {
			b.Fatal(err)
		}
		ct, err := rsa.EncryptOAEP(sha256.New(), rand.Reader, &key.PublicKey, []byte(secretValue), nil)
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if _, err := rsa.DecryptOAEP(sha256.New(), nil, key, ct, nil); err != nil {
				b.Fatal(err)
			}
		}
		baseline = append(baseline, float64(b.Elapsed().Nanoseconds())/float64(b.N))
	})
	b.Run("unwrap-mtls", func(b *testing.B) {
		e := newEnv(b, &pbp.KMSRules{Ops: ops("unwrap")}, func(c *Config) { c.MaxNonces = 1 << 22 })
		e.put(b, "api-key", "api-key", secretValue, time.Now().Add(time.Hour), nil)
		ctx := context.Background()
		if _, err := e.client.Unwrap(ctx, "api-key"); err != nil { // connect outside the loop
			b.Fatal(err)
		}
		for b.Loop() {
			s, err := e.client.Unwrap(ctx, "api-key")
			if err != nil {
				b.Fatal(err)
			}
			clear(s)
		}
		ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
		if len(baseline) > 0 {
			v := slices.Sorted(slices.Values(baseline))
			b.ReportMetric(ns/v[len(v)/2], "×baseline")
		}
	})
}
