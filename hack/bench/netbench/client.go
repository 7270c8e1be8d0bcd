package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// client reaches the origin through a peer. Its sockets are bound to the caller's source
// address, for every peer alike; IP_BIND_ADDRESS_NO_PORT lets the kernel pick the port at
// connect time, per destination, so thousands of short connections do not run out of ports.
type client struct {
	w *world
	d *net.Dialer
}

func newClient(w *world, src netip.Addr) *client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: src.AsSlice()}, Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_BIND_ADDRESS_NO_PORT, 1)
		})
		return errors.Join(err, serr)
	}}
	return &client{w: w, d: d}
}

// statusError is an answer other than 200; Why holds the X-Sharness-Deny or X-Sharness-Error
// field, when there is one.
type statusError struct {
	Code int
	Why  string
}

func (e *statusError) Error() string { return fmt.Sprintf("%d %s", e.Code, e.Why) }

func answerError(resp *http.Response) error {
	return &statusError{Code: resp.StatusCode, Why: resp.Header.Get("X-Sharness-Deny") + resp.Header.Get("X-Sharness-Error")}
}

// errorKind is the short name an error is counted under.
func errorKind(err error) string {
	if se, ok := errors.AsType[*statusError](err); ok {
		return se.Error()
	}
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		return "timeout"
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return "closed"
	}
	return "other"
}

// tunnel opens a TLS connection to the origin's HTTPS port through p: for a proxy, a CONNECT
// naming the origin, then the TLS handshake inside it (server name and certificate checked).
func (cl *client) tunnel(ctx context.Context, p *peer) (*conv, error) {
	c, err := cl.reach(ctx, p, cl.w.tlsPort, cl.w.tlsAuthority())
	if err != nil {
		return nil, err
	}
	tc := tls.Client(c, &tls.Config{ServerName: cl.w.name, RootCAs: cl.w.roots, NextProtos: []string{"http/1.1"}})
	if err := tc.HandshakeContext(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return newConv(tc), nil
}

// rawBulk reads n plain bytes from the origin's raw port through p (see serveRaw): a tunnel,
// a TLS handshake inside it (server name and certificate checked) and the count, then the
// bytes on the bare connection. It returns MB/s from the count's write to the last byte.
func (cl *client) rawBulk(ctx context.Context, p *peer, n int64) (float64, error) {
	c, err := cl.reach(ctx, p, cl.w.rawPort, cl.w.rawAuthority())
	if err != nil {
		return 0, err
	}
	defer c.Close()
	tc := tls.Client(c, &tls.Config{ServerName: cl.w.name, RootCAs: cl.w.roots, MinVersion: tls.VersionTLS13})
	if err := tc.HandshakeContext(ctx); err != nil {
		return 0, err
	}
	t0 := time.Now()
	if _, err := tc.Write(binary.BigEndian.AppendUint64(nil, uint64(n))); err != nil {
		return 0, err
	}
	got, err := io.CopyBuffer(io.Discard, io.LimitReader(c, n), make([]byte, 256<<10))
	el := time.Since(t0)
	if err == nil && got != n {
		err = fmt.Errorf("got %d of %d bytes", got, n)
	}
	return float64(got) / el.Seconds() / 1e6, err
}

// plain opens a connection for plain HTTP: to the proxy, or straight to the origin.
func (cl *client) plain(ctx context.Context, p *peer) (*conv, error) {
	c, err := cl.reach(ctx, p, cl.w.httpPort, "")
	if err != nil {
		return nil, err
	}
	return newConv(c), nil
}

// reach dials the origin's port, or p's proxy, bound by ctx's deadline; through a proxy, with
// an authority, it asks for a tunnel to it.
func (cl *client) reach(ctx context.Context, p *peer, port uint16, authority string) (net.Conn, error) {
	to := net.JoinHostPort(cl.w.addr.String(), strconv.Itoa(int(port)))
	if p.proxy != "" {
		to = p.proxy
	}
	c, err := cl.d.DialContext(ctx, "tcp", to)
	if err != nil {
		return nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	if p.proxy != "" && authority != "" {
		if err := connect(c, authority); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

// connect asks the proxy on c for a tunnel to authority.
func connect(c net.Conn, authority string) error {
	if _, err := fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", authority, authority); err != nil {
		return err
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return answerError(resp)
	}
	if br.Buffered() > 0 {
		return errors.New("the proxy sent bytes after its 200")
	}
	return nil
}

// conv is one HTTP/1.1 connection the client writes requests to and reads answers from.
type conv struct {
	c   net.Conn
	br  *bufio.Reader
	buf []byte
}

func newConv(c net.Conn) *conv {
	return &conv{c: c, br: bufio.NewReaderSize(c, 64<<10), buf: make([]byte, 64<<10)}
}

// get sends req (a complete request head) and reads the whole answer. It returns the body's
// length and whether the connection may carry another request.
func (v *conv) get(req string) (int64, bool, error) {
	if _, err := io.WriteString(v.c, req); err != nil {
		return 0, false, err
	}
	resp, err := http.ReadResponse(v.br, nil)
	if err != nil {
		return 0, false, err
	}
	defer resp.Body.Close()
	var n int64
	for {
		k, err := resp.Body.Read(v.buf)
		n += int64(k)
		if err == io.EOF {
			break
		} else if err != nil {
			return n, false, err
		}
	}
	if resp.StatusCode != http.StatusOK {
		return n, false, answerError(resp)
	}
	return n, !resp.Close, nil
}

// Request heads. Plain HTTP through a proxy names the absolute URI.
func (cl *client) smallReq() string {
	return "GET /small HTTP/1.1\r\nHost: " + cl.w.tlsAuthority() + "\r\n\r\n"
}

func (cl *client) streamReq(n int64) string {
	return "GET /stream?bytes=" + strconv.FormatInt(n, 10) + " HTTP/1.1\r\nHost: " + cl.w.tlsAuthority() + "\r\n\r\n"
}

func (cl *client) plainReq(p *peer) string {
	target := "/small"
	if p.proxy != "" {
		target = "http://" + cl.w.httpAuthority() + "/small"
	}
	return "GET " + target + " HTTP/1.1\r\nHost: " + cl.w.httpAuthority() + "\r\n\r\n"
}

// newConnGet is one whole new-connection request: tunnel, TLS, a small GET, close.
func (cl *client) newConnGet(ctx context.Context, p *peer) error {
	v, err := cl.tunnel(ctx, p)
	if err != nil {
		return err
	}
	defer v.c.Close()
	n, _, err := v.get(cl.smallReq())
	if err == nil && n != smallBody {
		err = fmt.Errorf("body of %d bytes, want %d", n, smallBody)
	}
	return err
}
