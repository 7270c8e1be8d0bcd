package sidedoor

import (
	"bufio"
	"context"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"testing"

	"golang.org/x/net/dns/dnsmessage"
)

func TestTunnelName(t *testing.T) {
	tests := []struct {
		name string
		data string
		want string
	}{
		{"empty", "", "t.sharness.test"},
		{"short", "hi", "6869.t.sharness.test"},
		{"one full label", strings.Repeat("a", 31), strings.Repeat("61", 31) + ".t.sharness.test"},
		{"splits at 63", strings.Repeat("a", 32), strings.Repeat("61", 31) + "6.1.t.sharness.test"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := TunnelName([]byte(tt.data), "t.sharness.test"); got != tt.want {
				t.Errorf("TunnelName(%q) = %q, want %q", tt.data, got, tt.want)
			}
		})
	}
}

// FuzzTunnelName checks the encoding's invariants: a valid DNS name under the zone, whose
// labels decode back to a prefix of the data.
func FuzzTunnelName(f *testing.F) {
	for _, s := range []string{"", "hi", strings.Repeat("a", 32), strings.Repeat("x", 500), "sharness-probe 0a1b 7"} {
		f.Add([]byte(s), "t.sharness.test")
	}
	f.Add([]byte("x"), strings.Repeat("z.", 126)+"z")
	f.Fuzz(func(t *testing.T, data []byte, zone string) {
		if len(zone) == 0 || len(zone) > 200 || strings.Contains(zone, "..") || zone[0] == '.' {
			return
		}
		name := TunnelName(data, zone)
		if !strings.HasSuffix(name, zone) || len(zone) < 253 && len(name) > 253 {
			t.Fatalf("TunnelName = %q (%d characters)", name, len(name))
		}
		labels := strings.TrimSuffix(strings.TrimSuffix(name, zone), ".")
		h := strings.ReplaceAll(labels, ".", "")
		for _, l := range strings.Split(labels, ".") {
			if len(l) > 63 {
				t.Fatalf("label %q longer than 63", l)
			}
		}
		dec, err := hex.DecodeString(h)
		if err != nil || string(dec) != string(data[:len(dec)]) {
			t.Fatalf("labels %q do not decode to a prefix of the data: %v", labels, err)
		}
		if len(data) > 200 && len(name) < 250 {
			t.Fatalf("name is %d characters: room was wasted", len(name))
		}
	})
}

func TestResolverAddr(t *testing.T) {
	tests := map[string]string{
		"":                                  "127.0.0.11:53",
		"search x\nnameserver 127.0.0.11\n": "127.0.0.11:53",
		"# c\nnameserver 10.0.0.2\nnameserver 8.8.8.8": "10.0.0.2:53",
		"nameserver ::1": "[::1]:53",
		"nameserver":     "127.0.0.11:53",
	}
	for in, want := range tests {
		if got := ResolverAddr(in); got != want {
			t.Errorf("ResolverAddr(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestEdgeTargets(t *testing.T) {
	pool := netip.MustParsePrefix("10.213.0.0/16")
	own := []netip.Addr{netip.MustParseAddr("10.213.3.2"), netip.MustParseAddr("::ffff:10.213.7.9"), netip.MustParseAddr("172.17.0.2")}
	got := EdgeTargets(pool, own, 3129, 8443)
	if len(got) != 254*3*2 {
		t.Fatalf("%d targets, want %d", len(got), 254*3*2)
	}
	if got[0] != netip.MustParseAddrPort("10.213.0.2:3129") || got[len(got)-1] != netip.MustParseAddrPort("10.213.255.4:8443") {
		t.Errorf("first, last = %v, %v", got[0], got[len(got)-1])
	}
	for _, ap := range got {
		if b := ap.Addr().As4(); b[2] == 3 || b[2] == 7 || b[3] < 2 || b[3] > 4 {
			t.Fatalf("target %v is in an own subnet or off .2-.4", ap)
		}
	}
	if n := len(EdgeTargets(netip.MustParsePrefix("10.213.4.0/24"), nil, 1)); n != 3 {
		t.Errorf("a /24 pool gives %d targets, want 3", n)
	}
}

func TestProxyURL(t *testing.T) {
	if u, err := ProxyURL(""); u != nil || err != nil {
		t.Errorf(`ProxyURL("") = %v, %v`, u, err)
	}
	if u, err := ProxyURL("http://net:3128"); err != nil || u.Host != "net:3128" {
		t.Errorf("ProxyURL = %v, %v", u, err)
	}
	for _, bad := range []string{"net:3128", "https://net:3128", "http://net", "http://:3128", "%"} {
		if _, err := ProxyURL(bad); err == nil {
			t.Errorf("ProxyURL(%q) accepted", bad)
		}
	}
}

// fakeProxy answers each request line with the response resp returns for it; for a 200 to
// CONNECT it then echoes the tunnel.
func fakeProxy(t *testing.T, resp func(line string) string) *url.URL {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				line, _ := br.ReadString('\n')
				for h, _ := br.ReadString('\n'); h != "\r\n" && h != ""; h, _ = br.ReadString('\n') {
				}
				r := resp(strings.TrimSpace(line))
				io.WriteString(c, r)
				if strings.HasPrefix(line, "CONNECT") && strings.HasPrefix(r, "HTTP/1.1 200") {
					io.Copy(c, br)
				}
			}()
		}
	}()
	return &url.URL{Scheme: "http", Host: l.Addr().String()}
}

