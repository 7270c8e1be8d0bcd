package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/spiffetls/tlsconfig"
	"github.com/spiffe/go-spiffe/v2/workloadapi"

	"github.com/sharness-ai/sharness/internal/seal"
	"github.com/sharness-ai/sharness/testkit/sidedoor"
)

// kmsSeat is where the kms doors are tried from: a container on the llm–kms edge holding a
// role's SVID (SPIFFE_ENDPOINT_SOCKET). With llm's SVID every door is a request kms must refuse
// for its reason; with a role that has no edge to kms, the handshake itself must fail.
type kmsSeat struct {
	hc         *http.Client
	base       string
	policyHash string
	withEdge   bool
}

// kmsDoorsFromEnv reads SHARNESS_PROBE_KMS (https://kms:8443), SHARNESS_PROBE_KMS_ID (kms's
// SPIFFE ID), SHARNESS_AI_POLICY (the policy hash) and SHARNESS_PROBE_SEAT_HAS_EDGE (1 or 0).
func kmsDoorsFromEnv(getenv func(string) string) ([]sidedoor.Door, error) {
	id, err := spiffeid.FromString(getenv("SHARNESS_PROBE_KMS_ID"))
	if err != nil {
		return nil, fmt.Errorf("SHARNESS_PROBE_KMS_ID: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	src, err := workloadapi.NewX509Source(ctx, workloadapi.WithClientOptions(workloadapi.WithAddr(getenv("SPIFFE_ENDPOINT_SOCKET"))))
	if err != nil {
		return nil, fmt.Errorf("this seat's SVID: %w", err)
	}
	cfg := tlsconfig.MTLSClientConfig(src, src, tlsconfig.AuthorizeID(id))
	s := kmsSeat{hc: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: nil, TLSClientConfig: cfg}},
		base: getenv("SHARNESS_PROBE_KMS"), policyHash: getenv("SHARNESS_AI_POLICY"), withEdge: getenv("SHARNESS_PROBE_SEAT_HAS_EDGE") == "1"}
	if !s.withEdge {
		return []sidedoor.Door{{Name: "kms/without-edge", Expected: "tls-refused", Limit: 15e9,
			Why: "custody answering a role the policy gives no edge to kms",
			Try: func(ctx context.Context) (string, string) {
				return s.post(ctx, "unwrap", s.unwrap(s.policyHash, time.Now()))
			}}}, nil
	}
	return []sidedoor.Door{
		{Name: "kms/wrong-policy-hash", Expected: "403/policy_mismatch", Limit: 15e9, Why: "a caller running under another policy opening secrets",
			Try: func(ctx context.Context) (string, string) {
				return s.post(ctx, "unwrap", s.unwrap("sha256:"+strings.Repeat("0", 64), time.Now()))
			}},
		{Name: "kms/stale-request", Expected: "400/timestamp_out_of_window", Limit: 15e9, Why: "a request recorded earlier, played later",
			Try: func(ctx context.Context) (string, string) {
				return s.post(ctx, "unwrap", s.unwrap(s.policyHash, time.Now().Add(-10*time.Minute)))
			}},
		{Name: "kms/replay", Expected: "409/nonce_reused", Limit: 15e9, Why: "the same request played twice",
			Try: func(ctx context.Context) (string, string) {
				body := s.unwrap(s.policyHash, time.Now())
				if got, note := s.post(ctx, "unwrap", body); got != "200" {
					return "first-" + got, note
				}
				return s.post(ctx, "unwrap", body)
			}},
		{Name: "kms/op-not-allowed", Expected: "403/op_not_allowed", Limit: 15e9, Why: "re-sealing the key to an identity of the caller's choosing",
			Try: func(ctx context.Context) (string, string) {
				return s.post(ctx, "seal_to", []byte(`{"v":1,"name":"anthropic-api-key","recipient":{},"expires":"2099-01-01T00:00:00Z","nonce":"`+nonce()+`","ts":"`+time.Now().UTC().Format(time.RFC3339)+`","policy_hash":"`+s.policyHash+`"}`))
			}},
	}, nil
}

func nonce() string {
	b := make([]byte, 16)
	rand.Read(b)
	return seal.EncodeBase64(b)
}

// unwrap is an unwrap request for the stack's API key with a one-time key of its own.
func (s kmsSeat) unwrap(policyHash string, ts time.Time) []byte {
	k, err := seal.GenerateKey()
	if err != nil {
		panic(err)
	}
	b, _ := json.Marshal(map[string]any{"v": 1, "name": "anthropic-api-key", "eph_pub": seal.EncodeBase64(k.PublicKey().Bytes()),
		"nonce": nonce(), "ts": ts.UTC().Format(time.RFC3339Nano), "policy_hash": policyHash})
	return b
}

// post names kms's answer "<status>/<error type>", "200", or "tls-refused" when the handshake
// fails.
func (s kmsSeat) post(ctx context.Context, op string, body []byte) (string, string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.base+"/v1/"+op, bytes.NewReader(body))
	if err != nil {
		return sidedoor.Kind(err), ""
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		if strings.Contains(err.Error(), "tls:") || strings.Contains(err.Error(), "x509") {
			return "tls-refused", err.Error()
		}
		return sidedoor.Kind(err), ""
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode == http.StatusOK {
		return "200", ""
	}
	var e struct {
		Error struct{ Type, Message string } `json:"error"`
	}
	json.Unmarshal(out, &e)
	return fmt.Sprintf("%d/%s", resp.StatusCode, e.Error.Type), e.Error.Message
}
