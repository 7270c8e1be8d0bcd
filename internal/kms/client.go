package kms

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/sharness-ai/sharness/internal/seal"
)

// Errors a Client returns, for errors.Is: the call never got an answer from kms, kms refused it
// (the error is then a *Refusal with its type), or kms answered something this client cannot
// read or open (never expected from a genuine kms).
var (
	ErrUnreachable = errors.New("kms unreachable")
	ErrRefused     = errors.New("kms refused")
	ErrBadAnswer   = errors.New("kms answer unreadable")
)

// maxAnswer bounds what a client reads: a sealed file, or an 8 KiB secret sealed and encoded.
const maxAnswer = 2 * seal.MaxFile

// Client calls kms. Its http.Client must speak mTLS as the calling component
// (mtls.ClientConfig to "kms"); baseURL is e.g. https://kms:8443.
type Client struct {
	hc         *http.Client
	base       string
	policyHash string
	now        func() time.Time
}

// NewClient returns a client that states policyHash, the caller's own policy, in every call.
func NewClient(hc *http.Client, baseURL, policyHash string) *Client {
	return &Client{hc: hc, base: strings.TrimSuffix(baseURL, "/"), policyHash: policyHash, now: time.Now}
}

// Unwrap has kms open the sealed secret name and return it sealed to a one-time key made for
// this call alone, with a fresh nonce; it opens the answer and drops the key. The caller owns the
// secret and scrubs it after use (clear).
func (c *Client) Unwrap(ctx context.Context, name string) ([]byte, error) {
	sk, err := seal.GenerateKey()
	if err != nil {
		return nil, fmt.Errorf("unwrap %s: one-time key: %w", name, err)
	}
	nonce, ts := c.fresh()
	body, _ := json.Marshal(unwrapBody{V: 1, Name: name, EphPub: seal.EncodeBase64(sk.PublicKey().Bytes()),
		Nonce: nonce, TS: ts, PolicyHash: c.policyHash})
	out, err := c.call(ctx, "unwrap", body)
	if err != nil {
		return nil, fmt.Errorf("unwrap %s: %w", name, err)
	}
	var a UnwrapAnswer
	if err := seal.DecodeStrict(out, maxDepth, &a); err != nil || a.V != 1 {
		return nil, fmt.Errorf("unwrap %s: %w: %v", name, ErrBadAnswer, err)
	}
	sealed, err := seal.DecodeBase64(a.Sealed)
	if err != nil {
		return nil, fmt.Errorf("unwrap %s: %w: sealed: %v", name, ErrBadAnswer, err)
	}
	secret, err := seal.OpenResponse(sk, body, sealed)
	if err != nil {
		return nil, fmt.Errorf("unwrap %s: %w: %v", name, ErrBadAnswer, err)
	}
	return secret, nil
}

// SealTo has kms re-seal the secret name to the identity of bundle to, until expires (at most
// the secret's own expiry), without the secret leaving kms in the clear.
func (c *Client) SealTo(ctx context.Context, name string, to *seal.Bundle, expires time.Time) (*seal.Sealed, error) {
	nonce, ts := c.fresh()
	body, _ := json.Marshal(sealToBody{V: 1, Name: name, Recipient: to.Marshal(), Expires: expires.UTC().Format(time.RFC3339),
		Nonce: nonce, TS: ts, PolicyHash: c.policyHash})
	out, err := c.call(ctx, "seal_to", body)
	if err != nil {
		return nil, fmt.Errorf("seal_to %s: %w", name, err)
	}
	f, err := seal.ParseSealed(out)
	if err != nil {
		return nil, fmt.Errorf("seal_to %s: %w: %v", name, ErrBadAnswer, err)
	}
	return f, nil
}

// Public returns kms's bundle.
func (c *Client) Public(ctx context.Context) (*seal.Bundle, error) {
	out, err := c.call(ctx, "public", []byte(`{"v":1}`))
	if err != nil {
		return nil, fmt.Errorf("public: %w", err)
	}
	b, err := seal.ParseBundle(out)
	if err != nil {
		return nil, fmt.Errorf("public: %w: %v", ErrBadAnswer, err)
	}
	return b, nil
}

// Destroy has kms scrub its identity and stop.
func (c *Client) Destroy(ctx context.Context) error {
	nonce, ts := c.fresh()
	body, _ := json.Marshal(destroyBody{V: 1, Nonce: nonce, TS: ts, PolicyHash: c.policyHash})
	if _, err := c.call(ctx, "destroy", body); err != nil {
		return fmt.Errorf("destroy: %w", err)
	}
	return nil
}

func (c *Client) fresh() (nonce, ts string) {
	var n [16]byte
	rand.Read(n[:]) // crypto/rand.Read never fails (Go 1.24+)
	return seal.EncodeBase64(n[:]), c.now().UTC().Format(time.RFC3339Nano)
}

// call posts body to op and returns a 200 answer's body, a *Refusal, or an error wrapping
// ErrUnreachable or ErrBadAnswer.
func (c *Client) call(ctx context.Context, op string, body []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/v1/"+op, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnreachable, err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnreachable, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	if err != nil {
		return nil, fmt.Errorf("%w: read answer: %v", ErrUnreachable, err)
	}
	if len(out) > maxAnswer {
		return nil, fmt.Errorf("%w: more than %d bytes", ErrBadAnswer, maxAnswer)
	}
	if resp.StatusCode == http.StatusOK {
		return out, nil
	}
	var e ErrorAnswer
	if err := seal.DecodeStrict(out, maxDepth, &e); err != nil || e.Error.Type == "" {
		return nil, fmt.Errorf("%w: HTTP %d without a kms error", ErrBadAnswer, resp.StatusCode)
	}
	return nil, &Refusal{Status: resp.StatusCode, Type: e.Error.Type, Message: e.Error.Message}
}
