package cli

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/sharness-ai/sharness/host/dashboard"
	"github.com/sharness-ai/sharness/host/record"
	"github.com/sharness-ai/sharness/internal/audit"
	"github.com/sharness-ai/sharness/internal/gate"
	"github.com/sharness-ai/sharness/policies/keys"
)

func (a *app) dashboardCmd() *cobra.Command {
	t := auditTrust{docker: a.docker}
	var dirs []string
	var key, listen string
	var readOnly bool
	c := &cobra.Command{
		Use:   "dashboard [--project P | --ca CA.pem <log files or folders>] [--gate-dir DIR ...] [--key operator.key] [--listen 127.0.0.1:0]",
		Short: "Serve a page on the host's loopback: live decisions, audit chain status, pending approvals to approve or deny, the policy in force",
		Long: "The page shows each component's latest decisions from its audit log, each log's chain status\n" +
			"(verified as `audit verify --allow-running` does, against the session CA and --policy-hash), the\n" +
			"requests waiting in the gate directories with Approve and Deny (signed with the operator key), and\n" +
			"the policy in force. --project P finds the logs (volumes P_audit-<component>) and, without --gate-dir,\n" +
			"the gate directories (volumes P_gate-<component>), as root. --policy-hash defaults to\n" +
			"SHARNESS_AI_POLICY_HASH, else the hash of the manifest (-f). It listens on a loopback address only\n" +
			"and prints the URL to open, with its one-time token; anyone with that URL can approve. Without an\n" +
			"operator key (or with --read-only) the page is read-only. SIGINT or SIGTERM stops it.\n" +
			"Exit 0: stopped; 1: the key file is unusable; 2: bad input (an address off loopback, a bad flag).",
		RunE: func(c *cobra.Command, args []string) error {
			ln, err := dashboard.Listen(listen)
			if err != nil {
				return err
			}
			defer ln.Close()
			policy, err := a.policyInForce(&t)
			if err != nil {
				return err
			}
			cfg := dashboard.Config{Policy: policy, Log: slog.New(slog.NewJSONHandler(a.errOut, nil))}
			if cfg.Key, cfg.ReadOnly, err = dashboardKey(c, key, readOnly); err != nil {
				return err
			}
			if _, err := t.logs(args); err != nil { // once now, so that a wrong project or file stops here
				return err
			}
			cfg.Logs = refreshed(10*time.Second, func() ([]dashboard.Log, error) {
				logs, err := t.logs(args)
				var out []dashboard.Log
				for _, l := range logs {
					out = append(out, dashboard.Log{File: l.File, Component: l.Component})
				}
				return out, err
			})
			cfg.Trust = func(logs []dashboard.Log) (audit.Trust, string, error) {
				var al []record.Log
				for _, l := range logs {
					al = append(al, record.Log{File: l.File, Component: l.Component})
				}
				return t.trust(al)
			}
			cfg.GateDirs = refreshed(10*time.Second, func() ([]string, error) {
				return a.gateDirs(context.Background(), dirs, t.project)
			})
			d, err := dashboard.New(cfg, ln.Addr())
			if err != nil {
				return err
			}
			return a.serveDashboard(d, ln, cfg.ReadOnly)
		},
	}
	t.sessionFlags(c)
	gateDirFlag(c, &dirs, nil)
	keyFlag(c, &key, "the operator key that signs the page's decisions")
	c.Flags().StringVar(&listen, "listen", "127.0.0.1:0", "the loopback address and port to serve on (0: any free port)")
	c.Flags().BoolVar(&readOnly, "read-only", false, "show, but never approve or deny, even with an operator key")
	return c
}

// policyInForce is the policy hash the logs must carry, and the components of the manifest
// that has it: --policy-hash (or SHARNESS_AI_POLICY_HASH), else the manifest's hash.
func (a *app) policyInForce(t *auditTrust) (dashboard.Policy, error) {
	p := dashboard.Policy{Hash: t.policy, Source: "--policy-hash or SHARNESS_AI_POLICY_HASH"}
	m, err := a.load()
	if p.Hash == "" && err != nil {
		return p, fmt.Errorf("no policy hash: pass --policy-hash (or SHARNESS_AI_POLICY_HASH), or -f the manifest: %w", err)
	} else if p.Hash == "" {
		p.Hash, p.Source = m.Hash, "the hash of "+a.manifest
	}
	if err := keys.CheckHash(p.Hash); err != nil {
		return p, fmt.Errorf("--policy-hash (or SHARNESS_AI_POLICY_HASH): %w", err)
	}
	t.policy = p.Hash
	if err == nil && m.Hash == p.Hash {
		for _, c := range m.Components {
			p.Components = append(p.Components, c.Name)
		}
	}
	return p, nil
}

// dashboardKey reads the operator key, or says why the page is read-only. A key that was asked
// for (--key, SHARNESS_AI_OPERATOR_KEY) must be usable; the default one may be absent.
func dashboardKey(c *cobra.Command, path string, readOnly bool) (ed25519.PrivateKey, string, error) {
	switch {
	case readOnly:
		return nil, "started with --read-only", nil
	case path == "":
		return nil, "no operator key path (--key)", nil
	}
	key, err := gate.ReadOperatorKey(path)
	asked := c.Flags().Changed("key") || os.Getenv("SHARNESS_AI_OPERATOR_KEY") != ""
	switch {
	case err == nil:
		return key, "", nil
	case errors.Is(err, fs.ErrNotExist) && !asked:
		return nil, fmt.Sprintf("no operator key at %s (make one with `sharness-ai operator init`, or pass --key)", path), nil
	case errors.Is(err, fs.ErrNotExist):
		return nil, "", fmt.Errorf("%w (make one with `sharness-ai operator init`)", err)
	}
	return nil, "", refused{err}
}

// serveDashboard prints the URL and serves until SIGINT or SIGTERM, then shuts down cleanly.
func (a *app) serveDashboard(d *dashboard.Dashboard, ln net.Listener, readOnly string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv := &http.Server{Handler: d, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: time.Minute}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	text := fmt.Sprintf("dashboard: %s\nthe token in this URL lets whoever has it see the stack and approve: do not share it. Ctrl-C stops the dashboard.\n", d.URL())
	if readOnly != "" {
		text += "read-only: " + readOnly + "\n"
	}
	if err := a.print(map[string]string{"url": d.URL()}, text); err != nil {
		return err
	}
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return srv.Shutdown(shutdown)
}

// refreshed calls f at most once per period and hands on its last result in between: the page
// refreshes every second, and docker need not be asked as often.
func refreshed[T any](period time.Duration, f func() (T, error)) func() (T, error) {
	var mu sync.Mutex
	var at time.Time
	var v T
	var err error
	return func() (T, error) {
		mu.Lock()
		defer mu.Unlock()
		if at.IsZero() || time.Since(at) >= period {
			v, err = f()
			at = time.Now()
		}
		return v, err
	}
}
