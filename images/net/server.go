package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"time"

	"golang.org/x/time/rate"

	"github.com/sharness-ai/sharness/images/net/approval"
	"github.com/sharness-ai/sharness/images/net/egress"
	"github.com/sharness-ai/sharness/images/net/metrics"
	"github.com/sharness-ai/sharness/images/net/relay"
	"github.com/sharness-ai/sharness/images/net/resolve"
	"github.com/sharness-ai/sharness/internal/audit"
)

// callerFunc names the caller of an mTLS connection from its verified state.
type callerFunc func(*tls.ConnectionState) (string, error)

// limits bound what one caller or one connection can hold.
type limits struct {
	relay.Limits
	conns          int // open client connections in all, whatever they carry: -conns
	connsPerCaller int // open client connections of one caller: -conns-per-caller
	tunnels        int // concurrent CONNECT tunnels, a part of conns
	idlePool       int // idle upstream connections kept for plain HTTP, in all
	refusing       int // connections refused at the caps that are being answered
	dns            resolve.Limits
	brake          relay.Brake   // requests per caller: -rate-per-caller
	dialTimeout    time.Duration // resolution plus the TCP connect
	grace          time.Duration // on shutdown, for requests in flight
	maxBody        int64         // forwarded request body, bytes
}

// refuseLinger bounds how long a refusal at the caps holds its answering slot. A caller that
// reads the answer and closes ends it sooner; under a flood the callers are slow to: the soak
// (docs/load.md) answered 24 % of its refusals at the caps with 32 slots lingering up to a
// second, 53 % with 64 slots (lim.refusing) at 250 ms.
const refuseLinger = 250 * time.Millisecond

// defaultLimits: the per-caller rate is a flood brake, not a throttle: a package install makes
// hundreds of requests a second, and a benchmark at 50/s showed it capping real work (hack/bench).
// The connection caps fit net's file limit (4096, policies/compile Files): 384 connections hold
// up to 768 descriptors, and as tunnels 1,536 more for their pipes; limits.files counts the rest
// (2,528 in all). A caller may hold a third of the connections: the default policy has three
// callers (the agent, llm, bash), so each keeps its share whatever the other two hold. Every
// connection may be a tunnel: with 256 tunnel slots the agent's 128 and its bash sandboxes' 128
// took them all, and llm got tunnel-limit (issue 22's attack on the running stack).
var defaultLimits = limits{
	Limits: relay.Limits{Header: 10 * time.Second, KeepAlive: 90 * time.Second, Idle: 5 * time.Minute,
		Lifetime: 2 * time.Hour, MaxHeader: 16 << 10},
	conns: 384, connsPerCaller: 128, tunnels: 384, idlePool: 64, refusing: 64, dns: resolve.DefaultLimits,
	brake: relay.Brake{Rate: 2000, Burst: 4000}, dialTimeout: 10 * time.Second, grace: 8 * time.Second, maxBody: 64 << 20,
}

// server is the egress proxy. Everything it refuses is answered and logged; nothing it is
// sent can make it follow a redirect, resolve a checked name again, or dial a special address.
type server struct {
	rules    *egress.Rules
	edge     func(netip.Addr) (string, bool)                     // a plain connection's caller, by source address
	lookup   func(context.Context, string) ([]netip.Addr, error) // bounds its own time (resolve.Cache)
	dial     func(ctx context.Context, network, addr string) (net.Conn, error)
	upstream *url.URL // a proxy to chain through, or nil
	failKind string   // what a failed dial is called: "dial" or "upstream-proxy"
	lim      limits
	log      *slog.Logger
	met      *metrics.Set
	audit    *audit.Writer   // nil without a Workload API: see audit.Writer.Record
	ask      *approval.Asker // asks the operator about ask hosts; nil refuses them (approval_unavailable)
	tr       *http.Transport
	slots    chan struct{}            // one per open tunnel
	caps     *caps                    // every open client connection, per caller and in all
	refusing chan struct{}            // one per connection refused at the caps being answered
	buckets  map[string]*rate.Limiter // per caller, read-only
	conns    *relay.Conns

	// unsafeAllowLoopbackForTests lets tests reach httptest servers on 127.0.0.1. No flag or
	// variable reaches it.
	unsafeAllowLoopbackForTests bool
	// unsafeAllowAddrs are the special-range addresses an offline test world may use
	// (the verified policy's test_world.allow_addrs): the demo and e2e world and its offline
	// model live on private addresses. Every other special address stays refused; net logs a
	// warning per address at start.
	unsafeAllowAddrs map[netip.Addr]bool
}

