package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// zoneTTL is short: the world lives as long as one e2e run.
const zoneTTL = 5

// zone maps a lower-case name without its trailing dot to its one A record.
type zone map[string]netip.Addr

// newZone is the world's zone: the two test hosts at its own address, and three names that
// resolve into special-purpose ranges, which net must refuse after resolving (docs/pitfalls.md, "Addresses and names").
func newZone(self netip.Addr) zone {
	return zone{
		"allowed.sharness.test":  self,
		"denied.sharness.test":   self,
		"private.sharness.test":  netip.MustParseAddr("10.0.0.1"),
		"metadata.sharness.test": netip.MustParseAddr("169.254.169.254"),
		"loopback.sharness.test": netip.MustParseAddr("127.0.0.1"),
	}
}

// parseHosts reads WORLD_EXTRA_HOSTS: comma-separated name=IPv4 pairs the zone answers besides
// its own names. Names are DNS names without the trailing dot, folded to lower case; each may
// appear once, none may replace one of the world's own, and nothing is trimmed or guessed.
func parseHosts(s string) (zone, error) {
	z := zone{}
	if s == "" {
		return z, nil
	}
	for _, pair := range strings.Split(s, ",") {
		name, addr, ok := strings.Cut(pair, "=")
		name = strings.ToLower(name)
		a, err := netip.ParseAddr(addr)
		switch _, own := newZone(netip.Addr{})[name]; {
		case !ok:
			return nil, fmt.Errorf("WORLD_EXTRA_HOSTS: %q is not name=address", pair)
		case !isName(name):
			return nil, fmt.Errorf("WORLD_EXTRA_HOSTS: %q is not a DNS name (letters, digits and inner hyphens; no trailing dot)", name)
		case err != nil || !a.Is4():
			return nil, fmt.Errorf("WORLD_EXTRA_HOSTS: %s=%q: the address is not IPv4 (the zone serves A records only)", name, addr)
		case own:
			return nil, fmt.Errorf("WORLD_EXTRA_HOSTS: %s is one of the world's own names", name)
		case z[name].IsValid():
			return nil, fmt.Errorf("WORLD_EXTRA_HOSTS: %s is given twice", name)
		}
		z[name] = a
	}
	return z, nil
}

// isName reports whether s is a host name of RFC 1123 §2.1 in lower case: labels of 1 to 63
// letters, digits and hyphens, no hyphen at either end, 253 bytes at most.
func isName(s string) bool {
	if len(s) > 253 {
		return false
	}
	for _, l := range strings.Split(s, ".") {
		if len(l) == 0 || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' || strings.Trim(l, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" {
			return false
		}
	}
	return true
}

// answer builds the reply to one DNS message (RFC 1035 §4) and says what was asked and how it
// was answered. ok is false when msg has no
// readable header or is itself a response: such a message is dropped unanswered. The parser is
// golang.org/x/net/dns/dnsmessage, which the module already requires.
func (z zone) answer(msg []byte) (reply []byte, q dnsEvent, ok bool) {
	var p dnsmessage.Parser
	h, err := p.Start(msg)
	if err != nil || h.Response {
		return nil, dnsEvent{}, false
	}
	rh := dnsmessage.Header{ID: h.ID, Response: true, OpCode: h.OpCode, Authoritative: true,
		RecursionDesired: h.RecursionDesired}
	dq, err := p.Question()
	switch {
	case err != nil:
		rh.RCode = dnsmessage.RCodeFormatError
	case h.OpCode != 0:
		rh.RCode = dnsmessage.RCodeNotImplemented
	}
	b := dnsmessage.NewBuilder(nil, rh)
	b.EnableCompression()
	if err != nil {
		out, err := b.Finish()
		return out, dnsEvent{RCode: rcodeName(rh.RCode)}, err == nil
	}
	q = dnsEvent{Query: strings.ToLower(strings.TrimSuffix(dq.Name.String(), ".")),
		QType: strings.TrimPrefix(dq.Type.String(), "Type")}
	addr, known := z[q.Query]
	if rh.RCode == dnsmessage.RCodeSuccess && !known {
		rh.RCode = dnsmessage.RCodeNameError
	}
	q.RCode = rcodeName(rh.RCode)
	b = dnsmessage.NewBuilder(nil, rh)
	b.EnableCompression()
	b.StartQuestions()
	b.Question(dq)
	b.StartAnswers()
	if rh.RCode == dnsmessage.RCodeSuccess && (dq.Type == dnsmessage.TypeA || dq.Type == dnsmessage.TypeALL) {
		err = b.AResource(dnsmessage.ResourceHeader{Name: dq.Name, Class: dnsmessage.ClassINET, TTL: zoneTTL},
			dnsmessage.AResource{A: addr.As4()})
	}
	if err != nil {
		return nil, q, false
	}
	out, err := b.Finish()
	return out, q, err == nil
}

// rcodeName is the conventional mnemonic (RFC 6895 §2.3) of the codes answer uses.
func rcodeName(c dnsmessage.RCode) string {
	return map[dnsmessage.RCode]string{0: "NOERROR", 1: "FORMERR", 3: "NXDOMAIN", 4: "NOTIMP"}[c]
}

// dnsPacket answers one datagram; dnsConn answers length-prefixed messages on one connection
// (RFC 1035 §4.2.2). Both log every query.
func dnsPacket(z zone, ev *events) func([]byte, net.Addr) []byte {
	return func(msg []byte, from net.Addr) []byte {
		reply, q, ok := z.answer(msg)
		q.From, q.Proto = hostOf(from.String()), "udp"
		ev.log(q)
		if !ok {
			return nil
		}
		return reply
	}
}

func dnsConn(z zone, ev *events) func(net.Conn) {
	return func(c net.Conn) {
		for {
			c.SetDeadline(time.Now().Add(10 * time.Second))
			var n uint16
			if binary.Read(c, binary.BigEndian, &n) != nil {
				return
			}
			msg := make([]byte, n)
			if _, err := io.ReadFull(c, msg); err != nil {
				return
			}
			reply, q, ok := z.answer(msg)
			q.From, q.Proto = hostOf(c.RemoteAddr().String()), "tcp"
			ev.log(q)
			if !ok || binary.Write(c, binary.BigEndian, uint16(len(reply))) != nil {
				return
			}
			if _, err := c.Write(reply); err != nil {
				return
			}
		}
	}
}

// servePackets answers each datagram on pc with what reply returns (nothing for nil).
func servePackets(ctx context.Context, pc net.PacketConn, reply func([]byte, net.Addr) []byte) error {
	buf := make([]byte, 65535)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			return ignoreClosed(ctx, err)
		}
		if out := reply(buf[:n], from); out != nil {
			pc.WriteTo(out, from) // a lost reply is the client's retry to make
		}
	}
}

// accept serves each connection of l in its own goroutine until ctx ends.
func accept(ctx context.Context, l net.Listener, serve func(net.Conn)) error {
	for {
		c, err := l.Accept()
		if err != nil {
			return ignoreClosed(ctx, err)
		}
		go func() {
			defer c.Close()
			serve(c)
		}()
	}
}

// ignoreClosed turns the error of a listener closed on shutdown into nil.
func ignoreClosed(ctx context.Context, err error) error {
	if ctx.Err() != nil && errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}
