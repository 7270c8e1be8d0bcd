package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/sharness-ai/sharness/images/net/relay"
	"github.com/sharness-ai/sharness/images/net/resolve"
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
	lookup := resolve.New(dns.addr, resolve.DefaultLimits).Lookup
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

// flipLookup is a resolve.LookupFunc whose answers a test changes, counting its calls.
type flipLookup struct {
	mu      sync.Mutex
	answers map[string][]netip.Addr
	calls   int
}

func (f *flipLookup) lookup(_ context.Context, host string) ([]netip.Addr, time.Duration, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	return slices.Clone(f.answers[host]), time.Hour, nil // clamped to the test's MaxTTL
}

func (f *flipLookup) set(host string, a ...netip.Addr) {
	f.mu.Lock()
	f.answers[host] = a
	f.mu.Unlock()
}

// TestCachedAnswersStillChecked: with answers kept by resolve.Cache, every request checks its
// (cached) addresses again, and a name re-pointed at a private address (DNS rebinding) is
// refused once its answer expires; net never dials an address it did not check.
func TestCachedAnswersStillChecked(t *testing.T) {
	h := newHarness(t)
	f := &flipLookup{answers: map[string][]netip.Addr{"private.test": {netip.MustParseAddr("10.0.0.1")}, "flip.wild.test": {lo()}}}
	lim := resolve.DefaultLimits
	lim.MinTTL, lim.MaxTTL = time.Second, time.Second
	h.s.lookup = resolve.NewCache(f.lookup, lim).Lookup
	var mu sync.Mutex
	var dialled []string
	dial := h.s.dial
	h.s.dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		mu.Lock()
		dialled = append(dialled, addr)
		mu.Unlock()
		return dial(ctx, network, addr)
	}
	h.s.tr.DialContext = relay.CheckedDialer(h.s.dial, nil, h.s.lim.Idle)
	h.start(t, nil, nil)
	status := func(host string, plain bool) int {
		t.Helper()
		req := fmt.Sprintf("CONNECT %s:%d HTTP/1.1\r\n\r\n", host, h.tlsPort)
		if plain {
			req = fmt.Sprintf("GET http://%s:%d/ HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", host, h.plainPort)
		}
		resp, _, c := h.raw(t, req)
		c.Close()
		return resp.StatusCode
	}
	for _, plain := range []bool{false, true, false} {
		if got := status("private.test", plain); got != 403 {
			t.Fatalf("private.test (plain %v): %d; want 403", plain, got)
		}
	}
	if f.calls != 1 {
		t.Fatalf("%d lookups of private.test; want 1, the rest from the cache", f.calls)
	}
	if got := status("flip.wild.test", true); got != 200 {
		t.Fatalf("flip.wild.test: %d; want 200", got)
	}
	f.set("flip.wild.test", netip.MustParseAddr("10.0.0.1"))
	if got := status("flip.wild.test", true); got != 200 { // the answer checked before, still live
		t.Fatalf("flip.wild.test within its TTL: %d; want 200", got)
	}
	time.Sleep(1100 * time.Millisecond)
	for _, plain := range []bool{true, false} {
		if got := status("flip.wild.test", plain); got != 403 {
			t.Fatalf("flip.wild.test re-pointed at 10.0.0.1 (plain %v): %d; want 403", plain, got)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, a := range dialled {
		if !strings.HasPrefix(a, "127.0.0.1:") {
			t.Errorf("net dialled %s", a)
		}
	}
}

// TestForwardReusesPerAddress: plain requests reuse an upstream connection only to the address
// they checked: after a name moves to another address, the next request goes there, not over
// the connection kept to the old one.
func TestForwardReusesPerAddress(t *testing.T) {
	h := newHarness(t)
	second, err := net.Listen("tcp", fmt.Sprintf("127.0.0.2:%d", h.plainPort))
	if err != nil {
		t.Skipf("no second loopback address here: %v", err)
	}
	up := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "second") })}
	go up.Serve(second)
	t.Cleanup(func() { up.Close() })
	var mu sync.Mutex
	dials := map[string]int{} // by address
	dial := h.s.dial
	h.s.dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		mu.Lock()
		dials[addr]++
		mu.Unlock()
		return dial(ctx, network, addr)
	}
	h.s.tr.DialContext = relay.CheckedDialer(h.s.dial, nil, h.s.lim.Idle)
	h.s.unsafeAllowAddrs = map[netip.Addr]bool{netip.MustParseAddr("127.0.0.2"): true}
	f := &flipLookup{answers: map[string][]netip.Addr{"move.wild.test": {lo()}}}
	h.s.lookup = func(ctx context.Context, host string) ([]netip.Addr, error) {
		a, _, err := f.lookup(ctx, host)
		return a, err
	}
	h.start(t, nil, nil)
	c := h.client()
	get := func() string {
		t.Helper()
		resp, err := c.Get(fmt.Sprintf("http://move.wild.test:%d/", h.plainPort))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	for range 3 {
		if got := get(); !strings.HasPrefix(got, "hello move.wild.test") {
			t.Fatalf("first address answered %q", got)
		}
	}
	first, moved := fmt.Sprintf("127.0.0.1:%d", h.plainPort), fmt.Sprintf("127.0.0.2:%d", h.plainPort)
	mu.Lock()
	if dials[first] != 1 {
		t.Fatalf("%d upstream connections for 3 requests; want 1, reused", dials[first])
	}
	mu.Unlock()
	f.set("move.wild.test", netip.MustParseAddr("127.0.0.2"))
	if got := get(); got != "second" {
		t.Fatalf("after the move: %q, want the second address's answer", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if dials[first] != 1 || dials[moved] != 1 {
		t.Fatalf("connections: %v; want one to each address", dials)
	}
}