func newServer(rules *egress.Rules, callers []string, edge func(netip.Addr) (string, bool), lookup func(context.Context, string) ([]netip.Addr, error), upstream *url.URL, lim limits, log *slog.Logger) *server {
	s := &server{rules: rules, edge: edge, lookup: lookup, upstream: upstream, failKind: "dial", lim: lim, log: log,
		slots: make(chan struct{}, lim.tunnels), caps: newCaps(lim.conns, lim.connsPerCaller), refusing: make(chan struct{}, lim.refusing),
		buckets: map[string]*rate.Limiter{}, conns: relay.NewConns()}
	for _, c := range callers {
		s.buckets[c] = lim.brake.Limiter()
	}
	s.met = metrics.New(func() int { return len(s.slots) }, s.caps.held)
	s.dial = (&net.Dialer{Timeout: lim.dialTimeout}).DialContext
	// MaxIdleConns bounds the pool in all (limits.files counts it): without it, only per host.
	s.tr = &http.Transport{DialContext: relay.CheckedDialer(s.dial, upstream, lim.Idle), DisableCompression: true,
		MaxIdleConns: lim.idlePool, MaxIdleConnsPerHost: min(64, lim.idlePool),
		IdleConnTimeout: lim.KeepAlive, ResponseHeaderTimeout: lim.Idle, MaxResponseHeaderBytes: 64 << 10}
	if upstream != nil {
		s.tr.Proxy, s.failKind = http.ProxyURL(upstream), "upstream-proxy"
	}
	return s
}

// run serves plain (edge callers) and, when given, secure (mTLS callers) until ctx ends, then
// shuts down gracefully.
func (s *server) run(ctx context.Context, plain, secure net.Listener, tlsConf *tls.Config, callerOf callerFunc) {
	lns := []net.Listener{plain}
	if secure != nil {
		lns = append(lns, secure)
		tlsConf = tlsConf.Clone()
		tlsConf.NextProtos = []string{"http/1.1"} // CONNECT needs the raw stream: no HTTP/2
	}
	s.conns.Run(ctx, lns, func(i int, c net.Conn) { s.serveConn(c, i == 1, tlsConf, callerOf) },
		func(err error) { s.log.Warn("accept", "error", err.Error()) }, s.lim.grace)
	s.tr.CloseIdleConnections()
}

// serveConn names the caller of one connection (on the mTLS listener when secure) and serves
// its requests.
func (s *server) serveConn(raw net.Conn, secure bool, tlsConf *tls.Config, callerOf callerFunc) {
	c, caller, known := raw, "", false
	if ap, err := netip.ParseAddrPort(raw.RemoteAddr().String()); err == nil {
		caller, known = s.edge(ap.Addr().Unmap())
	}
	// An mTLS connection is known only by its handshake, but until then it counts as the
	// caller of the edge network it came from (or as unnamed, "", from none): counted as ""
	// by all, the agent, which may connect to the mTLS port, filled the unnamed callers' cap
	// with connections that never sent a handshake, and llm's next connection was refused
	// before its own (an attack on the running stack, TestConnLimitMTLSHandshakes).
	if secure {
		known = false
	}
	if why := s.caps.take(caller); why != "" {
		s.refuseConn(c, caller, !secure, why)
		return
	}
	defer func() { s.caps.give(caller) }() // after the close below: the descriptor is free then
	defer func() { relay.Linger(c, time.Second); c.Close() }()
	if secure {
		tc := tls.Server(raw, tlsConf)
		raw.SetDeadline(time.Now().Add(s.lim.Header))
		if err := tc.Handshake(); err != nil {
			s.record(&record{start: time.Now(), d: egress.Deny(egress.RuleTLSHandshake, err.Error())})
			return
		}
		raw.SetDeadline(time.Time{})
		st := tc.ConnectionState()
		name, err := callerOf(&st)
		c, known = tc, err == nil
		if why := s.caps.rename(caller, name); why != "" {
			s.refuseConn(c, name, true, why)
			return
		}
		caller = name
	}
	s.conns.Loop(raw, c, s.lim.Limits, func(br *bufio.Reader, req *http.Request, _ int, d egress.Decision) bool {
		rec, keep := &record{caller: caller, start: time.Now()}, false
		if req == nil {
			s.refuse(c, rec, d)
		} else {
			rec.method, keep = req.Method, s.handle(c, br, req, rec, known, secure)
		}
		s.record(rec)
		return keep
	})
}

