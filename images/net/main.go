// Command sharness-net is the net component: the stack's only network client. It is an HTTP
// forward proxy (CONNECT for HTTPS, absolute URIs for plain HTTP) on :3128 for callers known
// by their edge network, and on :3129 over mutual TLS (internal/mtls) for callers known by
// their SPIFFE ID; GET /metrics on :3129 serves Prometheus metrics.
// Every request is decided per caller by images/net/egress, resolved (answers kept for their DNS
// TTL, clamped: images/net/resolve), every address checked against the IANA
// special-purpose ranges on every request, and dialled to exactly the address checked.
//
// A request to one of the caller's "ask" hosts waits for the operator's decision through net's
// approval gate (images/net/approval, internal/gate; -gate-dir, net's own volume), then
// goes through every other check; a refusal is a 403 whose X-Sharness-Deny names the gate's
// reason (approval_denied, approval_timeout after -gate-timeout, approval_unavailable).
// Without the operator's public key (SHARNESS_AI_OPERATOR_PUBKEY) or the folder, every ask
// host is refused with approval_unavailable, and net says so at start when the policy has any.
//
// Its own limits hold one caller from starving the others: a flood brake per caller
// (-rate-per-caller, 429), and caps on the client connections open per caller and in all
// (-conns-per-caller, -conns; 503 conn-limit), tunnels among them (as many, 503 tunnel-limit). Net
// refuses to start when what the caps let it hold does not fit its file limit (limits.fit).
//
// What it does not guarantee: that an allowed host cannot carry data out (see
// images/net/egress), or anything about what travels inside a TLS tunnel besides its server
// name. Tunnels must be TLS: any other protocol inside CONNECT is refused for lack of SNI.
package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/sharness-ai/sharness/images/net/approval"
	"github.com/sharness-ai/sharness/images/net/egress"
	"github.com/sharness-ai/sharness/images/net/relay"
	"github.com/sharness-ai/sharness/images/net/resolve"
	"github.com/sharness-ai/sharness/internal/audit"
	"github.com/sharness-ai/sharness/internal/gate"
	"github.com/sharness-ai/sharness/internal/mtls"
	"github.com/sharness-ai/sharness/internal/session"
	"github.com/sharness-ai/sharness/policies/pbp"
)

type config struct {
	policyDir          string
	listen, mtlsListen string
	upstream           string // http://[user:pass@]host:port of a proxy to chain through
	brake              string // requests per second per caller / burst
	conns, connsPer    string // open client connections in all, and per caller
	auditDir           string // the folder of audit.jsonl, on net's own volume
	gate               gate.Settings
}

func main() {
	cfg := config{policyDir: session.PolicyDir}
	flag.StringVar(&cfg.listen, "listen", cmp.Or(os.Getenv("SHARNESS_AI_NET_LISTEN"), ":3128"), "address of the plain proxy listener, for edge callers (env SHARNESS_AI_NET_LISTEN)")
	flag.StringVar(&cfg.mtlsListen, "mtls-listen", cmp.Or(os.Getenv("SHARNESS_AI_NET_MTLS_LISTEN"), ":3129"), "address of the mTLS proxy and metrics listener (env SHARNESS_AI_NET_MTLS_LISTEN)")
	flag.StringVar(&cfg.upstream, "upstream-proxy", os.Getenv("SHARNESS_AI_NET_UPSTREAM_PROXY"), "chain through this http:// proxy (env SHARNESS_AI_NET_UPSTREAM_PROXY)")
	flag.StringVar(&cfg.brake, "rate-per-caller", cmp.Or(os.Getenv("SHARNESS_AI_NET_RATE_PER_CALLER"), defaultLimits.brake.String()), "the flood brake: each caller's requests per second / burst; over it, 429 (env SHARNESS_AI_NET_RATE_PER_CALLER)")
	flag.StringVar(&cfg.conns, "conns", cmp.Or(os.Getenv("SHARNESS_AI_NET_CONNS"), strconv.Itoa(defaultLimits.conns)), "open client connections in all, tunnels among them; over it, 503 (env SHARNESS_AI_NET_CONNS)")
	flag.StringVar(&cfg.connsPer, "conns-per-caller", cmp.Or(os.Getenv("SHARNESS_AI_NET_CONNS_PER_CALLER"), strconv.Itoa(defaultLimits.connsPerCaller)), "open client connections of each caller; over it, 503 (env SHARNESS_AI_NET_CONNS_PER_CALLER)")
	flag.StringVar(&cfg.auditDir, "audit-dir", cmp.Or(os.Getenv(audit.EnvDir), audit.DefaultDir), "folder of the audit log, on net's own volume (env "+audit.EnvDir+")")
	cfg.gate.Flags(flag.CommandLine, os.Getenv)
	flag.Parse()
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, cfg, log); err != nil {
		log.Error("sharness-net stopped", "error", err.Error())
		os.Exit(1)
	}
}

