// Command sharness-kms is the kms component: custody of the session's sealed secrets. It makes
// its session identity at start (images/kms/custody), prints the identity's public bundle as one
// stdout line, "SHARNESS_AI_KMS_BUNDLE <json>", for `sharness-ai kms bundle` to pick up, and
// serves the kms ops over mutual TLS only (internal/mtls) on :8443. It reads sealed secrets from
// a read-only folder at each call. After destroy, or on SIGTERM, it scrubs the identity and exits.
//
// Its approval gate (internal/gate, docs/gate.md) is a folder on its own volume (-gate-dir) and
// the operator's public key (SHARNESS_AI_OPERATOR_PUBKEY): a caller's seal_to waits there for the
// operator's approval, and the operator's signed orders (`sharness-ai export`, docs/exit.md) are
// carried out from there. Without the key or the folder kms starts, says so, refuses every
// seal_to with approval_unavailable and takes no order.
//
// What it does not guarantee: the memory hygiene the kernel does not grant (each degradation is
// logged at start and listed in the bundle; -require-hygiene makes any of them fatal), or
// anything internal/kms and its custody package do not.
package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/spiffe/go-spiffe/v2/bundle/x509bundle"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"

	"github.com/sharness-ai/sharness/images/kms/custody"
	"github.com/sharness-ai/sharness/images/kms/hygiene"
	"github.com/sharness-ai/sharness/internal/audit"
	"github.com/sharness-ai/sharness/internal/gate"
	"github.com/sharness-ai/sharness/internal/mtls"
	"github.com/sharness-ai/sharness/internal/seal"
	"github.com/sharness-ai/sharness/internal/session"
	"github.com/sharness-ai/sharness/policies/pbp"
)

// DefaultSecretsDir is where the compose file mounts the sealed secrets, read-only.
const DefaultSecretsDir = "/etc/sharness/secrets"

type config struct {
	policyDir, secretsDir, listen string
	auditDir                      string // the folder of audit.jsonl, on kms's own volume
	requireHygiene                bool
	hygiene                       hygiene.Report
	gate                          gate.Settings

	// For tests: an identity source and a listener instead of the Workload API and listen.
	source   identity
	listener net.Listener
}

// identity is what mtls.Source returns: this workload's SVID and the session bundle.
type identity interface {
	x509svid.Source
	x509bundle.Source
}

func main() {
	// Harden first, before the process holds anything worth dumping.
	cfg := config{policyDir: session.PolicyDir, hygiene: hygiene.Harden()}
	flag.StringVar(&cfg.listen, "listen", cmp.Or(os.Getenv("SHARNESS_AI_KMS_LISTEN"), ":8443"), "address of the mTLS listener (env SHARNESS_AI_KMS_LISTEN)")
	flag.StringVar(&cfg.secretsDir, "secrets-dir", cmp.Or(os.Getenv("SHARNESS_AI_KMS_SECRETS_DIR"), DefaultSecretsDir), "folder of <name>.sealed files, read at each call (env SHARNESS_AI_KMS_SECRETS_DIR)")
	flag.StringVar(&cfg.auditDir, "audit-dir", cmp.Or(os.Getenv(audit.EnvDir), audit.DefaultDir), "folder of the audit log, on kms's own volume (env "+audit.EnvDir+")")
	cfg.gate.Flags(flag.CommandLine, os.Getenv)
	flag.BoolVar(&cfg.requireHygiene, "require-hygiene", os.Getenv("SHARNESS_AI_KMS_REQUIRE_HYGIENE") == "1", "refuse to start when any memory-hygiene measure is degraded (env SHARNESS_AI_KMS_REQUIRE_HYGIENE=1)")
	flag.Parse()
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, cfg, log, os.Stdout); err != nil {
		log.Error("sharness-kms stopped", "error", err.Error())
		os.Exit(1)
	}
}