// handle serves one request and reports whether the connection may carry another.
func (s *server) handle(c net.Conn, br *bufio.Reader, req *http.Request, rec *record, known, secure bool) bool {
	switch b := s.buckets[rec.caller]; {
	case secure && req.Method == http.MethodGet && req.URL.Path == "/metrics" && !req.URL.IsAbs():
		rec.skip = true
		s.met.Serve(c, s.lim.Header)
	case !known:
		s.refuse(c, rec, egress.Deny(egress.RuleNoCaller, ""))
	case s.audit.Err() != nil: // no decision that cannot be recorded (issue 22)
		s.refuse(c, rec, egress.Deny(egress.RuleAudit, ""))
	case b != nil && !b.Allow():
		s.refuse(c, rec, egress.Deny(egress.RuleRateLimit, ""))
	case req.Method == http.MethodConnect:
		s.connect(c, br, req, rec)
	case req.URL.IsAbs():
		return s.forward(c, req, rec)
	default:
		s.refuse(c, rec, egress.Deny(egress.RuleNotProxy, ""))
	}
	return false
}

// record is one decision and its outcome: the canonical log line.
type record struct {
	caller, host, method string
	port                 uint16
	d                    egress.Decision
	failure              string // the X-Sharness-Error kind, when an allowed request failed
	in, out              int64  // bytes to the caller, bytes from the caller
	start                time.Time
	skip                 bool
}

func (s *server) record(r *record) {
	if r.skip {
		return
	}
	s.log.LogAttrs(context.Background(), slog.LevelInfo, "decision",
		slog.String("caller", r.caller), slog.String("host", r.host), slog.Int("port", int(r.port)),
		slog.Bool("allow", r.d.Allow), slog.String("rule", r.d.Rule), slog.String("reason", r.d.Reason),
		slog.String("error", r.failure), slog.Int64("bytes_in", r.in), slog.Int64("bytes_out", r.out),
		slog.Int64("duration_ms", time.Since(r.start).Milliseconds()))
	s.met.Observe(r.caller, r.d.Allow, r.d.Rule, r.in, r.out)
	s.audit.Record(s.log, r.event())
}

// event is the record as its audit line: what was asked, by whom, where to, the verdict and its
// rule and reason. The host is the caller's words: Record clips it to the format.
func (r *record) event() audit.Event {
	e := audit.Event{Action: "egress", Decision: "deny", Reason: r.d.Reason, Caller: r.caller, Destination: r.host,
		Fields: map[string]string{"rule": r.d.Rule, "method": r.method, "bytes_in": strconv.FormatInt(r.in, 10), "bytes_out": strconv.FormatInt(r.out, 10)}}
	if r.d.Allow {
		e.Decision = "allow"
	}
	if r.port != 0 {
		e.Destination = net.JoinHostPort(r.host, strconv.Itoa(int(r.port)))
	}
	if r.failure != "" {
		e.Fields["error"] = r.failure
	}
	return e
}

// refuse answers a refusal: its rule's status (egress.Status), X-Sharness-Deny naming the rule,
// a one-line body.
func (s *server) refuse(c net.Conn, r *record, d egress.Decision) {
	r.d = d
	relay.Reply(c, s.lim.Header, egress.Status(d.Rule), "X-Sharness-Deny", d.Rule, fmt.Sprintf("sharness net refused this request: rule %s: %s\n", d.Rule, d.Reason))
}

// refuseConn refuses a connection over the caps (egress.RuleConnLimit), answered when answer
// (not before an mTLS handshake, which speaks no HTTP yet). Answering lingers for up to
// refuseLinger (what the caller sent before the answer is read meanwhile, so the close is a
// FIN, not a reset that could destroy the answer), so at most lim.refusing refusals are
// answered at once; the others are closed at once, and logged all the same.
func (s *server) refuseConn(c net.Conn, caller string, answer bool, why string) {
	rec := &record{caller: caller, start: time.Now(), d: egress.Deny(egress.RuleConnLimit, why)}
	select {
	case s.refusing <- struct{}{}:
		if answer {
			s.refuse(c, rec, rec.d)
		}
		relay.Linger(c, refuseLinger)
		<-s.refusing
	default:
	}
	c.Close()
	s.record(rec)
}

// fail answers an upstream failure of an allowed request: 502 and X-Sharness-Error.
func (s *server) fail(c net.Conn, r *record, kind string, err error) {
	r.failure, r.d.Reason = kind, err.Error()
	relay.Reply(c, s.lim.Header, http.StatusBadGateway, "X-Sharness-Error", kind, fmt.Sprintf("sharness net could not reach the destination: %s\n", kind))
}