func run(ctx context.Context, cfg config, log *slog.Logger) error {
	m, c, err := session.Load(cfg.policyDir, os.Getenv)
	if err != nil {
		return err
	}
	if c.Kind != pbp.KindNet {
		return fmt.Errorf("refusing to start: component %s is kind %s, not %s", c.Name, c.Kind, pbp.KindNet)
	}
	if err := retiredSwitches(os.Getenv, m); err != nil {
		return err
	}
	rules, err := egress.Compile(c.Business.Net)
	if err != nil {
		return fmt.Errorf("refusing to start: %w", err)
	}
	up, err := relay.ParseUpstream(cfg.upstream)
	lim := defaultLimits
	if err == nil {
		lim.brake, err = relay.ParseBrake(cmp.Or(cfg.brake, lim.brake.String()))
	}
	if err == nil {
		err = lim.setConns(cfg.conns, cfg.connsPer)
	}
	var files syscall.Rlimit
	if err == nil {
		if err = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &files); err != nil { // Go raised the soft limit to the hard one
			err = fmt.Errorf("read the file limit: %w", err)
		}
	}
	if err == nil {
		err = lim.fit(files.Cur)
	}
	if err != nil {
		return fmt.Errorf("refusing to start: %w", err)
	}
	if n := len(c.AcceptFrom); n*lim.connsPerCaller > lim.conns {
		// Each caller keeps its share only while the callers' caps together fit the total.
		log.Warn("per-caller shares not guaranteed: the callers' caps together exceed the connections in all; one caller may be refused while others hold theirs",
			"callers", n, "conns_per_caller", lim.connsPerCaller, "conns", lim.conns)
	}
	var tlsConf *tls.Config
	var record *audit.Writer
	if os.Getenv(mtls.EnvEndpointSocket) == "" {
		log.Warn("mTLS listener and audit log off: no SPIFFE Workload API ("+mtls.EnvEndpointSocket+" is unset)", "addr", cfg.mtlsListen)
	} else {
		src, err := mtls.Source(ctx) // set but unusable: stop (fail closed)
		if err != nil {
			return err
		}
		defer src.Close()
		tlsConf = mtls.ServerConfig(src, src, m, c.Name)
		if record, err = audit.OpenComponent(cfg.auditDir, src, c.Name, m.Hash); err != nil {
			return fmt.Errorf("refusing to start: %w", err)
		}
		defer record.Finish(log) // after the server's shutdown: the last decisions are in
	}
	plain, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		return err
	}
	defer plain.Close()
	var secure net.Listener
	if tlsConf != nil {
		if secure, err = net.Listen("tcp", cfg.mtlsListen); err != nil {
			return err
		}
	}
	// Rate buckets for everyone with an edge into net: only they get past edgeCaller and mTLS.
	// The resolver and the exempt addresses are a test world's, from the verified policy alone
	// (pbp.TestWorld): a production policy names neither, and the system's resolver is asked.
	resolver := ""
	if a, ok := m.TestWorld.ResolverAddr(); ok {
		resolver = a.String()
		log.Warn("UNSAFE: names resolve through the test world's DNS server (the policy's test_world.resolver); this is for an offline test world only", "resolver", resolver)
	}
	s := newServer(rules, c.AcceptFrom, edgeCaller(m, c.Name), resolve.New(resolver, lim.dns).Lookup, up, lim, log)
	s.audit = record
	if s.ask, err = approval.Open(cfg.gate, c.Name, m.Hash, rules, s.conns.Stop, log); err != nil {
		return fmt.Errorf("refusing to start: approval gate in %s: %w", cfg.gate.Dir, err)
	}
	// Exact addresses only (Load refused ranges and names): a test world's own containers.
	if addrs := m.TestWorld.Addrs(); len(addrs) > 0 {
		s.unsafeAllowAddrs = map[netip.Addr]bool{}
		for _, a := range addrs {
			s.unsafeAllowAddrs[a] = true
			log.Warn("UNSAFE: a special-range address is exempt from refusal (the policy's test_world.allow_addrs); this is for an offline test world only", "addr", a.String())
		}
	}
	log.Info("sharness-net serving", "policy", m.Hash, "listen", cfg.listen, "mtls", tlsConf != nil, "audit", record != nil, "gate_dir", cfg.gate.Dir)
	s.run(ctx, plain, secure, tlsConf, peerCaller(m))
	return nil
}

// edgeCaller names a plain connection's caller: the other member of the edge network its
// source address is on (each edge network has exactly two members, net and its caller).
func edgeCaller(m *pbp.Manifest, self string) func(netip.Addr) (string, bool) {
	return func(a netip.Addr) (string, bool) {
		e, ok := m.EdgeOf(a)
		return e.From, ok && e.To == self
	}
}

// retiredEnv are the variables that once set net's resolver and exempt addresses; the policy's
// test_world sets them now. net refuses to start with either set (to anything, even the policy's
// own value), rather than leave a person believing the variable did something.
var retiredEnv = []string{"SHARNESS_AI_NET_RESOLVER", "SHARNESS_AI_NET_UNSAFE_ALLOW_ADDR_FOR_TESTS"}

// retiredSwitches refuses a retired variable set in the environment, naming what takes its place.
func retiredSwitches(getenv func(string) string, m *pbp.Manifest) error {
	for _, name := range retiredEnv {
		if v := getenv(name); v != "" {
			where := "policy " + m.Hash + " has no test_world, so it is a production policy: net resolves through the system and exempts no address"
			if m.TestWorld != nil {
				where = "policy " + m.Hash + "'s test_world sets them"
			}
			return fmt.Errorf("refusing to start: %s is %q: net takes its resolver and exempt addresses from the verified policy alone (test_world.resolver, test_world.allow_addrs), and %s", name, v, where)
		}
	}
	return nil
}

// peerCaller names an mTLS connection's caller: the component whose SPIFFE ID its verified
// SVID carries.
func peerCaller(m *pbp.Manifest) callerFunc {
	return func(st *tls.ConnectionState) (string, error) {
		p, err := mtls.PeerComponent(m, *st)
		if err != nil {
			return "", err
		}
		return p.Name, nil
	}
}