func run(ctx context.Context, cfg config, log *slog.Logger, stdout io.Writer) error {
	m, c, err := session.Load(cfg.policyDir, os.Getenv)
	if err != nil {
		return err
	}
	if c.Kind != pbp.KindKMS {
		return fmt.Errorf("refusing to start: component %s is kind %s, not %s", c.Name, c.Kind, pbp.KindKMS)
	}
	src := cfg.source
	if src == nil {
		s, err := mtls.Source(ctx) // kms serves mTLS only: no SVID, no kms (fail closed)
		if err != nil {
			return err
		}
		defer s.Close()
		src = s
	}
	record, err := audit.OpenComponent(cfg.auditDir, src, c.Name, m.Hash)
	if err != nil {
		return fmt.Errorf("refusing to start: %w", err)
	}
	defer record.Finish(log) // last: after the server's shutdown, the last calls are in
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	g, err := cfg.gate.Open(gate.Config{Component: c.Name, Policy: m.Hash, Tiers: custody.Tiers, Log: log}, "every kms seal_to and operator order (sharness-ai export)")
	if err != nil {
		return fmt.Errorf("refusing to start: approval gate in %s: %w", cfg.gate.Dir, err)
	}
	srv, err := custody.New(custody.Config{Manifest: m, Self: c.Name, SecretsDir: cfg.secretsDir, Hygiene: cfg.hygiene, Log: log, Audit: record, OnDestroy: cancel, Gate: g})
	if err != nil {
		return fmt.Errorf("refusing to start: %w", err)
	}
	defer srv.Destroy()
	orders := make(chan error, 1)
	go func() { // a nil gate takes no order
		err := g.ServeOrders(ctx, srv.Order, srv.RecordOrder)
		if err != nil {
			log.Error("sharness-kms takes no operator order", "error", err.Error())
		}
		orders <- err
	}()
	defer func() { cancel(); <-orders }() // before the record closes
	if err := report(log, srv, cfg.requireHygiene); err != nil {
		return err
	}
	ln := cfg.listener
	if ln == nil {
		if ln, err = net.Listen("tcp", cfg.listen); err != nil {
			return err
		}
	}
	ln = tls.NewListener(ln, mtls.ServerConfig(src, src, m, c.Name))
	defer ln.Close()
	fmt.Fprintf(stdout, "%s%s\n", seal.BundleLogPrefix, srv.Public().Marshal())
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: 10 * time.Second, IdleTimeout: time.Minute, MaxHeaderBytes: 8 << 10,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	done := make(chan error, 1)
	go func() { done <- hs.Serve(ln) }()
	log.Info("sharness-kms serving", "policy", m.Hash, "listen", ln.Addr().String(), "fingerprint", srv.Public().Fingerprint(), "secrets", cfg.secretsDir,
		"approval_gate", g != nil, "gate_dir", cfg.gate.Dir)
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	shutdown, cancelShutdown := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancelShutdown()
	if err := hs.Shutdown(shutdown); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	log.Info("sharness-kms stopped; identity scrubbed")
	return nil
}

// report logs each memory-hygiene degradation and each permissive rule once at start.
func report(log *slog.Logger, srv *custody.Server, require bool) error {
	h := srv.Hygiene()
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var lost []string
	for _, k := range keys {
		if h[k] != "ok" {
			log.Warn("memory hygiene degraded", "measure", k, "status", h[k])
			lost = append(lost, k)
		}
	}
	if require && len(lost) > 0 {
		return fmt.Errorf("refusing to start: -require-hygiene and degraded: %s", strings.Join(lost, ", "))
	}
	r := srv.Rules()
	if r.AnySender {
		log.Warn("business.kms.trusted_senders is unset: unsigned sealed secrets are accepted (only the host can place them)")
	}
	log.Info("kms rules", "callers", r.Callers, "ops", r.Ops, "max_unwraps", r.MaxUnwraps, "trusted_senders", len(r.Senders))
	return nil
}
