// Command netbench measures net, the egress proxy, in one run on one machine against a direct
// connection (the loopback baseline), a minimal stdlib CONNECT proxy written here (the practical
// ceiling for a user-space proxy) and stripe/smokescreen, and reports every figure with its
// ratio to the stdlib proxy and to smokescreen (issue 3, "Benchmarks"). It is a measurement, not
// a test: nothing fails because the machine is slow.
//
// Figures: bulk throughput through one tunnel, twice: an HTTPS download (the ends' TLS work
// bounds it) and plain bytes after a TLS handshake (the proxy's own cost per byte shows);
// new-connection latency (CONNECT, TLS, a small GET) p50/p99 over sequential runs; requests
// per second with concurrent clients for HTTPS keep-alive (one tunnel per client), HTTPS with
// a new connection per request, and plain-HTTP absolute-URI forwarding with keep-alive to the
// proxy. Each goal's verdict is a sign test over paired rounds (report.go: order).
//
// Everything stays on loopback: the origin (a throwaway CA; HTTPS, plain HTTP and the raw
// port of the plain-bytes figure) and a DNS server that answers the origin's name with
// 127.0.0.1 run in this process; each proxy runs in its own process. net identifies a plain caller by source address, so every client socket is
// bound to an address of the agent's edge subnet, which hack/bench-net.sh adds to lo (root).
// hack/bench-net.sh builds the binaries and runs this; see it for usage.
//
// `netbench stdproxy` is the minimal stdlib proxy itself, run as a child on an inherited
// listener.
package main

import (
	"context"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"
)

type config struct {
	work        string // scratch folder: manifest, logs
	net         string // sharness-net as built from this repository
	netNoLimit  string // -rate-per-caller for a second net peer (diagnostic), or ""
	netVersion  string
	smokescreen string // stripe/smokescreen binary, or ""
	stdlibCopy  bool   // also run the stdlib proxy copying through user space (diagnostic)
	cli         string // sharness-ai, to lock and hash the bench's manifest
	src         netip.Addr
	out         string // JSON results file, or ""

	bulk       int64           // bytes per bulk transfer, TLS inside
	bulkRaw    int64           // bytes per bulk transfer, plain bytes
	n          int             // sequential new-connection samples
	clients    int             // concurrent clients for the requests/s figures
	dur        time.Duration   // length of one requests/s window
	rounds     int             // interleaved rounds of the latency and requests/s figures
	bulkRounds int             // interleaved bulk transfers per peer
	deadline   time.Duration   // the whole run
	figures    map[string]bool // the figures to measure (metric keys; "latency" for both percentiles)
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "stdproxy" {
		os.Exit(stdproxyMain(os.Args[2:]))
	}
	var cfg config
	var src, figures string
	flag.StringVar(&cfg.work, "work", "", "scratch folder (required)")
	flag.StringVar(&cfg.net, "net", "", "sharness-net binary (required)")
	flag.StringVar(&cfg.netNoLimit, "net-nolimit", "", "also run net with this -rate-per-caller (e.g. 1000000/1000000), its flood brake raised out of the way; empty skips this diagnostic peer")
	flag.StringVar(&cfg.netVersion, "net-version", "", "what the net binaries were built from, for the report")
	flag.StringVar(&cfg.smokescreen, "smokescreen", "", "smokescreen binary; empty skips smokescreen")
	flag.BoolVar(&cfg.stdlibCopy, "stdlib-copy", false, "also run the stdlib proxy with user-space copies instead of splice (diagnostic peer)")
	flag.StringVar(&cfg.cli, "cli", "", "sharness-ai binary (required)")
	flag.StringVar(&src, "src", "10.213.0.2", "client source address: must be local and in the agent's edge subnet")
	flag.StringVar(&cfg.out, "out", "", "write the results as JSON to this file")
	flag.Int64Var(&cfg.bulk, "bulk", 256<<20, "bytes per bulk transfer with TLS inside")
	flag.Int64Var(&cfg.bulkRaw, "bulk-raw", 1<<30, "bytes per bulk transfer of plain bytes")
	flag.IntVar(&cfg.n, "n", 1200, "sequential samples of new-connection latency")
	flag.IntVar(&cfg.clients, "clients", 32, "concurrent clients for requests/s")
	flag.DurationVar(&cfg.dur, "duration", 1500*time.Millisecond, "length of one requests/s window")
	flag.IntVar(&cfg.rounds, "rounds", 6, "interleaved rounds of the latency and requests/s figures (median reported; six or more can settle an order)")
	flag.IntVar(&cfg.bulkRounds, "bulk-rounds", 7, "interleaved bulk transfers per peer and bulk figure (median reported)")
	flag.DurationVar(&cfg.deadline, "deadline", 300*time.Second, "stop measuring after this long, whatever is left")
	flag.StringVar(&figures, "figures", "bulk,bulk_raw,latency,rps_keepalive,rps_newconn,rps_plain", "comma-separated figures to measure (to iterate on one; a full run measures all)")
	flag.Parse()
	cfg.figures = map[string]bool{}
	known := true
	for _, f := range strings.Split(figures, ",") {
		f = strings.TrimSpace(f)
		cfg.figures[f] = true
		known = known && (f == "latency" || slices.ContainsFunc(metrics, func(m metric) bool { return m.Key == f && !strings.HasPrefix(f, "latency") }))
	}
	a, err := netip.ParseAddr(src)
	if err != nil || !known || cfg.work == "" || cfg.net == "" || cfg.cli == "" || cfg.rounds < 1 || cfg.bulkRounds < 1 || cfg.bulk < 1 || cfg.bulkRaw < 1 || cfg.n < 1 || cfg.clients < 1 {
		fmt.Fprintln(os.Stderr, "netbench: bad flags; run it through hack/bench-net.sh")
		os.Exit(2)
	}
	cfg.src = a
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "netbench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, cfg config) error {
	ctx, cancel := context.WithTimeout(ctx, cfg.deadline)
	defer cancel()
	w, err := startWorld("origin.sharness.test")
	if err != nil {
		return err
	}
	defer w.close()
	peers, err := startPeers(ctx, cfg, w)
	defer func() {
		for _, p := range peers {
			p.stop()
		}
	}()
	if err != nil {
		return err
	}
	cl := newClient(w, cfg.src)
	for _, p := range peers { // each must carry one request before anything is timed
		if err := cl.newConnGet(ctx, p); err != nil {
			return fmt.Errorf("peer %s cannot carry a request: %w%s", p.name, err, p.logTail())
		}
	}
	start := time.Now()
	res := measure(ctx, cfg, cl, peers)
	for _, p := range peers {
		p.stop()
	}
	rep := buildReport(cfg, peers, res, time.Since(start))
	rep.print(os.Stdout)
	if cfg.out != "" {
		if err := rep.write(cfg.out); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "netbench: results in %s\n", cfg.out)
	}
	if ctx.Err() != nil {
		return fmt.Errorf("stopped before the end (-deadline %s, or a signal): the figures above are partial", cfg.deadline)
	}
	return nil
}
