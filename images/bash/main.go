// Command sharness-bash is the bash component: the agent's shell, as one MCP tool, "bash",
// served over streamable HTTP at /mcp on :8090 (plain HTTP on the agent's edge network), with
// GET /healthz. Every call runs one command in a fresh sandbox (images/bash/sandbox) under the
// profile it names, if the policy's business.bash.profiles allows it: analyse (no network,
// workspace read-only), build (net's proxy only, workspace read-write) or admin (build's rights,
// and a person's approval of each command). What the command printed passes the secret filter
// (internal/secretfilter) before it becomes the result. One JSON log line per call, without
// the command or its output (the command's length and SHA-256 only).
//
// An admin command waits for the operator through the approval gate (internal/gate,
// docs/gate.md): bash writes a request to its gate folder (-gate-dir, a volume mounted into
// this server only and hidden from every sandbox), the person runs `sharness-ai approve|deny` on
// the host, and bash runs exactly the command approved, once, or refuses it with the gate's
// reason (approval_denied, approval_timeout after -gate-timeout, ...). Without the operator's
// public key (SHARNESS_AI_OPERATOR_PUBKEY) or the folder, every admin command is refused with
// approval_unavailable, and bash says so at start.
//
// It refuses to start unless the policy is the supplied one, this component is kind bash with
// profiles and a read-write workspace, and the kernel gives every sandbox what it needs
// (sandbox.Check, sandbox.Plan); -unsafe-best-effort starts anyway and logs every degradation.
//
// What it does not guarantee: see images/bash/sandbox and internal/secretfilter. The agent may run
// many commands at once; only the container's limits bound them together. A command's output is
// whatever it printed: it can say anything, including lies about what it did.
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
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sharness-ai/sharness/images/bash/sandbox"
	"github.com/sharness-ai/sharness/internal/audit"
	"github.com/sharness-ai/sharness/internal/gate"
	"github.com/sharness-ai/sharness/internal/healthz"
	"github.com/sharness-ai/sharness/internal/secretfilter"
	"github.com/sharness-ai/sharness/internal/serve"
	"github.com/sharness-ai/sharness/internal/session"
	"github.com/sharness-ai/sharness/policies/pbp"
)

// proxyPort is net's plain proxy port, the only one build's sandboxes may connect to.
const proxyPort = "3128"

type config struct {
	policyDir        string
	listen           string
	workspace        string
	unsafeBestEffort bool
	gate             gate.Settings // the approval gate of the admin profile
}

func main() {
	sandbox.Init() // a re-executed copy of this binary may be a sandbox's init
	cfg := config{policyDir: session.PolicyDir}
	unsafe, _ := strconv.ParseBool(os.Getenv("SHARNESS_AI_BASH_UNSAFE_BEST_EFFORT"))
	flag.StringVar(&cfg.listen, "listen", cmp.Or(os.Getenv("SHARNESS_AI_BASH_LISTEN"), ":8090"), "address of the MCP listener for the agent (env SHARNESS_AI_BASH_LISTEN)")
	flag.StringVar(&cfg.workspace, "workspace", cmp.Or(os.Getenv("SHARNESS_AI_BASH_WORKSPACE"), sandbox.DefaultWorkspace), "the workspace folder (env SHARNESS_AI_BASH_WORKSPACE)")
	flag.BoolVar(&cfg.unsafeBestEffort, "unsafe-best-effort", unsafe, "start even when the kernel lacks sandbox features, logging each one: the sandboxes are then weaker (env SHARNESS_AI_BASH_UNSAFE_BEST_EFFORT)")
	cfg.gate.Flags(flag.CommandLine, os.Getenv)
	flag.Parse()
	if flag.NArg() == 1 && flag.Arg(0) == "health" { // the compose healthcheck (internal/healthz)
		if err := healthz.Check(context.Background(), healthz.URL(cfg.listen)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	if flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: sharness-bash [flags] [health]")
		os.Exit(2)
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, cfg, log); err != nil {
		log.Error("sharness-bash stopped", "error", err.Error())
		os.Exit(1)
	}
}

func run(ctx context.Context, cfg config, log *slog.Logger) error {
	m, c, err := session.Load(cfg.policyDir, os.Getenv)
	if err != nil {
		return err
	}
	pol, err := policyOf(m, c)
	if err != nil {
		return err
	}
	sb, degraded, err := sandbox.Plan(sandbox.Check(ctx), cfg.unsafeBestEffort)
	if err != nil {
		return fmt.Errorf("refusing to start: %w", err)
	}
	for _, d := range degraded {
		log.Error("UNSAFE: sandboxes run degraded (-unsafe-best-effort)", "degradation", d)
	}
	// build's sandboxes reach net through a relay on the loopback that reads net's refusals
	// (netwatch.go); the relay is at the proxy's port, the one their Landlock domain connects to.
	var watch *netWatch
	if pol.proxy != "" {
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", proxyPort))
		if err != nil {
			return fmt.Errorf("refusing to start: the relay to net's proxy: %w", err)
		}
		defer ln.Close() // also when start-up stops below
		watch = &netWatch{upstream: pol.proxy, log: log}
		go watch.serve(ctx, ln)
		pol.proxy = ln.Addr().String()
	}
	// No sandbox sees the server's gate or audit folder, even without Landlock.
	pol.hide = []string{cfg.gate.Dir, cmp.Or(os.Getenv(audit.EnvDir), audit.DefaultDir)}
	if err := smokeTest(ctx, sb, pol, cfg.workspace); err != nil {
		return fmt.Errorf("refusing to start: %w", err)
	}
	needs := map[bool]string{true: "the admin profile"}[slices.Contains(pol.profiles, string(sandbox.Admin))]
	g, err := cfg.gate.Open(gate.Config{Component: c.Name, Policy: m.Hash, Tiers: adminTiers, Log: log}, needs)
	if err != nil {
		return fmt.Errorf("refusing to start: approval gate in %s: %w", cfg.gate.Dir, err)
	}
	filter, err := secretfilter.New(nil)
	if err != nil {
		return fmt.Errorf("refusing to start: secret filter: %w", err)
	}
	// bash's audit log, signed with its SVID: a bash without its record does not run. The
	// sandboxes cannot reach it: their Landlock domain reads and writes neither /var nor its volume.
	rec, closeRec, err := audit.OpenOwn(ctx, nil, c.Name, m.Hash)
	if err != nil {
		return err
	}
	defer closeRec(log)
	s := mcp.NewServer(&mcp.Implementation{Name: "sharness-bash", Version: "1"}, nil)
	(&tool{sb: sb, pol: pol, workspace: cfg.workspace, filter: filter, log: log, rec: rec, gate: g, watch: watch}).add(s)
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s },
		&mcp.StreamableHTTPOptions{SessionTimeout: time.Hour, Logger: log}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })

	ln, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		return err
	}
	// No WriteTimeout: a command may run for its whole timeout (600 s at most).
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	log.Info("sharness-bash serving", "policy", m.Hash, "listen", cfg.listen, "workspace", cfg.workspace,
		"profiles", pol.profiles, "proxy", pol.proxy, "degradations", len(degraded), "approval_gate", g != nil, "gate_dir", cfg.gate.Dir)
	return serve.Until(ctx, srv, ln, 10*time.Second)
}

