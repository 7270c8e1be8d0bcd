package resolve

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// zone is what the fake DNS server answers for one name.
type zone struct {
	a       []netip.Addr
	ttl     uint32
	cname   string     // answer with a CNAME (TTL 15) to this name, which has a and ttl
	soa     *[2]uint32 // a negative AAAA answer carries a SOA with this TTL and MINIMUM
	tcpOnly bool       // over UDP, answer truncated and empty
}

// answer builds the response to q.
func (z zone) answer(h dnsmessage.Header, q dnsmessage.Question, udp bool) []byte {
	rh := dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionAvailable: true}
	if udp && z.tcpOnly {
		rh.Truncated = true
	}
	b := dnsmessage.NewBuilder(nil, rh)
	b.EnableCompression()
	b.StartQuestions()
	b.Question(q)
	b.StartAnswers()
	name := q.Name
	if !rh.Truncated && z.cname != "" {
		target := dnsmessage.MustNewName(z.cname)
		b.CNAMEResource(dnsmessage.ResourceHeader{Name: name, Class: dnsmessage.ClassINET, TTL: 15}, dnsmessage.CNAMEResource{CNAME: target})
		name = target
	}
	hasA := false
	for _, a := range z.a {
		if !rh.Truncated && q.Type == dnsmessage.TypeA && a.Is4() {
			b.AResource(dnsmessage.ResourceHeader{Name: name, Class: dnsmessage.ClassINET, TTL: z.ttl}, dnsmessage.AResource{A: a.As4()})
			hasA = true
		}
	}
	b.StartAuthorities()
	if !rh.Truncated && !hasA && z.soa != nil {
		b.SOAResource(dnsmessage.ResourceHeader{Name: dnsmessage.MustNewName("test."), Class: dnsmessage.ClassINET, TTL: z.soa[0]},
			dnsmessage.SOAResource{NS: dnsmessage.MustNewName("ns.test."), MBox: dnsmessage.MustNewName("root.test."), MinTTL: z.soa[1]})
	}
	msg, _ := b.Finish()
	return msg
}

// fakeDNS serves zones over UDP and TCP on one port and returns its address.
func fakeDNS(t *testing.T, zones map[string]zone) string {
	t.Helper()
	var pc net.PacketConn
	var ln net.Listener
	for i := 0; pc == nil; i++ { // a free UDP port whose TCP twin is free too
		u, err := net.ListenPacket("udp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		if ln, err = net.Listen("tcp4", u.LocalAddr().String()); err == nil {
			pc = u
		} else if u.Close(); i == 20 {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { pc.Close(); ln.Close() })
	answer := func(msg []byte, udp bool) []byte {
		var p dnsmessage.Parser
		h, err := p.Start(msg)
		if err != nil {
			return nil
		}
		q, err := p.Question()
		if err != nil {
			return nil
		}
		z, ok := zones[strings.TrimSuffix(q.Name.String(), ".")]
		if !ok {
			b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RCode: dnsmessage.RCodeNameError})
			b.StartQuestions()
			b.Question(q)
			m, _ := b.Finish()
			return m
		}
		return z.answer(h, q, udp)
	}
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if m := answer(buf[:n], true); m != nil {
				pc.WriteTo(m, from)
			}
		}
	}()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				for {
					var l [2]byte
					if _, err := io.ReadFull(c, l[:]); err != nil {
						return
					}
					msg := make([]byte, binary.BigEndian.Uint16(l[:]))
					if _, err := io.ReadFull(c, msg); err != nil {
						return
					}
					m := answer(msg, false)
					c.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(m))), m...))
				}
			}()
		}
	}()
	return pc.LocalAddr().String()
}

// TestGoLookupTTL: the TTL is the lowest among the answers Go's resolver accepted, over UDP
// and TCP, with a CNAME chain, and with the SOA of a negative answer.
func TestGoLookupTTL(t *testing.T) {
	one := []netip.Addr{addr("192.0.2.1")}
	server := fakeDNS(t, map[string]zone{
		"a.test":       {a: one, ttl: 42},
		"soa.test":     {a: one, ttl: 300, soa: &[2]uint32{60, 30}},
		"soattl.test":  {a: one, ttl: 300, soa: &[2]uint32{20, 30}},
		"tcp.test":     {a: one, ttl: 77, tcpOnly: true},
		"cname.test":   {a: one, ttl: 100, cname: "target.test."},
		"long.test":    {a: one, ttl: 86400},
		"target.test":  {a: one, ttl: 100},
		"twoaddr.test": {a: []netip.Addr{addr("192.0.2.1"), addr("192.0.2.2")}, ttl: 9},
	})
	lookup := goLookup(server)
	for _, tc := range []struct {
		host  string
		addrs int
		ttl   time.Duration
	}{
		{"a.test", 1, 42 * time.Second},
		{"soa.test", 1, 30 * time.Second},
		{"soattl.test", 1, 20 * time.Second},
		{"tcp.test", 1, 77 * time.Second},
		{"cname.test", 1, 15 * time.Second},
		{"long.test", 1, 86400 * time.Second}, // the cache clamps it, not the lookup
		{"twoaddr.test", 2, 9 * time.Second},
	} {
		t.Run(tc.host, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			addrs, ttl, err := lookup(ctx, tc.host)
			if err != nil || len(addrs) != tc.addrs || ttl != tc.ttl {
				t.Fatalf("got %v, ttl %s, %v; want %d addresses, ttl %s", addrs, ttl, err, tc.addrs, tc.ttl)
			}
		})
	}
	if _, _, err := lookup(context.Background(), "nxdomain.test"); err == nil {
		t.Fatal("an unknown name resolved")
	}
	// New wires the same lookup into a Cache.
	c := New(server, testLimits)
	if got := mustLookup(t, c, "a.test"); !slices.Equal(got, one) {
		t.Fatalf("New: %v", got)
	}
}

