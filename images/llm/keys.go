package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"time"
)

// keys hands out the API key: opened by kms for each request, or kept for at most ttl. Every
// key it sees for the first time goes to the secret filter (learn), so an agent that learnt the
// key somehow still cannot send it to the model.
type keys struct {
	src   KeySource
	name  string
	ttl   time.Duration
	now   func() time.Time
	learn func([]byte)

	mu    sync.Mutex // guards key and until (only with ttl > 0)
	key   []byte
	until time.Time

	seenMu sync.Mutex
	seen   map[[32]byte]bool
}

// get returns a copy of the key that the caller must clear after use. A kms failure is
// returned as is: the request fails closed, and the next request asks kms again.
func (k *keys) get(ctx context.Context) ([]byte, error) {
	if k.ttl > 0 {
		k.mu.Lock()
		defer k.mu.Unlock()
		if k.key != nil && k.now().Before(k.until) {
			return bytes.Clone(k.key), nil
		}
		clear(k.key)
		k.key = nil
	}
	raw, err := k.src.Unwrap(ctx, k.name)
	// A sealed key often ends in the newline of the file it came from; a header cannot.
	key := bytes.Clone(bytes.TrimSpace(raw))
	clear(raw)
	switch {
	case err != nil:
		clear(key)
		return nil, fmt.Errorf("kms: %w", err)
	case len(key) == 0:
		return nil, errors.New("kms: the key is empty")
	case bytes.ContainsFunc(key, func(r rune) bool { return r < 0x21 || r == 0x7f }):
		clear(key)
		return nil, errors.New("kms: the key holds characters a header cannot carry")
	}
	k.remember(key)
	if k.ttl > 0 {
		k.key, k.until = bytes.Clone(key), k.now().Add(k.ttl)
	}
	return key, nil
}

func (k *keys) remember(key []byte) {
	sum := sha256.Sum256(key)
	k.seenMu.Lock()
	defer k.seenMu.Unlock()
	if !k.seen[sum] {
		k.seen[sum] = true
		k.learn(key)
	}
}