// adminTiers: each admin command needs its own approval (tier every; the host refuses
// `approve --session`). A session approval would let the same command run again unasked.
var adminTiers = map[string]gate.Tier{sandbox.AdminAction: gate.Every}

// policy is what bash takes from its component's policy.
type policy struct {
	profiles []string // the profiles the agent may name
	proxy    string   // net's proxy, host:port; "" when bash has no edge to net
	hide     []string // the server's folders no sandbox may see (sandbox.Spec.Hide)
}

// policyOf refuses a component bash cannot serve: another kind, no profiles, a workspace not
// mounted read-write. build's proxy is net's plain port on the one component of kind net that
// bash has an edge to.
func policyOf(m *pbp.Manifest, c *pbp.Component) (policy, error) {
	if c.Kind != pbp.KindBash {
		return policy{}, fmt.Errorf("refusing to start: component %s is kind %s, not %s", c.Name, c.Kind, pbp.KindBash)
	}
	if c.Business.Bash == nil || c.Business.Bash.Profiles == nil || len(*c.Business.Bash.Profiles) == 0 {
		return policy{}, fmt.Errorf("refusing to start: component %s has no business.bash.profiles: no profile may run", c.Name)
	}
	if c.Workspace != "rw" {
		return policy{}, fmt.Errorf("refusing to start: component %s needs files.workspace rw (build writes it), the policy says %q", c.Name, c.Workspace)
	}
	p := policy{profiles: *c.Business.Bash.Profiles}
	switch nets := m.Peers(c.Name, pbp.KindNet); len(nets) {
	case 0: // build is refused per call, with the reason
	case 1:
		p.proxy = net.JoinHostPort(nets[0], proxyPort)
	default:
		return policy{}, fmt.Errorf("refusing to start: %s has edges to %d components of kind net, want at most one", c.Name, len(nets))
	}
	return p, nil
}

// smokeTest runs `true` in each profile the policy allows and can run: a sandbox that cannot
// start (a workspace that cannot be remounted, a missing /bin/bash) stops start-up instead of
// failing every call.
func smokeTest(ctx context.Context, sb *sandbox.Sandbox, pol policy, workspace string) error {
	for _, p := range []sandbox.Profile{sandbox.Analyse, sandbox.Build} {
		if !sandbox.Decide(p, pol.profiles, pol.proxy).Allow {
			continue
		}
		res, err := sb.Run(ctx, sandbox.Spec{Command: "true", Profile: p, Workspace: workspace, ProxyAddr: pol.proxy, Timeout: 30 * time.Second, Hide: pol.hide})
		if err == nil && res.ExitCode != 0 {
			err = fmt.Errorf("exit %d: %q", res.ExitCode, res.Stderr)
		}
		if err != nil {
			return fmt.Errorf("a %s sandbox does not run: %w", p, err)
		}
	}
	return nil
}