// msg builds a DNS message for the answerTTL table.
func msg(id uint16, response bool, name string, typ dnsmessage.Type, answers ...uint32) []byte {
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: id, Response: response})
	b.StartQuestions()
	n := dnsmessage.MustNewName(name)
	b.Question(dnsmessage.Question{Name: n, Type: typ, Class: dnsmessage.ClassINET})
	b.StartAnswers()
	for _, ttl := range answers {
		b.AResource(dnsmessage.ResourceHeader{Name: n, Class: dnsmessage.ClassINET, TTL: ttl}, dnsmessage.AResource{A: [4]byte{192, 0, 2, 1}})
	}
	m, _ := b.Finish()
	return m
}

var ttlCases = []struct {
	name        string
	query, resp []byte
	ttl         uint32
	ok          bool
}{
	{"lowest answer", msg(7, false, "a.test.", dnsmessage.TypeA), msg(7, true, "a.test.", dnsmessage.TypeA, 60, 30, 90), 30, true},
	{"name case differs", msg(7, false, "a.test.", dnsmessage.TypeA), msg(7, true, "A.Test.", dnsmessage.TypeA, 60), 60, true},
	{"no answer, no soa", msg(7, false, "a.test.", dnsmessage.TypeA), msg(7, true, "a.test.", dnsmessage.TypeA), 0, false},
	{"other id", msg(7, false, "a.test.", dnsmessage.TypeA), msg(8, true, "a.test.", dnsmessage.TypeA, 60), 0, false},
	{"not a response", msg(7, false, "a.test.", dnsmessage.TypeA), msg(7, false, "a.test.", dnsmessage.TypeA, 60), 0, false},
	{"other name", msg(7, false, "a.test.", dnsmessage.TypeA), msg(7, true, "b.test.", dnsmessage.TypeA, 60), 0, false},
	{"other type", msg(7, false, "a.test.", dnsmessage.TypeA), msg(7, true, "a.test.", dnsmessage.TypeAAAA, 60), 0, false},
	{"garbage", msg(7, false, "a.test.", dnsmessage.TypeA), []byte("not dns"), 0, false},
	{"no query", nil, msg(7, true, "a.test.", dnsmessage.TypeA, 60), 0, false},
	{"truncated answer", msg(7, false, "a.test.", dnsmessage.TypeA), msg(7, true, "a.test.", dnsmessage.TypeA, 60)[:40], 0, false},
}

func TestAnswerTTL(t *testing.T) {
	for _, tc := range ttlCases {
		t.Run(tc.name, func(t *testing.T) {
			if ttl, ok := answerTTL(tc.query, tc.resp); ttl != tc.ttl || ok != tc.ok {
				t.Fatalf("got %d, %v; want %d, %v", ttl, ok, tc.ttl, tc.ok)
			}
		})
	}
}

// FuzzAnswerTTL: never panic, and never read a TTL from a message that is not a response to
// the query (its ID and question).
func FuzzAnswerTTL(f *testing.F) {
	for _, tc := range ttlCases {
		f.Add(tc.query, tc.resp)
	}
	f.Fuzz(func(t *testing.T, query, resp []byte) {
		if _, ok := answerTTL(query, resp); !ok {
			return
		}
		var qp, rp dnsmessage.Parser
		qh, err1 := qp.Start(query)
		rh, err2 := rp.Start(resp)
		q, err3 := qp.Question()
		rq, err4 := rp.Question()
		if err1 != nil || err2 != nil || err3 != nil || err4 != nil || !rh.Response || qh.ID != rh.ID || q.Type != rq.Type ||
			!strings.EqualFold(q.Name.String(), rq.Name.String()) {
			t.Fatalf("a TTL from %x answering %x", resp, query)
		}
	})
}
