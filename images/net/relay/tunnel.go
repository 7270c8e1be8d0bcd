package relay

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sharness-ai/sharness/images/net/egress"
)

// maxHello bounds what PeekHello reads: a handshake message is at most 64 KiB, plus the
// record headers around it.
const maxHello = 70 << 10

// Tunnel runs a CONNECT tunnel to host over up, which is already connected: it answers 200 on
// c, reads the caller's ClientHello, and replays it to up and splices only if its server name
// is host (no domain fronting: docs/pitfalls.md). It returns the bytes from the caller and to
// the caller, and the refusal (egress.RuleSNIMissing, RuleSNIMismatch) when it refused; a tunnel
// that either side ended early is not a refusal.
func Tunnel(c net.Conn, br *bufio.Reader, up net.Conn, host egress.Host, lim Limits, stop <-chan struct{}) (out, in int64, refusal *egress.Decision) {
	c.SetWriteDeadline(time.Now().Add(lim.Header))
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection Established\r\n\r\n"); err != nil {
		return 0, 0, nil
	}
	c.SetReadDeadline(time.Now().Add(lim.Header))
	hello, sni := PeekHello(br)
	name, err := egress.NormalizeHost(sni)
	switch {
	case sni == "":
		return int64(len(hello)), 0, new(egress.Deny(egress.RuleSNIMissing, ""))
	case err != nil || name != host:
		return int64(len(hello)), 0, new(egress.Deny(egress.RuleSNIMismatch, fmt.Sprintf("the TLS server name differs from the CONNECT host %s (domain fronting)", host)))
	}
	if _, err := up.Write(hello); err != nil {
		return int64(len(hello)), 0, nil
	}
	out, in = Splice(c, up, lim.Idle, lim.Lifetime, stop)
	return int64(len(hello)) + out, in, nil
}

// PeekHello reads a TLS ClientHello from br without answering it, with crypto/tls's own parser
// on a connection that only records what it reads. It returns every byte taken from br (to
// replay upstream; br is left empty) and the server name, "" when the bytes are not a
// ClientHello or carry no SNI. The caller sets the read deadline.
func PeekHello(br *bufio.Reader) (hello []byte, sni string) {
	rc := &helloConn{r: io.LimitReader(br, maxHello), buf: make([]byte, 0, 2048)}
	tls.Server(rc, peekConfig).Handshake()
	rest, _ := br.Peek(br.Buffered()) // read ahead by bufio, not yet by crypto/tls
	br.Discard(len(rest))
	return append(rc.buf, rest...), rc.sni
}

// peekConfig stops every handshake at the ClientHello, noting its server name on the helloConn.
var peekConfig = &tls.Config{GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
	h.Conn.(*helloConn).sni = h.ServerName
	return nil, errPeeked
}}

var errPeeked = errors.New("peeked")

// helloConn feeds crypto/tls and keeps a copy; it never writes.
type helloConn struct {
	r   io.Reader
	buf []byte
	sni string
}

func (h *helloConn) Read(p []byte) (int, error) {
	n, err := h.r.Read(p)
	h.buf = append(h.buf, p[:n]...)
	return n, err
}

func (h *helloConn) Write(p []byte) (int, error)      { return 0, errors.New("peek only") }
func (h *helloConn) Close() error                     { return nil }
func (h *helloConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (h *helloConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (h *helloConn) SetDeadline(time.Time) error      { return nil }
func (h *helloConn) SetReadDeadline(time.Time) error  { return nil }
func (h *helloConn) SetWriteDeadline(time.Time) error { return nil }

var bufPool = sync.Pool{New: func() any { b := make([]byte, 64<<10); return &b }}

// Splice copies both ways until both sides finish, passing half-closes on, and closes both
// when the tunnel is idle (no byte either way) for idle, at the end of lifetime, or when stop
// is closed. It returns the bytes from client and the bytes to client.
func Splice(client, up net.Conn, idle, lifetime time.Duration, stop <-chan struct{}) (out, in int64) {
	var last atomic.Int64
	last.Store(time.Now().UnixNano())
	// Between two TCP sockets the bytes move by splice(2), never through this process, and the
	// kernel's TCP_INFO says when each socket last received data: the idle limit needs no
	// hook in the data path. Anything else (a TLS caller) is copied here and timed per read.
	quiet := func() time.Duration { return time.Since(time.Unix(0, last.Load())) }
	kernel := false
	if _, ok := lastData(client); ok {
		if _, ok := lastData(up); ok {
			kernel = true
			quiet = func() time.Duration {
				a, _ := lastData(client)
				b, _ := lastData(up)
				return min(a, b)
			}
		}
	}
	end := time.Now().Add(lifetime)
	client.SetDeadline(end)
	up.SetDeadline(end)
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(max(idle/4, time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-stop:
			case <-t.C:
				if quiet() < idle {
					continue
				}
			}
			client.Close()
			up.Close()
			return
		}
	}()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		in = pipe(client, up, &last, kernel)
	}()
	out = pipe(up, client, &last, kernel)
	wg.Wait()
	close(done)
	return out, in
}

