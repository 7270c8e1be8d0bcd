package main

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"strconv"

	"github.com/sharness-ai/sharness/images/net/egress"
	"github.com/sharness-ai/sharness/images/net/relay"
)

// connect serves CONNECT host:port: decide, resolve once, refuse if any address is special,
// dial the one address it checked, then let relay.Tunnel answer 200 and splice only if the
// ClientHello names the host.
func (s *server) connect(c net.Conn, br *bufio.Reader, req *http.Request, rec *record) {
	host, port, ok := s.check(c, req.RequestURI, rec)
	if !ok {
		return
	}
	select {
	case s.slots <- struct{}{}:
		defer func() { <-s.slots }()
	default:
		s.refuse(c, rec, egress.Deny(egress.RuleTunnelLimit, ""))
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.lim.dialTimeout)
	defer cancel()
	addr, ok := s.resolve(ctx, c, host, rec)
	if !ok {
		return
	}
	up, err := relay.Dial(ctx, s.dial, s.upstream, netip.AddrPortFrom(addr, port), net.JoinHostPort(host.String(), strconv.Itoa(int(port))))
	if err != nil {
		s.fail(c, rec, s.failKind, err)
		return
	}
	defer up.Close()
	var refusal *egress.Decision
	rec.out, rec.in, refusal = relay.Tunnel(c, br, up, host, s.lim.Limits, s.conns.Stop)
	if refusal != nil {
		rec.d = *refusal
	}
}

// check parses authority (host:port), records it and decides, asking the operator about an ask
// host; on refusal it answers.
func (s *server) check(c net.Conn, authority string, rec *record) (egress.Host, uint16, bool) {
	rec.host = authority[:min(len(authority), 255)]
	host, port, err := egress.ParseAuthority(authority)
	d := egress.Refused(err)
	if err == nil {
		rec.host, rec.port = host.String(), port
		d = egress.Decide(s.rules, rec.caller, host, port)
	}
	if d.Ask { // an ask host: the operator decides, then every other check runs as for an allow
		d = s.ask.Decide(rec.caller, host, port)
	}
	if !d.Allow {
		s.refuse(c, rec, d)
	}
	rec.d = d
	return host, port, d.Allow
}

var errNoAddress = errors.New("no address")

// resolve looks host up (resolve.Cache keeps answers for their TTL) and checks every address
// on every request, cached or not (egress.Pick). It returns the one address to dial.
func (s *server) resolve(ctx context.Context, c net.Conn, host egress.Host, rec *record) (netip.Addr, bool) {
	addrs, err := s.lookup(ctx, host.String())
	if err != nil || len(addrs) == 0 {
		s.fail(c, rec, "dns", cmp.Or(err, errNoAddress))
		return netip.Addr{}, false
	}
	addr, d := egress.Pick(addrs, func(a netip.Addr) bool {
		return s.unsafeAllowLoopbackForTests && a.IsLoopback() || s.unsafeAllowAddrs[a]
	})
	if !d.Allow {
		s.refuse(c, rec, d)
	}
	return addr, d.Allow
}
