package sidedoor

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/net/dns/dnsmessage"
)

// Unreachable are the outcomes of a dial that found no path: no route, no neighbour, silence.
// ECONNREFUSED is not among them: a reset or an ICMP port-unreachable proves a path.
const Unreachable = "ENETUNREACH|EHOSTUNREACH|timeout"

// Walled are the outcomes of a TCP dial the wall stopped: Unreachable, or EACCES when the
// container's Landlock domain refused the port before any packet left (runtime shim). The e2e
// suite runs the probe once without the shim to hold the network alone to Unreachable.
const Walled = Unreachable + "|EACCES"

// NoAnswer are the outcomes of a DNS query that reached nothing beyond a container's embedded
// resolver: it could not forward (SERVFAIL), it refused, or nothing answered. NXDOMAIN or a
// record means some resolver further out answered: the query left, and its labels with it.
const NoAnswer = "SERVFAIL|REFUSED|timeout|ENETUNREACH|ECONNREFUSED"

// Dial connects to addr and names the outcome: the dial error's Kind, or "connected"; for UDP
// it sends a datagram and waits for an answer ("answered"), as an echo server would give.
// An empty addr is "not configured".
func Dial(ctx context.Context, network, addr string) (got, note string) {
	if addr == "" {
		return "not configured", "no address to try"
	}
	d := net.Dialer{Timeout: NetTimeout}
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return Kind(err), addr
	}
	defer c.Close()
	if !strings.HasPrefix(network, "udp") {
		return "connected", c.RemoteAddr().String()
	}
	c.SetDeadline(Deadline(ctx))
	if _, err = c.Write([]byte("sharness-probe")); err == nil {
		_, err = c.Read(make([]byte, 64))
	}
	if err != nil {
		return Kind(err), "sent to " + addr + ", no answer"
	}
	return "answered", "from " + addr
}

// DialDoor is a door whose attempt is Dial.
func DialDoor(name, network, addr, expected, why string) Door {
	return Door{Name: name, Expected: expected, Why: why, Try: func(ctx context.Context) (string, string) {
		return Dial(ctx, network, addr)
	}}
}

// Scan dials every target, 512 at a time: "unreachable" when each dial's outcome is one of
// Walled, else "reached" with the first offenders in note.
func Scan(ctx context.Context, targets []netip.AddrPort) (got, note string) {
	var mu sync.Mutex
	counts, reached := map[string]int{}, []string{}
	sem := make(chan struct{}, 512)
	var wg sync.WaitGroup
	for _, t := range targets {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			k, _ := Dial(ctx, "tcp", t.String())
			mu.Lock()
			defer mu.Unlock()
			if counts[k]++; !OneOf(Walled, k) {
				reached = append(reached, t.String()+" "+k)
			}
		})
	}
	wg.Wait()
	var tally []string
	for k, n := range counts {
		tally = append(tally, fmt.Sprintf("%d %s", n, k))
	}
	sort.Strings(tally)
	sort.Strings(reached)
	note = fmt.Sprintf("%d addresses: %s", len(targets), strings.Join(tally, ", "))
	if len(reached) > 0 {
		return "reached", note + "; " + strings.Join(reached[:min(5, len(reached))], ", ")
	}
	return "unreachable", note
}

// EdgeTargets lists ports on hosts .2-.4 of every /24 of pool that holds none of own: where the
// members of the edge networks a container is not on live.
func EdgeTargets(pool netip.Prefix, own []netip.Addr, ports ...uint16) []netip.AddrPort {
	var out []netip.AddrPort
	b := pool.Masked().Addr().As4()
	for i := range 256 {
		sub := netip.PrefixFrom(netip.AddrFrom4([4]byte{b[0], b[1], byte(i), 0}), 24)
		if !pool.Contains(sub.Addr()) || anyIn(own, sub.Contains) {
			continue
		}
		for host := byte(2); host <= 4; host++ {
			for _, p := range ports {
				out = append(out, netip.AddrPortFrom(netip.AddrFrom4([4]byte{b[0], b[1], byte(i), host}), p))
			}
		}
	}
	return out
}

func anyIn(addrs []netip.Addr, in func(netip.Addr) bool) bool {
	for _, a := range addrs {
		if in(a.Unmap()) {
			return true
		}
	}
	return false
}

// Ask sends one query for name to server over UDP and names the answer: "answered" if it holds
// records, else its rcode (NOERROR, NXDOMAIN, SERVFAIL, ...).
func Ask(ctx context.Context, server, name string, qt dnsmessage.Type) (string, error) {
	var idb [2]byte
	rand.Read(idb[:])
	id := binary.BigEndian.Uint16(idb[:])
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: id, RecursionDesired: true})
	b.StartQuestions()
	n, err := dnsmessage.NewName(name + ".")
	if err == nil {
		err = b.Question(dnsmessage.Question{Name: n, Type: qt, Class: dnsmessage.ClassINET})
	}
	msg, ferr := b.Finish()
	if err = errors.Join(err, ferr); err != nil {
		return "", fmt.Errorf("build query for %q: %w", name, err)
	}
	d := net.Dialer{Timeout: NetTimeout}
	c, err := d.DialContext(ctx, "udp", server)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(Deadline(ctx))
	if _, err := c.Write(msg); err != nil {
		return "", err
	}
	buf := make([]byte, 4096)
	for {
		n, err := c.Read(buf)
		if err != nil {
			return "", err
		}
		var m dnsmessage.Message
		if m.Unpack(buf[:n]) != nil || m.ID != id || !m.Response {
			continue // not the answer to this query
		}
		if len(m.Answers) > 0 {
			return "answered", nil
		}
		if names := []string{"NOERROR", "FORMERR", "SERVFAIL", "NXDOMAIN", "NOTIMP", "REFUSED"}; int(m.RCode) < len(names) {
			return names[m.RCode], nil
		}
		return m.RCode.String(), nil
	}
}

