// Command sharness-world is the offline "outside world" of the SHarness demo and e2e suite: it
// stands on the egress network, next to net, and nothing it does leaves the machine.
//
// It serves DNS on :53 (UDP and TCP) for the *.sharness.test names (see newZone), HTTPS on :443
// and :8443 with the leaf the harness made for allowed.sharness.test and denied.sharness.test
// (testkit/worldca, internal/throwawayca), a bare git repository over "dumb HTTP"
// under /repo.git/, plain HTTP on :80 (GET /redirect sends the client to denied.sharness.test),
// and echo on :7 (UDP and TCP). Every DNS query, HTTP request and echo is one JSON line on
// stdout, so a test can prove what did or did not reach it (`docker compose logs world`).
//
// It is test infrastructure: it guarantees nothing about the stack, and its CA must never be
// trusted outside a test.
//
// Usage:
//
//	sharness-world          serve (the container's entrypoint)
//	sharness-world health   the healthcheck: DNS answers
//
// Environment: WORLD_ADDR (required), the IPv4 address allowed/denied.sharness.test resolve to,
// the world's own; WORLD_TLS_CERT and WORLD_TLS_KEY (required, PEM: the leaf with its chain
// ending in the throwaway CA, and its key); WORLD_REPO (/srv/repo.git); WORLD_EXTRA_HOSTS
// (optional), more names for the zone as comma-separated name=IPv4 pairs, such as
// "api.anthropic.com=10.214.0.11" to send the model path to the offline model.
//
// Exit codes: 0 stopped on a signal, or healthy; 1 failed, or unhealthy; 2 usage error.
package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/sharness-ai/sharness/internal/throwawayca"
)

type config struct {
	addr  netip.Addr      // what the zone answers for the test hosts
	extra zone            // WORLD_EXTRA_HOSTS
	cert  tls.Certificate // the HTTPS leaf
	repo  string
}

func main() {
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	cfg, err := configFrom(os.Getenv)
	if err != nil {
		log.Error("sharness-world refused to start", "error", err.Error())
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	switch {
	case len(os.Args) == 2 && os.Args[1] == "health":
		err = health(ctx, cfg)
	case len(os.Args) == 1:
		err = run(ctx, cfg, os.Stdout, log)
	default:
		fmt.Fprintln(os.Stderr, "usage: sharness-world [health]")
		os.Exit(2)
	}
	if err != nil {
		log.Error("sharness-world failed", "error", err.Error())
		os.Exit(1)
	}
}

func configFrom(getenv func(string) string) (config, error) {
	a, err := netip.ParseAddr(getenv("WORLD_ADDR"))
	if err != nil || !a.Is4() {
		return config{}, fmt.Errorf("WORLD_ADDR %q is not an IPv4 address (the address the world's names resolve to)", getenv("WORLD_ADDR"))
	}
	extra, err := parseHosts(getenv("WORLD_EXTRA_HOSTS"))
	if err != nil {
		return config{}, err
	}
	cert, _, err := throwawayca.Leaf(getenv("WORLD_TLS_CERT"), getenv("WORLD_TLS_KEY"), names, time.Now())
	if err != nil {
		return config{}, fmt.Errorf("WORLD_TLS_CERT, WORLD_TLS_KEY: %w (the harness makes them: testkit/worldca)", err)
	}
	return config{addr: a, extra: extra, cert: cert, repo: cmp.Or(getenv("WORLD_REPO"), "/srv/repo.git")}, nil
}

// run opens every listener, then serves them all until ctx ends or one fails.
func run(ctx context.Context, cfg config, stdout io.Writer, log *slog.Logger) error {
	ev, z := newEvents(stdout), newZone(cfg.addr)
	maps.Copy(z, cfg.extra)
	tlsConf := &tls.Config{Certificates: []tls.Certificate{cfg.cert}, MinVersion: tls.VersionTLS12}
	web := &http.Server{Handler: handler("", ev), ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	webTLS := &http.Server{Handler: handler(cfg.repo, ev), ReadHeaderTimeout: 10 * time.Second, ErrorLog: web.ErrorLog}
	serveTLS := func(c io.Closer) error {
		return ignoreClosed(ctx, webTLS.Serve(tls.NewListener(c.(net.Listener), tlsConf)))
	}
	services := []struct {
		network, addr string
		serve         func(io.Closer) error
	}{
		{"udp", ":53", func(c io.Closer) error { return servePackets(ctx, c.(net.PacketConn), dnsPacket(z, ev)) }},
		{"tcp", ":53", func(c io.Closer) error { return accept(ctx, c.(net.Listener), dnsConn(z, ev)) }},
		{"tcp", ":80", func(c io.Closer) error { return ignoreClosed(ctx, web.Serve(c.(net.Listener))) }},
		{"tcp", ":443", serveTLS},
		{"tcp", ":8443", serveTLS},
		{"tcp", ":7", func(c io.Closer) error { return accept(ctx, c.(net.Listener), echoConn(ev)) }},
		{"udp", ":7", func(c io.Closer) error { return servePackets(ctx, c.(net.PacketConn), echoPacket(ev)) }},
	}
	opened := make([]io.Closer, 0, len(services))
	closeAll := func() {
		for _, c := range opened {
			c.Close()
		}
	}
	for _, s := range services {
		var c io.Closer
		var err error
		if s.network == "udp" {
			c, err = net.ListenPacket(s.network, s.addr)
		} else {
			c, err = net.Listen(s.network, s.addr)
		}
		if err != nil {
			closeAll()
			return fmt.Errorf("listen %s %s: %w", s.network, s.addr, err)
		}
		opened = append(opened, c)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		<-ctx.Done()
		closeAll()
	}()
	log.Info("sharness-world serving", "addr", cfg.addr.String(), "extra_hosts", cfg.extra)
	errc := make(chan error, len(services))
	for i, s := range services {
		go func() { errc <- s.serve(opened[i]) }()
	}
	var first error
	for range services {
		if err := <-errc; err != nil && first == nil {
			first = err
			cancel()
		}
	}
	return first
}

// health succeeds once the DNS server answers for allowed.sharness.test with WORLD_ADDR: then
// every listener is up (run opens them together).
func health(ctx context.Context, cfg config) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	r := net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, "127.0.0.1:53")
	}}
	addrs, err := r.LookupNetIP(ctx, "ip4", names[0])
	if err != nil {
		return fmt.Errorf("unhealthy: resolve %s: %w", names[0], err)
	}
	if len(addrs) != 1 || addrs[0] != cfg.addr {
		return fmt.Errorf("unhealthy: %s resolves to %v, want %s", names[0], addrs, cfg.addr)
	}
	return nil
}
