package relay

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"time"
)

// DropHopByHop removes the fields that belong to one connection (RFC 9110 §7.6.1), the ones
// the Connection field names, and every Proxy-* field, so a caller's proxy credentials are
// never forwarded.
func DropHopByHop(h http.Header) {
	for _, v := range h.Values("Connection") {
		for _, name := range strings.Split(v, ",") {
			h.Del(strings.TrimSpace(name))
		}
	}
	for _, k := range []string{"Connection", "Keep-Alive", "Te", "Trailer", "Transfer-Encoding", "Upgrade"} {
		h.Del(k)
	}
	for k := range h {
		if strings.HasPrefix(k, "Proxy-") {
			delete(h, k)
		}
	}
}

type targetKey struct{}

type target struct {
	hostPort string
	addr     netip.AddrPort
}

// WithTarget records in ctx the one address a request for hostPort may be dialled to.
func WithTarget(ctx context.Context, hostPort string, addr netip.AddrPort) context.Context {
	return context.WithValue(ctx, targetKey{}, target{hostPort, addr})
}

// CheckedDialer returns a Transport's DialContext that dials only the address WithTarget
// recorded for the host:port being dialled (or upstream, when chaining): never a fresh
// resolution. Reads and writes on its connections must make progress within idle.
func CheckedDialer(dial func(context.Context, string, string) (net.Conn, error), upstream *url.URL, idle time.Duration) func(context.Context, string, string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		to := ""
		if t, ok := ctx.Value(targetKey{}).(target); upstream != nil {
			to = upstream.Host
		} else if ok && t.hostPort == addr {
			to = t.addr.String()
		}
		if to == "" {
			return nil, fmt.Errorf("refusing to dial %s: not an address net checked", addr)
		}
		c, err := dial(ctx, network, to)
		if err != nil {
			return nil, err
		}
		return idleConn{c, idle}, nil
	}
}

// idleConn ends a connection whose reads or writes stall for idle.
type idleConn struct {
	net.Conn
	idle time.Duration
}

func (c idleConn) Read(p []byte) (int, error) {
	c.SetReadDeadline(time.Now().Add(c.idle))
	return c.Conn.Read(p)
}

func (c idleConn) Write(p []byte) (int, error) {
	c.SetWriteDeadline(time.Now().Add(c.idle))
	return c.Conn.Write(p)
}

// Forward sends req as a fresh request to u (req's URL with the checked host, or the checked
// address) with the Host field host, through tr in ctx: hop-by-hop and Proxy-* fields dropped,
// the body, if any, cut at maxBody and required to keep moving within idle. It answers an
// Expect: 100-continue itself. A Transport never follows redirects: a 3xx comes back as it is.
func Forward(ctx context.Context, tr http.RoundTripper, c net.Conn, req *http.Request, u *url.URL, host string, maxBody int64, idle time.Duration) (*http.Response, error) {
	out, err := http.NewRequestWithContext(ctx, req.Method, u.String(), nil)
	if err != nil {
		return nil, err
	}
	out.Host = host
	out.Header = req.Header.Clone()
	DropHopByHop(out.Header)
	out.Header.Del("Expect")
	if req.ContentLength != 0 {
		if strings.EqualFold(req.Header.Get("Expect"), "100-continue") {
			io.WriteString(c, "HTTP/1.1 100 Continue\r\n\r\n")
		}
		out.Body = http.MaxBytesReader(nil, deadlineReader{req.Body, c, idle}, maxBody)
		out.ContentLength = req.ContentLength
	}
	return tr.RoundTrip(out)
}

// WriteResponse relays resp to the caller of req over c with fresh framing, flushing whenever
// it waits for more of resp's body, so a streamed response is not held back; a body whose
// length is known and fits the buffer goes out with the head, in one write. Each write must
// make progress within idle. It returns the body bytes written and whether c may carry
// another request (keep, unless the body had to be delimited by closing).
func WriteResponse(c net.Conn, req *http.Request, resp *http.Response, keep bool, idle time.Duration) (int64, bool, error) {
	out := *resp
	out.Header = resp.Header.Clone()
	DropHopByHop(out.Header)
	out.ProtoMajor, out.ProtoMinor, out.Close, out.Trailer = 1, 1, !keep, nil
	if !req.ProtoAtLeast(1, 1) {
		out.TransferEncoding = nil // an HTTP/1.0 caller reads to the end
	}
	if out.ContentLength < 0 && len(out.TransferEncoding) == 0 {
		out.Close = true
	}
	bw := writers.Get().(*bufio.Writer)
	defer func() { bw.Reset(io.Discard); writers.Put(bw) }()
	bw.Reset(deadlineWriter{c, idle})
	body := &flushingReader{r: resp.Body, bw: bw, hold: out.ContentLength >= 0 && out.ContentLength <= int64(bw.Size())}
	out.Body = body
	err := out.Write(writerOnly{bw}) // bufio's ReadFrom must not run into flushingReader's flushes
	if err == nil {
		err = bw.Flush()
	}
	return body.n, !out.Close, err
}

// writers are the response buffers, shared by all connections: one is held only while a
// response is relayed.
var writers = sync.Pool{New: func() any { return bufio.NewWriterSize(io.Discard, 32<<10) }}

// flushingReader flushes the caller's buffer before every read of the upstream body, unless
// it holds the body back until the end (a small one of known length).
type flushingReader struct {
	r    io.ReadCloser
	bw   *bufio.Writer
	hold bool
	n    int64
}

func (f *flushingReader) Read(p []byte) (int, error) {
	if !f.hold {
		if err := f.bw.Flush(); err != nil {
			return 0, err
		}
	}
	n, err := f.r.Read(p)
	f.n += int64(n)
	return n, err
}

func (f *flushingReader) Close() error { return f.r.Close() }

type deadlineWriter struct {
	c    net.Conn
	idle time.Duration
}

func (d deadlineWriter) Write(p []byte) (int, error) {
	d.c.SetWriteDeadline(time.Now().Add(d.idle))
	return d.c.Write(p)
}

// deadlineReader extends c's read deadline before every read of a request body, so a slow
// upload lives while it moves and a stalled one ends.
type deadlineReader struct {
	io.ReadCloser
	c    net.Conn
	idle time.Duration
}

func (d deadlineReader) Read(p []byte) (int, error) {
	d.c.SetReadDeadline(time.Now().Add(d.idle))
	return d.ReadCloser.Read(p)
}

// writerOnly hides a writer's ReadFrom, so io.CopyBuffer reads into its own (pooled) buffer.
type writerOnly struct{ io.Writer }