// lastData is how long ago c last received data, from the kernel, for a TCP socket.
func lastData(c net.Conn) (time.Duration, bool) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return 0, false
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return 0, false
	}
	var info *unix.TCPInfo
	var gerr error
	if err := raw.Control(func(fd uintptr) {
		info, gerr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	}); err != nil || gerr != nil {
		return 0, false
	}
	return time.Duration(info.Last_data_recv) * time.Millisecond, true
}

// pipe copies src to dst; at src's end it half-closes dst, on an error it closes both. With
// kernel set, both are TCP sockets and the bytes move by splice(2) (kernelCopy).
func pipe(dst, src net.Conn, last *atomic.Int64, kernel bool) int64 {
	var n int64
	var err error
	if kernel {
		n, err = kernelCopy(dst.(*net.TCPConn), src.(*net.TCPConn))
	} else {
		buf := bufPool.Get().(*[]byte)
		n, err = io.CopyBuffer(writerOnly{dst}, activity{src, last}, *buf)
		bufPool.Put(buf)
	}
	if cw, ok := dst.(interface{ CloseWrite() error }); ok && err == nil {
		cw.CloseWrite()
	} else {
		dst.Close()
		src.Close()
	}
	return n
}

// activity notes the time of every read that moved bytes.
type activity struct {
	r    io.Reader
	last *atomic.Int64
}

func (a activity) Read(p []byte) (int, error) {
	n, err := a.r.Read(p)
	if n > 0 {
		a.last.Store(time.Now().UnixNano())
	}
	return n, err
}

// Dial connects to addr, or, with an upstream proxy, asks it for a tunnel to hostPort. The
// upstream resolves the name again: when chaining, rebinding protection is its concern too.
func Dial(ctx context.Context, dial func(context.Context, string, string) (net.Conn, error), upstream *url.URL, addr netip.AddrPort, hostPort string) (net.Conn, error) {
	if upstream == nil {
		return dial(ctx, "tcp", addr.String())
	}
	return DialConnect(ctx, dial, upstream, hostPort)
}

// DialConnect opens a tunnel to target (host:port) through the HTTP proxy upstream, sending
// upstream's userinfo as Basic Proxy-Authorization. The deadline of ctx bounds the exchange.
func DialConnect(ctx context.Context, dial func(context.Context, string, string) (net.Conn, error), upstream *url.URL, target string) (net.Conn, error) {
	c, err := dial(ctx, "tcp", upstream.Host)
	if err != nil {
		return nil, err
	}
	auth := ""
	if u := upstream.User; u != nil {
		p, _ := u.Password()
		auth = "Proxy-Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte(u.Username()+":"+p)) + "\r\n"
	}
	dl, _ := ctx.Deadline()
	c.SetDeadline(dl)
	br := bufio.NewReader(c)
	_, err = fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n%s\r\n", target, target, auth)
	var resp *http.Response
	if err == nil {
		resp, err = http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	}
	switch {
	case err != nil:
	case resp.StatusCode != http.StatusOK:
		err = fmt.Errorf("upstream proxy answered %s", resp.Status)
	case br.Buffered() > 0:
		err = errors.New("upstream proxy sent data before the tunnel started")
	}
	if err != nil {
		c.Close()
		return nil, err
	}
	c.SetDeadline(time.Time{})
	return c, nil
}
