package main

import (
	"net/http"

	"github.com/sharness-ai/sharness/internal/kms"
	"github.com/sharness-ai/sharness/internal/secretfilter"
	"github.com/sharness-ai/sharness/policies/pbp"
)

// newFilter is the secret filter with the curated rules and the policy's own.
func newFilter(extra []pbp.FilterRule) (secretFilter, error) { return secretfilter.New(extra) }

// newKeySource is the kms client over hc (mTLS as llm to kms): a fresh one-time key and nonce
// per request, the answer opened here and nowhere else.
func newKeySource(hc *http.Client, baseURL, policyHash string) (KeySource, error) {
	return kms.NewClient(hc, baseURL, policyHash), nil
}
