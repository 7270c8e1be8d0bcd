package main

import (
	"errors"
	"net/http"

	"github.com/sharness-ai/sharness/internal/secretfilter"
	"github.com/sharness-ai/sharness/policies/pbp"
)

// newFilter is the secret filter with the curated rules and the policy's own.
func newFilter(extra []pbp.FilterRule) (secretFilter, error) { return secretfilter.New(extra) }

// newKeySource is the kms client over hc (mTLS as llm to kms). internal/kms does not exist yet:
// until it does, llm refuses to start rather than serve without a key. Wiring it is one line:
//
//	return kms.NewClient(hc, baseURL, policyHash), nil
func newKeySource(hc *http.Client, baseURL, policyHash string) (KeySource, error) {
	_, _, _ = hc, baseURL, policyHash
	return nil, errors.New("this build has no kms client (internal/kms is not wired in)")
}
