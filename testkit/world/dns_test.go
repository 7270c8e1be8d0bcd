package main

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/net/dns/dnsmessage"
)

var self = netip.MustParseAddr("172.30.99.10")

// query builds a DNS query for name and type t.
func query(t testing.TB, id uint16, name string, qt dnsmessage.Type) []byte {
	t.Helper()
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: id, RecursionDesired: true})
	b.StartQuestions()
	if err := b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName(name), Type: qt, Class: dnsmessage.ClassINET}); err != nil {
		t.Fatal(err)
	}
	msg, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return msg
}

// reply is what a test reads back from an answer: the rcode and the A records.
type reply struct {
	RCode dnsmessage.RCode
	AA    bool
	A     []netip.Addr
}

func parseReply(t testing.TB, msg []byte, id uint16) reply {
	t.Helper()
	var m dnsmessage.Message
	if err := m.Unpack(msg); err != nil {
		t.Fatalf("reply does not parse: %v", err)
	}
	if !m.Response || m.ID != id {
		t.Fatalf("reply header: response %v id %d, want true %d", m.Response, m.ID, id)
	}
	r := reply{RCode: m.RCode, AA: m.Authoritative}
	for _, a := range m.Answers {
		if rr, ok := a.Body.(*dnsmessage.AResource); ok {
			r.A = append(r.A, netip.AddrFrom4(rr.A))
		}
	}
	return r
}

func TestAnswer(t *testing.T) {
	z := newZone(self)
	addr := netip.MustParseAddr
	tests := []struct {
		name  string
		qname string
		qtype dnsmessage.Type
		want  reply
		log   dnsEvent
	}{
		{"allowed", "allowed.sharness.test.", dnsmessage.TypeA, reply{AA: true, A: []netip.Addr{self}}, dnsEvent{Query: "allowed.sharness.test", QType: "A", RCode: "NOERROR"}},
		{"denied", "denied.sharness.test.", dnsmessage.TypeA, reply{AA: true, A: []netip.Addr{self}}, dnsEvent{Query: "denied.sharness.test", QType: "A", RCode: "NOERROR"}},
		{"private", "private.sharness.test.", dnsmessage.TypeA, reply{AA: true, A: []netip.Addr{addr("10.0.0.1")}}, dnsEvent{Query: "private.sharness.test", QType: "A", RCode: "NOERROR"}},
		{"metadata", "metadata.sharness.test.", dnsmessage.TypeA, reply{AA: true, A: []netip.Addr{addr("169.254.169.254")}}, dnsEvent{Query: "metadata.sharness.test", QType: "A", RCode: "NOERROR"}},
		{"loopback", "loopback.sharness.test.", dnsmessage.TypeA, reply{AA: true, A: []netip.Addr{addr("127.0.0.1")}}, dnsEvent{Query: "loopback.sharness.test", QType: "A", RCode: "NOERROR"}},
		{"case folded", "ALLOWED.Sharness.TEST.", dnsmessage.TypeA, reply{AA: true, A: []netip.Addr{self}}, dnsEvent{Query: "allowed.sharness.test", QType: "A", RCode: "NOERROR"}},
		{"any type", "allowed.sharness.test.", dnsmessage.TypeALL, reply{AA: true, A: []netip.Addr{self}}, dnsEvent{Query: "allowed.sharness.test", QType: "ALL", RCode: "NOERROR"}},
		{"AAAA is no data", "allowed.sharness.test.", dnsmessage.TypeAAAA, reply{AA: true}, dnsEvent{Query: "allowed.sharness.test", QType: "AAAA", RCode: "NOERROR"}},
		{"TXT is no data", "allowed.sharness.test.", dnsmessage.TypeTXT, reply{AA: true}, dnsEvent{Query: "allowed.sharness.test", QType: "TXT", RCode: "NOERROR"}},
		{"unknown name", "nope.sharness.test.", dnsmessage.TypeA, reply{RCode: dnsmessage.RCodeNameError, AA: true}, dnsEvent{Query: "nope.sharness.test", QType: "A", RCode: "NXDOMAIN"}},
		{"tunnel label", "6869.t.sharness.test.", dnsmessage.TypeTXT, reply{RCode: dnsmessage.RCodeNameError, AA: true}, dnsEvent{Query: "6869.t.sharness.test", QType: "TXT", RCode: "NXDOMAIN"}},
		{"outside name", "example.com.", dnsmessage.TypeA, reply{RCode: dnsmessage.RCodeNameError, AA: true}, dnsEvent{Query: "example.com", QType: "A", RCode: "NXDOMAIN"}},
		{"subdomain of a known name", "x.allowed.sharness.test.", dnsmessage.TypeA, reply{RCode: dnsmessage.RCodeNameError, AA: true}, dnsEvent{Query: "x.allowed.sharness.test", QType: "A", RCode: "NXDOMAIN"}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := uint16(1000 + i)
			out, q, ok := z.answer(query(t, id, tt.qname, tt.qtype))
			if !ok {
				t.Fatal("answer dropped the query")
			}
			if diff := cmp.Diff(tt.want, parseReply(t, out, id), cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
				t.Errorf("reply (-want +got):\n%s", diff)
			}
			if q != tt.log {
				t.Errorf("logged question = %+v, want %+v", q, tt.log)
			}
		})
	}
}

