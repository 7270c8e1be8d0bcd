// Command sharness-llm is the llm component: the agent's only way to the model. It serves the
// Messages API on :8080 (plain HTTP on the agent's edge network: membership is the agent's
// identity), checks every request against the policy's business.llm rules (images/llm/messages),
// runs the secret filter over what the agent sends, drops the agent's placeholder key, adds the
// real one (opened by kms over mTLS, for one request or key_cache_seconds), and sends the
// request through net's mTLS proxy to the upstream, relaying streams event by event.
//
// What it does not guarantee: see images/llm/messages (the filter sees text, not intent). The
// session budget counts the usage the upstream reports, after each response: requests in flight
// together can overshoot it, and a stream the agent cuts is counted as far as it was read. The
// key is a Go string in the upstream request's headers for the request's lifetime, which no
// scrubbing reaches.
package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/sharness-ai/sharness/images/llm/messages"
	"github.com/sharness-ai/sharness/images/llm/netdial"
	"github.com/sharness-ai/sharness/internal/audit"
	"github.com/sharness-ai/sharness/internal/mtls"
	"github.com/sharness-ai/sharness/internal/serve"
	"github.com/sharness-ai/sharness/internal/session"
	"github.com/sharness-ai/sharness/policies/pbp"
)

type config struct {
	policyDir string
	listen    string // the agent edge
	net       string // net's mTLS proxy listener
	kms       string // kms's base URL
	unsafeCA  string // PEM of a CA the upstream may chain to; offline test worlds only
	auditDir  string // the folder of audit.jsonl, on llm's own volume
}

func main() {
	cfg := config{policyDir: session.PolicyDir}
	flag.StringVar(&cfg.listen, "listen", cmp.Or(os.Getenv("SHARNESS_AI_LLM_LISTEN"), ":8080"), "address of the Messages API listener for the agent (env SHARNESS_AI_LLM_LISTEN)")
	flag.StringVar(&cfg.net, "net", cmp.Or(os.Getenv("SHARNESS_AI_LLM_NET"), "net:3129"), "net's mTLS proxy listener (env SHARNESS_AI_LLM_NET)")
	flag.StringVar(&cfg.kms, "kms", cmp.Or(os.Getenv("SHARNESS_AI_LLM_KMS"), "https://kms:8443"), "kms's base URL (env SHARNESS_AI_LLM_KMS)")
	flag.StringVar(&cfg.auditDir, "audit-dir", cmp.Or(os.Getenv(audit.EnvDir), audit.DefaultDir), "folder of the audit log, on llm's own volume (env "+audit.EnvDir+")")
	// By environment only: a file would need a mount the compiled policy does not list.
	cfg.unsafeCA = os.Getenv(pbp.EnvLLMUnsafeCA)
	flag.Parse()
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, cfg, log); err != nil {
		log.Error("sharness-llm stopped", "error", err.Error())
		os.Exit(1)
	}
}

func run(ctx context.Context, cfg config, log *slog.Logger) error {
	m, c, err := session.Load(cfg.policyDir, os.Getenv)
	if err != nil {
		return err
	}
	if c.Kind != pbp.KindLLM {
		return fmt.Errorf("refusing to start: component %s is kind %s, not %s", c.Name, c.Kind, pbp.KindLLM)
	}
	rules, err := messages.Compile(c.Business.LLM)
	if err != nil {
		return fmt.Errorf("refusing to start: %w", err)
	}
	filter, err := newFilter(rules.FilterRules())
	if err != nil {
		return fmt.Errorf("refusing to start: secret filter: %w", err)
	}
	// Only a test world's policy lets the extra CA in (test_world.llm_ca, under the hash): under a
	// production policy the upstream chains to the system's roots alone, whatever the compose
	// file sets.
	if cfg.unsafeCA != "" && !m.TestWorld.LLMCAFromEnv() {
		return fmt.Errorf("refusing to start: %s is set, and policy %s does not grant it (want test_world.llm_ca: %s, got %s): a production policy trusts the system's roots alone",
			pbp.EnvLLMUnsafeCA, m.Hash, pbp.LLMCAFromEnvironment, grantOf(m))
	}
	pool, err := netdial.Roots(cfg.unsafeCA)
	if err != nil {
		return fmt.Errorf("refusing to start: %w", err)
	}
	if cfg.unsafeCA != "" {
		log.Warn("UNSAFE: the upstream may chain to an extra CA (" + pbp.EnvLLMUnsafeCA + ", granted by the policy's test_world.llm_ca); this is for an offline test world only")
	}
	src, err := mtls.Source(ctx) // llm has no way out without its identity: fail closed
	if err != nil {
		return err
	}
	defer src.Close()
	record, err := audit.OpenComponent(cfg.auditDir, src, c.Name, m.Hash)
	if err != nil {
		return fmt.Errorf("refusing to start: %w", err)
	}
	defer record.Finish(log) // after the server's shutdown: the last requests are in
	netName, err := peerOfKind(m, c.Name, pbp.KindNet)
	if err != nil {
		return err
	}
	kmsName, err := peerOfKind(m, c.Name, pbp.KindKMS)
	if err != nil {
		return err
	}
	netTLS, err := mtls.ClientConfig(src, src, m, c.Name, netName)
	if err != nil {
		return fmt.Errorf("refusing to start: %w", err)
	}
	kmsTLS, err := mtls.ClientConfig(src, src, m, c.Name, kmsName)
	if err != nil {
		return fmt.Errorf("refusing to start: %w", err)
	}
	keySrc, err := newKeySource(&http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{Proxy: nil, TLSClientConfig: kmsTLS, ForceAttemptHTTP2: true}}, cfg.kms, m.Hash)
	if err != nil {
		return fmt.Errorf("refusing to start: %w", err)
	}
	s := newServer(rules, filter, keySrc, netdial.Transport(netdial.Through(cfg.net, netTLS), pool), log)
	s.audit, s.caller = record, strings.Join(c.AcceptFrom, ",")

	ln, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		return err
	}
	// No WriteTimeout: a stream lasts as long as the model writes (docs/pitfalls.md).
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	log.Info("sharness-llm serving", "policy", m.Hash, "listen", cfg.listen, "upstream", rules.Upstream().String(),
		"net", cfg.net, "kms", cfg.kms, "key_cache", rules.KeyCache().String(), "redact", rules.Redact(), "budget", rules.Budget())
	return serve.Until(ctx, srv, ln, 30*time.Second)
}

// grantOf says what m's test_world.llm_ca is, for a refusal.
func grantOf(m *pbp.Manifest) string {
	switch {
	case m.TestWorld == nil:
		return "no test_world (a production policy)"
	case m.TestWorld.LLMCA == "":
		return "a test_world without llm_ca"
	}
	return "llm_ca: " + m.TestWorld.LLMCA
}

// peerOfKind names the one component of kind k that self has an edge to.
func peerOfKind(m *pbp.Manifest, self string, k pbp.Kind) (string, error) {
	found := m.Peers(self, k)
	if len(found) != 1 {
		return "", fmt.Errorf("refusing to start: %s needs exactly one edge to a %s component, the policy has %d", self, k, len(found))
	}
	return found[0], nil
}
