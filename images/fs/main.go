// Command sharness-fs is the fs component: the only writer of the workspace's protected paths
// (.claude/, .git/hooks/, .envrc, ...), which every other container sees read-only. It serves the
// agent's edge on :8091, plain HTTP (membership of the edge network is the agent's identity):
//
//	POST /v1/write   {"path", "content" | "content_base64", "mode"?}   mode: octal string, "0644"
//	POST /v1/delete  {"path"}
//	POST /v1/rename  {"from", "to"}
//	GET  /healthz    (`sharness-fs health` asks it on the loopback: the compose file's healthcheck)
//	/mcp             the same as MCP tools fs_write, fs_delete, fs_rename (streamable HTTP)
//
// images/fs/guard decides and carries out each change; this command decodes requests strictly,
// answers, and logs one JSON line per decision (never content). It refuses to start unless its
// policy is kind fs with the workspace mounted read-write, and unless every protected path exists
// (`sharness-ai workspace init` makes them on the host; fs never does, see guard.Prepare).
//
// A change to a path the policy lists under business.fs.ask waits for the operator's decision
// through the approval gate (internal/gate, docs/gate.md): fs writes a request to its gate folder
// (-gate-dir, a volume mounted into fs only), the person runs `sharness-ai approve|deny` on the
// host, and fs carries out exactly the change approved, or refuses it with the gate's reason
// (approval_denied, approval_timeout after -gate-timeout, ...). Every such change needs its own
// approval (tier every). Without the operator's public key (SHARNESS_AI_OPERATOR_PUBKEY) or
// without the gate folder, fs still serves and refuses every change to an ask path
// (approval_unavailable), saying at start which is missing.
//
// What it does not guarantee: see images/fs/guard and internal/gate. Anyone on the agent's edge
// network can call it; it trusts that network to hold only the agent.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/sharness-ai/sharness/images/fs/guard"
	"github.com/sharness-ai/sharness/internal/audit"
	"github.com/sharness-ai/sharness/internal/gate"
	"github.com/sharness-ai/sharness/internal/healthz"
	"github.com/sharness-ai/sharness/internal/secretfilter"
	"github.com/sharness-ai/sharness/internal/serve"
	"github.com/sharness-ai/sharness/internal/session"
	"github.com/sharness-ai/sharness/policies/pbp"
)

type config struct {
	policyDir string
	listen    string // the agent edge
	workspace string
	gate      gate.Settings  // the approval gate's folder, timeout and operator key; no key refuses ask paths
	identity  audit.Identity // signs the audit log; nil: the Workload API's (tests give one)
}

func main() {
	cfg := config{policyDir: session.PolicyDir}
	flag.StringVar(&cfg.listen, "listen", cmp.Or(os.Getenv("SHARNESS_AI_FS_LISTEN"), ":8091"), "address of the API and MCP listener for the agent (env SHARNESS_AI_FS_LISTEN)")
	flag.StringVar(&cfg.workspace, "workspace", cmp.Or(os.Getenv("SHARNESS_AI_FS_WORKSPACE"), "/workspace"), "the workspace folder, mounted read-write (env SHARNESS_AI_FS_WORKSPACE)")
	cfg.gate.Flags(flag.CommandLine, os.Getenv)
	flag.Parse()
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	var err error
	switch {
	case flag.NArg() == 1 && flag.Arg(0) == "health": // the compose file's healthcheck
		err = healthz.Check(ctx, healthz.URL(cfg.listen))
	case flag.NArg() == 0:
		err = run(ctx, cfg, log)
	default:
		fmt.Fprintln(os.Stderr, "usage: sharness-fs [-listen addr] [-workspace dir] [health]")
		os.Exit(2)
	}
	if err != nil {
		log.Error("sharness-fs failed", "error", err.Error())
		os.Exit(1)
	}
}

func run(ctx context.Context, cfg config, log *slog.Logger) error {
	m, c, err := session.Load(cfg.policyDir, os.Getenv)
	if err != nil {
		return err
	}
	if c.Kind != pbp.KindFS {
		return fmt.Errorf("refusing to start: component %s is kind %s, not %s", c.Name, c.Kind, pbp.KindFS)
	}
	if c.Workspace != "rw" {
		return fmt.Errorf("refusing to start: fs writes the workspace, and the policy mounts it %q, not \"rw\" (files.workspace)", c.Workspace)
	}
	rules, err := compileRules(c)
	if err != nil {
		return fmt.Errorf("refusing to start: %w", err)
	}
	filter, err := secretfilter.New(nil)
	if err != nil {
		return fmt.Errorf("refusing to start: secret filter: %w", err)
	}
	g, err := guard.Open(cfg.workspace, rules, filter)
	if errors.Is(err, guard.ErrMissing) {
		return fmt.Errorf("refusing to start: %w; run `sharness-ai workspace init` on the host before starting the stack", err)
	} else if err != nil {
		return fmt.Errorf("refusing to start: %w", err)
	}
	defer g.Close()
	gt, err := cfg.gate.Open(gate.Config{Component: c.Name, Policy: m.Hash, Tiers: guard.Tiers, Log: log}, "every change to an ask path (business.fs.ask)")
	if err != nil {
		return fmt.Errorf("refusing to start: approval gate in %s: %w", cfg.gate.Dir, err)
	}
	rec, closeRec, err := audit.OpenOwn(ctx, cfg.identity, c.Name, m.Hash)
	if err != nil {
		return err
	}
	defer closeRec(log)
	s := newServer(g, guard.GateApprover(gt), rules.MaxFileSize(), log)
	s.rec = rec

	ln, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		return err
	}
	// No WriteTimeout: an MCP client may hold a stream open for the session, and a change to an
	// ask path holds its request open until the operator decides (up to the gate timeout).
	srv := &http.Server{Handler: s.routes(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	log.Info("sharness-fs serving", "policy", m.Hash, "listen", cfg.listen, "workspace", cfg.workspace,
		"protected", c.Protected, "max_file_size", rules.MaxFileSize(), "max_body", s.maxBody,
		"approval_gate", gt != nil, "gate_dir", cfg.gate.Dir, "gate_timeout", cfg.gate.Timeout)
	return serve.Until(ctx, srv, ln, 10*time.Second)
}

// compileRules reads fs's rules from its effective policy; business.fs unset means the defaults
// (a 1 MiB cap, no exec bits, nothing to ask).
func compileRules(c *pbp.Component) (*guard.Rules, error) {
	p := guard.Policy{Protected: c.Protected}
	if r := c.Business.FS; r != nil {
		p.Ask, p.ExecBits = r.Ask, r.ExecBits != nil && *r.ExecBits
		if r.MaxFileSize != "" {
			n, err := pbp.ParseSize(r.MaxFileSize)
			if err != nil {
				return nil, fmt.Errorf("business.fs.max_file_size: %w", err)
			}
			p.MaxFileSize = n
		}
	}
	return guard.Compile(p)
}