func TestParseHosts(t *testing.T) {
	addr := netip.MustParseAddr
	tests := []struct {
		name, in string
		want     zone
		wantErr  string
	}{
		{"empty", "", zone{}, ""},
		{"one", "api.anthropic.com=10.214.0.11", zone{"api.anthropic.com": addr("10.214.0.11")}, ""},
		{"two, case folded", "API.Anthropic.com=10.214.0.11,statsig.anthropic.com=10.214.0.12",
			zone{"api.anthropic.com": addr("10.214.0.11"), "statsig.anthropic.com": addr("10.214.0.12")}, ""},
		{"single label", "model=10.214.0.11", zone{"model": addr("10.214.0.11")}, ""},
		{"no address", "api.anthropic.com", nil, `"api.anthropic.com" is not name=address`},
		{"empty entry", "api.anthropic.com=10.214.0.11,", nil, `"" is not name=address`},
		{"space", "api.anthropic.com= 10.214.0.11", nil, "the address is not IPv4"},
		{"space in name", " api.anthropic.com=10.214.0.11", nil, "is not a DNS name"},
		{"trailing dot", "api.anthropic.com.=10.214.0.11", nil, "is not a DNS name"},
		{"empty name", "=10.214.0.11", nil, "is not a DNS name"},
		{"wildcard", "*.anthropic.com=10.214.0.11", nil, "is not a DNS name"},
		{"underscore", "a_b.test=10.214.0.11", nil, "is not a DNS name"},
		{"hyphen at the end of a label", "a-.test=10.214.0.11", nil, "is not a DNS name"},
		{"label over 63", strings.Repeat("a", 64) + ".test=10.214.0.11", nil, "is not a DNS name"},
		{"name over 253", strings.Repeat("a.", 127) + "ab=10.214.0.11", nil, "is not a DNS name"},
		{"IPv6", "api.anthropic.com=fd00::1", nil, "the address is not IPv4"},
		{"mapped IPv4", "api.anthropic.com=::ffff:10.214.0.11", nil, "the address is not IPv4"},
		{"leading zero", "api.anthropic.com=10.214.0.011", nil, "the address is not IPv4"},
		{"with port", "api.anthropic.com=10.214.0.11:443", nil, "the address is not IPv4"},
		{"two equals", "api.anthropic.com=10.214.0.11=x", nil, "the address is not IPv4"},
		{"duplicate", "a.test=10.0.0.1,A.test=10.0.0.2", nil, "a.test is given twice"},
		{"one of the world's own", "allowed.sharness.test=10.0.0.1", nil, "allowed.sharness.test is one of the world's own names"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseHosts(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
				t.Errorf("zone (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAnswerExtraHosts: an extra host answers like the world's own; its subdomains do not.
func TestAnswerExtraHosts(t *testing.T) {
	extra, err := parseHosts("api.anthropic.com=10.214.0.11")
	if err != nil {
		t.Fatal(err)
	}
	z := newZone(self)
	maps.Copy(z, extra)
	for i, tt := range []struct {
		qname string
		want  reply
	}{
		{"api.anthropic.com.", reply{AA: true, A: []netip.Addr{netip.MustParseAddr("10.214.0.11")}}},
		{"API.ANTHROPIC.COM.", reply{AA: true, A: []netip.Addr{netip.MustParseAddr("10.214.0.11")}}},
		{"x.api.anthropic.com.", reply{RCode: dnsmessage.RCodeNameError, AA: true}},
		{"anthropic.com.", reply{RCode: dnsmessage.RCodeNameError, AA: true}},
		{"allowed.sharness.test.", reply{AA: true, A: []netip.Addr{self}}},
	} {
		out, _, ok := z.answer(query(t, uint16(i), tt.qname, dnsmessage.TypeA))
		if !ok {
			t.Fatalf("%s: dropped", tt.qname)
		}
		if diff := cmp.Diff(tt.want, parseReply(t, out, uint16(i)), cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.qname, diff)
		}
	}
}

func TestAnswerMalformed(t *testing.T) {
	z := newZone(self)
	good := query(t, 7, "allowed.sharness.test.", dnsmessage.TypeA)
	t.Run("short header is dropped", func(t *testing.T) {
		if _, _, ok := z.answer(good[:5]); ok {
			t.Error("answered a message without a full header")
		}
	})
	t.Run("a response is dropped", func(t *testing.T) {
		resp := bytes.Clone(good)
		resp[2] |= 0x80 // QR
		if _, _, ok := z.answer(resp); ok {
			t.Error("answered a response (reflection loop)")
		}
	})
	t.Run("truncated question is FORMERR", func(t *testing.T) {
		out, q, ok := z.answer(good[:15])
		if !ok {
			t.Fatal("dropped a query with a readable header")
		}
		if got := parseReply(t, out, 7).RCode; got != dnsmessage.RCodeFormatError || q.RCode != "FORMERR" {
			t.Errorf("rcode = %v (logged %q), want FORMERR", got, q.RCode)
		}
	})
	t.Run("other opcode is NOTIMP", func(t *testing.T) {
		notify := bytes.Clone(good)
		notify[2] |= 4 << 3 // opcode 4, NOTIFY
		out, _, ok := z.answer(notify)
		if !ok {
			t.Fatal("dropped")
		}
		if r := parseReply(t, out, 7); r.RCode != dnsmessage.RCodeNotImplemented || len(r.A) != 0 {
			t.Errorf("reply = %+v, want NOTIMP without answers", r)
		}
	})
}

// TestServeDNS runs both transports on loopback and checks the log line of each query.
func TestServeDNS(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var buf syncBuffer
	ev := newEvents(&buf)
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go servePackets(ctx, pc, dnsPacket(newZone(self), ev))
	go accept(ctx, l, dnsConn(newZone(self), ev))
	defer pc.Close()
	defer l.Close()
	for _, network := range []string{"udp", "tcp"} {
		addr := pc.LocalAddr().String()
		if network == "tcp" {
			addr = l.Addr().String()
		}
		r := net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		}}
		lctx, lcancel := context.WithTimeout(ctx, 5*time.Second)
		got, err := r.LookupNetIP(lctx, "ip4", "allowed.sharness.test")
		lcancel()
		if err != nil || len(got) != 1 || got[0] != self {
			t.Errorf("%s: lookup = %v, %v; want [%s]", network, got, err, self)
		}
	}
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var e dnsEvent
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if e.Query != "allowed.sharness.test" || e.QType != "A" || e.From != "127.0.0.1" || e.RCode != "NOERROR" {
			t.Errorf("log line = %+v", e)
		}
	}
	if !strings.Contains(buf.String(), `"proto":"tcp"`) || !strings.Contains(buf.String(), `"proto":"udp"`) {
		t.Errorf("log misses a transport:\n%s", buf.String())
	}
}
