package stack

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sharness-ai/sharness/internal/seal"
)

// kmsService is kms's service in the compose file.
const kmsService = "kms"

// KMSLogs returns what p's kms printed, as `docker compose logs kms` shows it.
func (p Project) KMSLogs(ctx context.Context) ([]byte, error) {
	return p.Engine.ComposeLogs(ctx, p.compose(), kmsService, 0)
}

// KMSBundle reads the running kms's public bundle from its logs, looking again every half second
// for up to wait: kms prints it once it has made its identity, a moment after it starts. Finding
// none is a refusal; a cancelled ctx, ctx's error.
func (p Project) KMSBundle(ctx context.Context, wait time.Duration) (*seal.Bundle, error) {
	deadline := time.Now().Add(wait)
	for {
		logs, err := p.KMSLogs(ctx)
		var b *seal.Bundle
		if err == nil {
			b, err = LastBundle(logs)
		}
		if err == nil {
			return b, nil
		}
		if time.Now().After(deadline) {
			return nil, refused{err}
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// LastBundle finds the last bundle line in kms's logs: a kms that restarted made a new identity,
// and only the newest one is running.
func LastBundle(logs []byte) (*seal.Bundle, error) {
	var last string
	sc := bufio.NewScanner(bytes.NewReader(logs))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimRight(sc.Text(), "\r"), seal.BundleLogPrefix); ok {
			last = rest
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read kms logs: %w", err)
	}
	if last == "" {
		return nil, errors.New("no " + strings.TrimSpace(seal.BundleLogPrefix) + " line in the kms logs: is the stack up, and kms started?")
	}
	return seal.ParseBundle([]byte(last))
}
