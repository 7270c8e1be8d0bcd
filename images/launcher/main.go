// Command sharness-launcher starts a SHarness session (docs/architecture.md, "The wall"). It refuses to start
// unless the mounted policy is the one the person supplied, mints a session CA, issues one X.509
// SVID per role, destroys the CA key, and then only hands each role its own SVID over the SPIFFE
// Workload API, on a Unix socket in that role's identity volume. Components use go-spiffe's
// workloadapi client, so SPIRE can take its place without a code change.
//
// What it does not guarantee: that a role's socket is reachable by that role alone (the volume
// mounts, directory mode and group do that); erasure of the CA key from memory (see destroy);
// SVID rotation (an SVID lives as long as the session, and the launcher stops when it ends).
//
// Usage:
//
//	sharness-launcher [flags]         serve the session (the container's entrypoint)
//	sharness-launcher health [flags]  the compose healthcheck
//
// Flags > environment > defaults: --policy-dir (SHARNESS_AI_POLICY_DIR, /etc/sharness/policy),
// --identity-root (SHARNESS_AI_IDENTITY_ROOT, /run/sharness/identity), --session-length
// (SHARNESS_AI_SESSION_LENGTH, 24h), --audit-dir (SHARNESS_AI_AUDIT_DIR, /var/log/sharness: its
// audit log, opened with its own SVID; no audit folder, no session). The policy hash and
// component name come from SHARNESS_AI_POLICY_HASH (or SHARNESS_AI_POLICY_KEY) and
// SHARNESS_AI_COMPONENT.
//
// Exit codes: 0 stopped on a signal, or healthy; 1 failed, or unhealthy; 2 refused to start (the
// policy, or a usage error), with one line on stderr saying why.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/sharness-ai/sharness/internal/audit"
	"github.com/sharness-ai/sharness/internal/session"
)

// Environment variables of the launcher's own settings.
const (
	envPolicyDir     = "SHARNESS_AI_POLICY_DIR"
	envIdentityRoot  = "SHARNESS_AI_IDENTITY_ROOT"
	envSessionLength = "SHARNESS_AI_SESSION_LENGTH"
)

// defaultIdentityRoot is compose.IdentityDir; the image does not import the compose renderer.
const defaultIdentityRoot = "/run/sharness/identity"

// maxSession bounds the session length: a session CA must not become a standing credential.
const maxSession = 30 * 24 * time.Hour

type config struct {
	verb          string // "" (serve) or "health"
	policyDir     string
	identityRoot  string
	sessionLength time.Duration
	auditDir      string // the folder of the launcher's audit log, on its own volume
	getenv        func(string) string
	log           *slog.Logger
}

// refusal is an error that stops the launcher before the session starts (exit 2).
type refusal struct{ err error }

func (r *refusal) Error() string { return r.err.Error() }
func (r *refusal) Unwrap() error { return r.err }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli(ctx, os.Args[1:], os.Getenv, os.Stderr)
	stop()
	os.Exit(code)
}

// cli parses args into a config, runs the verb and returns the exit code.
func cli(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) int {
	cfg, err := parse(args, getenv)
	if err == nil {
		cfg.log = slog.New(slog.NewJSONHandler(stderr, nil))
		if cfg.verb == "health" {
			err = health(ctx, cfg)
		} else {
			err = run(ctx, cfg)
		}
	}
	if err == nil {
		return 0
	}
	// One line, whatever the error holds: `docker compose up` shows it as the launcher's output.
	fmt.Fprintln(stderr, "sharness-launcher: "+strings.Join(strings.Fields(err.Error()), " "))
	if errors.As(err, new(*refusal)) {
		return 2
	}
	return 1
}

func parse(args []string, getenv func(string) string) (config, error) {
	cfg := config{getenv: getenv}
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cfg.verb, args = args[0], args[1:]
	}
	if cfg.verb != "" && cfg.verb != "health" {
		return cfg, &refusal{fmt.Errorf("unknown command %q (want no command, or health)", cfg.verb)}
	}
	fs := flag.NewFlagSet("sharness-launcher", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&cfg.policyDir, "policy-dir", cmp.Or(getenv(envPolicyDir), session.PolicyDir), "folder holding manifest.yaml")
	fs.StringVar(&cfg.identityRoot, "identity-root", cmp.Or(getenv(envIdentityRoot), defaultIdentityRoot), "folder holding one identity volume per role")
	fs.StringVar(&cfg.auditDir, "audit-dir", cmp.Or(getenv(audit.EnvDir), audit.DefaultDir), "folder of the launcher's audit log, on its own volume")
	length := fs.String("session-length", cmp.Or(getenv(envSessionLength), "24h"), "validity of the session CA and every SVID")
	if err := fs.Parse(args); err != nil {
		return cfg, &refusal{err}
	}
	if fs.NArg() > 0 {
		return cfg, &refusal{fmt.Errorf("unexpected arguments %q", fs.Args())}
	}
	d, err := time.ParseDuration(*length)
	if err != nil || d < time.Minute || d > maxSession {
		return cfg, &refusal{fmt.Errorf("session length %q: want a duration from 1m to %s", *length, maxSession)}
	}
	cfg.sessionLength = d
	return cfg, nil
}
