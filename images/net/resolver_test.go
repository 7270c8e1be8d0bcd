package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/sharness-ai/sharness/internal/egress/proxy"
)

// fakeDNS answers A queries from a fixed table over UDP and logs every name asked.
type fakeDNS struct {
	addr  string
	mu    sync.Mutex
	asked []string
}

func newFakeDNS(t *testing.T, table map[string]netip.Addr) *fakeDNS {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	f := &fakeDNS{addr: pc.LocalAddr().String()}
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			var p dnsmessage.Parser
			hdr, err := p.Start(buf[:n])
			if err != nil {
				continue
			}
			q, err := p.Question()
			if err != nil {
				continue
			}
			name := strings.TrimSuffix(q.Name.String(), ".")
			f.mu.Lock()
			f.asked = append(f.asked, fmt.Sprintf("%s %s", q.Type, name))
			f.mu.Unlock()
			a, known := table[name]
			rcode := dnsmessage.RCodeSuccess
			if !known {
				rcode = dnsmessage.RCodeNameError
			}
			b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: hdr.ID, Response: true, Authoritative: true, RCode: rcode})
			b.StartQuestions()
			b.Question(q)
			b.StartAnswers()
			if known && q.Type == dnsmessage.TypeA && a.Is4() {
				b.AResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 60}, dnsmessage.AResource{A: a.As4()})
			}
			if msg, err := b.Finish(); err == nil {
				pc.WriteTo(msg, from)
			}
		}
	}()
	return f
}

func TestLookupThroughConfiguredResolver(t *testing.T) {
	dns := newFakeDNS(t, map[string]netip.Addr{
		"allowed.test": lo(),
		"private.test": netip.MustParseAddr("10.0.0.1"),
	})
	lookup := proxy.Lookup(dns.addr)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got, err := lookup(ctx, "private.test")
	if err != nil || len(got) != 1 || got[0] != netip.MustParseAddr("10.0.0.1") {
		t.Fatalf("lookup private.test = %v, %v", got, err)
	}
	if _, err := lookup(ctx, "nxdomain.test"); err == nil {
		t.Fatal("lookup of an unknown name succeeded")
	}

	h := newHarness(t)
	h.s.lookup = lookup
	h.start(t, nil, nil)
	for name, want := range map[string]string{
		"private.test": "HTTP/1.1 403 Forbidden",
		"allowed.test": "HTTP/1.1 200 Connection Established",
	} {
		c, err := net.Dial("tcp", h.addr)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprintf(c, "CONNECT %s:%d HTTP/1.1\r\n\r\n", name, h.tlsPort)
		line, _ := bufio.NewReader(c).ReadString('\n')
		c.Close()
		if strings.TrimSpace(line) != want {
			t.Errorf("CONNECT %s: %q; want %q", name, line, want)
		}
	}
	dns.mu.Lock()
	defer dns.mu.Unlock()
	for _, name := range []string{"private.test", "allowed.test"} {
		if !strings.Contains(strings.Join(dns.asked, "\n"), "TypeA "+name) {
			t.Errorf("the configured resolver was not asked for %s: %q", name, dns.asked)
		}
	}
}
