package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/netip"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/sharness-ai/sharness/testkit/sidedoor"
)

type door = sidedoor.Door

// edgePool is pbp.EdgePool: every edge network of the stack is one /24 of it.
var edgePool = netip.MustParsePrefix("10.213.0.0/16")

func networkDoors(cfg config) []door {
	const unreachable6 = sidedoor.Walled + "|EADDRNOTAVAIL|EAFNOSUPPORT"
	ds := []door{
		sidedoor.DialDoor("direct-tcp/world", "tcp", cfg.worldPort(7), sidedoor.Walled, "a TCP path to the outside that bypasses net"),
		sidedoor.DialDoor("direct-udp/world", "udp", cfg.worldPort(7), sidedoor.Unreachable, "a UDP path to the outside that bypasses net"),
		sidedoor.DialDoor("ipv6/literal", "tcp", "[2001:db8::1]:443", unreachable6, "an IPv6 path around net"),
		sidedoor.DialDoor("ipv6/world-by-name", "tcp6", "allowed.sharness.test:443", unreachable6+"|no-such-host|dns-failure|dns-timeout",
			"an IPv6 path to the world by name"),
		{Name: "other-components/edge-subnets", Expected: "unreachable", Limit: 8 * time.Second, Try: scanEdges,
			Why: "net on another component's edge, or kms, reached through an edge subnet the agent is not on"},
		lookup("launcher"), lookup("kms"), lookup("world"),
		{Name: "other-components/net-mtls-without-svid", Expected: "tls-refused|ECONNREFUSED|no-such-host|dns-failure|dns-timeout", Try: netMTLS,
			Why: "net's mTLS listener serving a caller without an SVID"},
	}
	if len(cfg.hostAddrs) == 0 {
		ds = append(ds, sidedoor.DialDoor("host-service/none-configured", "tcp", "", sidedoor.Unreachable, "services on the Docker host (none configured)"))
	}
	for _, a := range cfg.hostAddrs {
		ds = append(ds, sidedoor.DialDoor("host-service/"+a.String(), "tcp", a.String(), sidedoor.Walled, "a service on the Docker host reached around net"))
	}
	return append(ds, dnsDoors(cfg)...)
}

// lookup resolves a component that is on none of the agent's edges: Docker's resolver must
// not know it, and nothing beyond it may answer.
func lookup(name string) door {
	return door{Name: "other-components/" + name + "-by-name", Expected: "no-such-host|dns-failure|dns-timeout",
		Why: "a component off the agent's edges, found by name", Try: func(ctx context.Context) (string, string) {
			addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", name)
			if err != nil {
				return sidedoor.Kind(err), ""
			}
			return "resolved", fmt.Sprint(addrs)
		}}
}

// netMTLS connects to net's mTLS port without a client certificate and asks for its metrics.
func netMTLS(ctx context.Context) (string, string) {
	d := net.Dialer{Timeout: sidedoor.NetTimeout}
	c, err := d.DialContext(ctx, "tcp", "net:3129")
	if err != nil {
		return sidedoor.Kind(err), ""
	}
	defer c.Close()
	c.SetDeadline(sidedoor.Deadline(ctx))
	tc := tls.Client(c, &tls.Config{ServerName: "net", InsecureSkipVerify: true}) // the refusal is what counts
	_, err = tc.Write([]byte("GET /metrics HTTP/1.1\r\nHost: net\r\n\r\n"))       // handshakes first
	if err == nil {
		_, err = tc.Read(make([]byte, 1))
	}
	switch k := sidedoor.Kind(err); k {
	case "ok":
		return "served", "net answered a caller without an SVID"
	case "timeout":
		return "no refusal", "the server kept the connection open"
	}
	return "tls-refused", err.Error()
}

func scanEdges(ctx context.Context) (string, string) {
	var own []netip.Addr
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil {
			own = append(own, p.Addr())
		}
	}
	return sidedoor.Scan(ctx, sidedoor.EdgeTargets(edgePool, own, 3129, 8443))
}

// tunnelZone is where the tunnel burst's labels go; the world logs every query for it.
const tunnelZone = "t.sharness.test"

func dnsDoors(cfg config) []door {
	ask := func(name, host string) door {
		return door{Name: name, Expected: sidedoor.NoAnswer, Why: "resolving outside names: a lookup is already a message out",
			Try: func(ctx context.Context) (string, string) {
				got, err := sidedoor.Ask(ctx, cfg.resolver, host, dnsmessage.TypeA)
				if err != nil {
					return sidedoor.Kind(err), cfg.resolver
				}
				return got, cfg.resolver
			}}
	}
	return []door{
		ask("dns-lookup/allowed-name", "allowed.sharness.test"),
		ask("dns-lookup/random-name", "r"+token(6)+".sharness.test"),
		{Name: "dns-tunnel/txt-burst", Expected: "no answer", Why: "data carried out in DNS labels (20 TXT queries)",
			Try: func(ctx context.Context) (string, string) { return sidedoor.Tunnel(ctx, cfg.resolver, tunnelZone, 20) }},
	}
}