// Tunnel sends n TXT queries to server at once, each carrying a chunk of data hex-encoded in
// its labels under zone, as a DNS tunnel would: "no answer" when every outcome is one of
// NoAnswer, else "answered". The note names the session, which the data and the names carry.
func Tunnel(ctx context.Context, server, zone string, n int) (got, note string) {
	var idb [4]byte
	rand.Read(idb[:])
	session := hex.EncodeToString(idb[:])
	outcomes := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			name := TunnelName(fmt.Appendf(nil, "sharness-probe %s %d", session, i), zone)
			var err error
			if outcomes[i], err = Ask(ctx, server, name, dnsmessage.TypeTXT); err != nil {
				outcomes[i] = Kind(err)
			}
		})
	}
	wg.Wait()
	counts, got := map[string]int{}, "no answer"
	for _, o := range outcomes {
		if counts[o]++; !OneOf(NoAnswer, o) {
			got = "answered"
		}
	}
	return got, fmt.Sprintf("session %s via %s: %v", session, server, counts)
}

// TunnelName encodes data as hex in labels of at most 63 characters under zone, the way DNS
// tunnels (iodine, dns2tcp) carry data; what would not fit in 253 characters is cut.
func TunnelName(data []byte, zone string) string {
	room := 253 - len(zone)
	room -= (room + 63) / 64 // a dot after each label of at most 63
	h := hex.EncodeToString(data)
	h = h[:min(len(h), max(room, 0)&^1)]
	var labels []string
	for len(h) > 63 {
		labels, h = append(labels, h[:63]), h[63:]
	}
	if h != "" {
		labels = append(labels, h)
	}
	return strings.Join(append(labels, zone), ".")
}

// ResolverAddr returns the first nameserver of a resolv.conf as ip:53, or Docker's embedded
// resolver when there is none.
func ResolverAddr(resolvConf string) string {
	for line := range strings.SplitSeq(resolvConf, "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "nameserver" {
			return net.JoinHostPort(f[1], "53")
		}
	}
	return "127.0.0.11:53"
}

// ProxyURL parses a proxy setting such as HTTPS_PROXY: http://host:port, or "" for none.
func ProxyURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if s == "" {
		return nil, nil
	}
	if err != nil || u.Scheme != "http" || u.Hostname() == "" || u.Port() == "" {
		return nil, fmt.Errorf("proxy %q is not http://host:port", s)
	}
	return u, nil
}

// Request sends one request line through an HTTP proxy and reads the answer's head. After a
// 200 answer to CONNECT the returned connection is the tunnel. The caller closes it.
func Request(ctx context.Context, proxy *url.URL, method, target string) (*http.Response, net.Conn, error) {
	if proxy == nil {
		return nil, nil, errors.New("no proxy configured")
	}
	host := target
	if u, err := url.Parse(target); err == nil && method != http.MethodConnect {
		host = u.Host
	}
	d := net.Dialer{Timeout: NetTimeout}
	c, err := d.DialContext(ctx, "tcp", proxy.Host)
	if err != nil {
		return nil, nil, err
	}
	c.SetDeadline(Deadline(ctx))
	br := bufio.NewReader(c)
	_, err = fmt.Fprintf(c, "%s %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: sharness-probe\r\n\r\n", method, target, host)
	var resp *http.Response
	if err == nil {
		resp, err = http.ReadResponse(br, &http.Request{Method: method})
	}
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	return resp, bufConn{c, br}, nil
}

// Refusal is a door that sends one request through proxy and expects the refusal named by
// expected, in the form Verdict gives.
func Refusal(name, method, target, expected, why string, proxy *url.URL) Door {
	return Door{Name: name, Expected: expected, Why: why, Try: func(ctx context.Context) (string, string) {
		resp, c, err := Request(ctx, proxy, method, target)
		if err != nil {
			return "proxy: " + Kind(err), ""
		}
		c.Close()
		return Verdict(resp), method + " " + target
	}}
}

// bufConn reads through the buffer that read the proxy's answer.
type bufConn struct {
	net.Conn
	r *bufio.Reader
}

func (b bufConn) Read(p []byte) (int, error) { return b.r.Read(p) }

// Verdict is how a door reports a proxy's answer: the status and, for a refusal, the rule
// named by X-Sharness-Deny ("403 ip-literal"); for an upstream failure, X-Sharness-Error's
// kind ("502 error:dial").
func Verdict(resp *http.Response) string {
	s := strconv.Itoa(resp.StatusCode)
	if rule := resp.Header.Get("X-Sharness-Deny"); rule != "" {
		return s + " " + rule
	}
	if k := resp.Header.Get("X-Sharness-Error"); k != "" {
		return s + " error:" + k
	}
	return s
}
