package kms

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sharness-ai/sharness/internal/seal"
	"github.com/sharness-ai/sharness/policies/keys"
	"github.com/sharness-ai/sharness/policies/pbp"
)

// FuzzParseRequest: whatever a body parses to is well formed for its op.
func FuzzParseRequest(f *testing.F) {
	m := loadFull(f)
	sk, _ := seal.GenerateKey()
	b, _ := seal.NewBundle(sk.PublicKey(), m.Hash, time.Now(), map[string]string{"mlockall": "ok"})
	fields := map[string]any{"v": 1, "name": "api-key", "eph_pub": seal.EncodeBase64(sk.PublicKey().Bytes()),
		"nonce": seal.EncodeBase64(make([]byte, 16)), "ts": time.Now().UTC().Format(time.RFC3339), "policy_hash": m.Hash}
	unwrap, _ := json.Marshal(fields)
	sealTo, _ := json.Marshal(map[string]any{"v": 1, "name": "api-key", "recipient": json.RawMessage(b.Marshal()),
		"expires": "2030-01-01T00:00:00Z", "nonce": fields["nonce"], "ts": fields["ts"], "policy_hash": m.Hash})
	destroy, _ := json.Marshal(map[string]any{"v": 1, "nonce": fields["nonce"], "ts": fields["ts"], "policy_hash": m.Hash})
	for _, seed := range []struct {
		op   string
		body []byte
	}{
		{"public", []byte(`{"v":1}`)}, {"unwrap", unwrap}, {"seal_to", sealTo}, {"destroy", destroy},
		{"unwrap", []byte(strings.Replace(string(unwrap), `"name"`, `"Name"`, 1))},
		{"unwrap", []byte(strings.Replace(string(unwrap), `"v":1`, `"v":1,"v":1`, 1))},
		{"seal_to", []byte(strings.Replace(string(sealTo), `"kem_pub"`, `"kem_pub":"","kem_pub"`, 1))},
		{"destroy", []byte(`{"v":1,"nonce":"AAAAAAAAAAAAAAAAAAAAAA==","ts":"2030-01-01T00:00:00Z","policy_hash":"sha256:00"}`)},
	} {
		f.Add(seed.op, seed.body)
	}
	f.Fuzz(func(t *testing.T, op string, body []byte) {
		q, err := ParseRequest(op, body)
		if err != nil {
			return
		}
		switch op {
		case "public":
			return
		case "unwrap":
			if q.EphPub == nil {
				t.Fatal("unwrap without eph_pub")
			}
		case "seal_to":
			if q.Recipient == nil || q.Expires.IsZero() {
				t.Fatal("seal_to without recipient or expiry")
			}
		case "destroy":
		default:
			t.Fatalf("accepted op %q", op)
		}
		if op != "destroy" && !pbp.SecretName(q.Name) || keys.CheckHash(q.PolicyHash) != nil || q.TS.IsZero() {
			t.Fatalf("accepted a malformed %s request: %+v", op, q)
		}
	})
}