func TestRequestAndVerdict(t *testing.T) {
	p := fakeProxy(t, func(line string) string {
		switch line {
		case "CONNECT 127.1:443 HTTP/1.1":
			return "HTTP/1.1 403 Forbidden\r\nX-Sharness-Deny: ip-literal\r\nContent-Length: 0\r\n\r\n"
		case "GET http://a.test/x HTTP/1.1":
			return "HTTP/1.1 502 Bad Gateway\r\nX-Sharness-Error: dial\r\nContent-Length: 0\r\n\r\n"
		case "GET http://a.test/redirect HTTP/1.1":
			return "HTTP/1.1 302 Found\r\nLocation: http://b.test/\r\nContent-Length: 0\r\n\r\n"
		}
		return "HTTP/1.1 200 Connection Established\r\n\r\n"
	})
	ctx := context.Background()
	tests := []struct{ method, target, want string }{
		{"CONNECT", "127.1:443", "403 ip-literal"},
		{"GET", "http://a.test/x", "502 error:dial"},
		{"GET", "http://a.test/redirect", "302"},
		{"CONNECT", "a.test:443", "200"},
	}
	for _, tt := range tests {
		if got, note := Refusal("r", tt.method, tt.target, tt.want, "", p).Try(ctx); got != tt.want || note != tt.method+" "+tt.target {
			t.Errorf("%s %s: %q (%s), want %q", tt.method, tt.target, got, note, tt.want)
		}
	}
	resp, c, err := Request(ctx, p, http.MethodConnect, "a.test:443")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %v, %v", resp, err)
	}
	defer c.Close()
	io.WriteString(c, "ping")
	buf := make([]byte, 4)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ping" {
		t.Errorf("tunnel echo = %q, %v", buf, err)
	}
	if got, _ := Refusal("r", "GET", "http://a.test/", "403", "", nil).Try(ctx); !strings.HasPrefix(got, "proxy: error:") {
		t.Errorf("no proxy: %q", got)
	}
}

// fakeDNS answers every query with the rcode and answers answer returns; ID 0 answers with a
// wrong ID first, which Ask must skip.
func fakeDNS(t *testing.T, rcode dnsmessage.RCode, records int) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 512)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			var q dnsmessage.Message
			if q.Unpack(buf[:n]) != nil {
				continue
			}
			for _, id := range []uint16{q.ID + 1, q.ID} {
				m := dnsmessage.Message{Header: dnsmessage.Header{ID: id, Response: true, RCode: rcode}, Questions: q.Questions}
				for range records {
					m.Answers = append(m.Answers, dnsmessage.Resource{
						Header: dnsmessage.ResourceHeader{Name: q.Questions[0].Name, Type: dnsmessage.TypeTXT, Class: dnsmessage.ClassINET},
						Body:   &dnsmessage.TXTResource{TXT: []string{"x"}}})
				}
				out, _ := m.Pack()
				pc.WriteTo(out, from)
			}
		}
	}()
	return pc.LocalAddr().String()
}

func TestAskAndTunnel(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name    string
		rcode   dnsmessage.RCode
		records int
		ask     string
		tunnel  string
	}{
		{"servfail", dnsmessage.RCodeServerFailure, 0, "SERVFAIL", "no answer"},
		{"refused", dnsmessage.RCodeRefused, 0, "REFUSED", "no answer"},
		{"nxdomain leaks", dnsmessage.RCodeNameError, 0, "NXDOMAIN", "answered"},
		{"records leak", dnsmessage.RCodeSuccess, 1, "answered", "answered"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			server := fakeDNS(t, tt.rcode, tt.records)
			got, err := Ask(ctx, server, "allowed.sharness.test", dnsmessage.TypeA)
			if err != nil || got != tt.ask {
				t.Errorf("Ask = %q, %v; want %q", got, err, tt.ask)
			}
			if got, note := Tunnel(ctx, server, "t.sharness.test", 5); got != tt.tunnel {
				t.Errorf("Tunnel = %q (%s), want %q", got, note, tt.tunnel)
			}
		})
	}
	if _, err := Ask(ctx, "127.0.0.1:1", "bad..name", dnsmessage.TypeA); err == nil {
		t.Error("Ask built a query for an invalid name")
	}
}

func TestDialAndScan(t *testing.T) {
	ctx := context.Background()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	go func() {
		buf := make([]byte, 64)
		n, from, err := pc.ReadFrom(buf)
		if err == nil {
			pc.WriteTo(buf[:n], from)
		}
	}()
	closed := netip.MustParseAddrPort(l.Addr().String())
	closed = netip.AddrPortFrom(closed.Addr(), 1) // nothing listens on port 1
	tests := []struct{ network, addr, want string }{
		{"tcp", l.Addr().String(), "connected"},
		{"udp", pc.LocalAddr().String(), "answered"},
		{"tcp", closed.String(), "ECONNREFUSED"},
		{"tcp", "", "not configured"},
	}
	for _, tt := range tests {
		if got, _ := Dial(ctx, tt.network, tt.addr); got != tt.want {
			t.Errorf("Dial(%s, %q) = %q, want %q", tt.network, tt.addr, got, tt.want)
		}
	}
	got, note := Scan(ctx, []netip.AddrPort{netip.MustParseAddrPort(l.Addr().String()), closed})
	if got != "reached" || !strings.Contains(note, "1 ECONNREFUSED, 1 connected") {
		t.Errorf("Scan = %q, %q", got, note)
	}
	if got, _ := Scan(ctx, nil); got != "unreachable" {
		t.Errorf("Scan of nothing = %q", got)
	}
}
