package stack

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sharness-ai/sharness/internal/seal"
	"github.com/sharness-ai/sharness/policies/pbp"
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

// BundleFile is where SealCommand has the person write the running kms's bundle.
const BundleFile = "/tmp/kms.json"

// KeySecrets are the names of the sealed secrets m's llm components take their API key from, in
// component order, each once.
func KeySecrets(m *pbp.Manifest) []string {
	var names []string
	for _, c := range m.Components {
		if l := c.Business.LLM; l != nil && l.KeySecret != "" && !slices.Contains(names, l.KeySecret) {
			names = append(names, l.KeySecret)
		}
	}
	return names
}

// SealCommand is the shell line that seals the policy's API keys (each llm's key_secret) to p's
// running kms, or "" when p.Policy has no kms. kms makes a new identity every session, so a key
// sealed to an earlier one cannot be opened: after every up it is sealed again. The key goes
// from the terminal into the shell (read -rs) and on through a pipe, never through argv, which
// every process of the host can read.
func (p Project) SealCommand() string {
	names := KeySecrets(p.Policy)
	if !slices.ContainsFunc(p.Policy.Components, func(c *pbp.Component) bool { return c.Kind == pbp.KindKMS }) {
		return ""
	}
	if len(names) == 0 {
		names = []string{"NAME"} // a kms that serves secrets no llm names: the person knows which
	}
	line := fmt.Sprintf("sharness-ai kms bundle -p %s --wait 30s --out %s", p.Name, BundleFile)
	for _, n := range names {
		line += fmt.Sprintf(" && read -rsp '%s: ' KEY && echo && printf %%s \"$KEY\" | sharness-ai secret seal --to %s %s", n, BundleFile, n)
	}
	return line + "; unset KEY"
}
