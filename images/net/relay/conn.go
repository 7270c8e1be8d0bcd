// Package relay holds the mechanics of net's forward proxy, which decide nothing. For plain
// HTTP/1.1: serving a connection's requests under timeouts, reading a request head strictly,
// forwarding a plain request as a fresh one and relaying its response with fresh framing,
// chaining through an upstream proxy, and tracking connections for a graceful shutdown. For a
// CONNECT tunnel: opening the upstream side (the checked address, or a tunnel through an
// upstream HTTP proxy), answering 200, reading the caller's TLS ClientHello without answering
// it, replaying it upstream only when its server name is the CONNECT host, and splicing both
// ways with half-closes, an idle limit, a lifetime and a stop signal.
//
// What it does not guarantee: it checks no caller, host, port or address (images/net/egress
// decides and images/net wires the decisions in) and resolves no name: every address it dials
// was handed to it. The server-name check only binds the ClientHello to the host: it
// terminates no TLS, checks no certificate, and sees nothing of the encrypted bytes that
// follow, so a caller's traffic inside a tunnel is not inspected. Through an upstream proxy,
// the upstream resolves the name again.
package relay

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/sharness-ai/sharness/images/net/egress"
)

// Limits bound one connection's requests and tunnels.
type Limits struct {
	Header    time.Duration // for a whole request head, a TLS handshake, a ClientHello
	KeepAlive time.Duration // to start the next request on a connection
	Idle      time.Duration // a tunnel, upload or download with no traffic
	Lifetime  time.Duration // a tunnel's whole life
	MaxHeader int           // request line and header fields, bytes
}

// Loop serves the requests of c (raw is the connection Run tracks; c may wrap it in TLS)
// until serve reports that c cannot carry another. A request must start within KeepAlive and
// its head arrive within Header. serve gets the request, or nil and the refusal (with its
// status) of a head that could not be read, which it must answer.
func (cs *Conns) Loop(raw, c net.Conn, lim Limits, serve func(br *bufio.Reader, req *http.Request, status int, d egress.Decision) bool) {
	br, _ := readers.Get().(*bufio.Reader)
	if br == nil || br.Size() != lim.MaxHeader {
		br = bufio.NewReaderSize(nil, lim.MaxHeader)
	}
	br.Reset(c)
	for cs.Idle(raw, true) {
		c.SetReadDeadline(time.Now().Add(lim.KeepAlive))
		if _, err := br.Peek(1); err != nil || !cs.Idle(raw, false) {
			break
		}
		c.SetReadDeadline(time.Now().Add(lim.Header))
		req, status, d := ReadRequest(br, lim.MaxHeader)
		if !serve(br, req, status, d) || req == nil {
			if req != nil && req.ContentLength != 0 {
				return // a Transport may still read the body from br (http.RoundTripper)
			}
			break
		}
	}
	br.Reset(nil) // nothing reads br any more: another connection may use it
	readers.Put(br)
}

// readers are request-head buffers, kept between connections.
var readers sync.Pool

// ReadRequest reads one request head of at most max bytes from br (whose buffer must hold max
// bytes) and parses it. The raw head is checked before Go parses it, because Go's parser
// resolves a Content-Length + Transfer-Encoding conflict silently, and RFC 9112 §6.1 lets an
// intermediary refuse it (request smuggling). A refusal comes with its HTTP status
// (egress.Status); the caller sets the read deadline that makes a slow head time out.
func ReadRequest(br *bufio.Reader, max int) (*http.Request, int, egress.Decision) {
	for {
		buf, _ := br.Peek(br.Buffered())
		if end := headEnd(buf); end >= 0 {
			if hasField(buf[:end], "content-length") && hasField(buf[:end], "transfer-encoding") {
				return refuse(egress.RuleCLTEConflict, "")
			}
			break
		}
		if br.Buffered() >= max {
			return refuse(egress.RuleHeaderTooBig, fmt.Sprintf("the request head is over %d bytes", max))
		}
		if _, err := br.Peek(br.Buffered() + 1); err != nil {
			if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
				return refuse(egress.RuleHeaderTimeout, "")
			}
			return refuse(egress.RuleMalformed, "the connection ended inside a request head")
		}
	}
	req, err := http.ReadRequest(br)
	if err != nil {
		return refuse(egress.RuleMalformed, "")
	}
	return req, 0, egress.Decision{}
}

// refuse is ReadRequest's refusal naming rule, with its status (egress.Status).
func refuse(rule, reason string) (*http.Request, int, egress.Decision) {
	return nil, egress.Status(rule), egress.Deny(rule, reason)
}

// headEnd returns the length of the head in b through its empty line (CRLF or bare LF, as
// Go's parser accepts both), or -1.
func headEnd(b []byte) int {
	for i := bytes.IndexByte(b, '\n'); i >= 0; {
		rest := b[i+1:]
		switch {
		case bytes.HasPrefix(rest, []byte("\n")):
			return i + 2
		case bytes.HasPrefix(rest, []byte("\r\n")):
			return i + 3
		}
		j := bytes.IndexByte(rest, '\n')
		if j < 0 {
			return -1
		}
		i += 1 + j
	}
	return -1
}

// hasField reports whether a line of head after the request line names the field name.
func hasField(head []byte, name string) bool {
	_, rest, _ := bytes.Cut(head, []byte("\n"))
	for len(rest) > 0 {
		var l []byte
		l, rest, _ = bytes.Cut(rest, []byte("\n"))
		if k, _, ok := bytes.Cut(l, []byte(":")); ok && strings.EqualFold(string(bytes.TrimSpace(k)), name) {
			return true
		}
	}
	return false
}

// Reply writes a complete text response that closes the connection, with one extra field.
func Reply(c net.Conn, timeout time.Duration, status int, key, value, body string) error {
	c.SetWriteDeadline(time.Now().Add(timeout))
	_, err := fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\n%s: %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		status, http.StatusText(status), key, value, len(body), body)
	return err
}

// Linger half-closes c and reads what the peer still sends for up to d, so that a reply sent
// while the peer was still writing is not destroyed by a TCP reset (net/http does the same).
func Linger(c net.Conn, d time.Duration) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok && cw.CloseWrite() == nil {
		c.SetReadDeadline(time.Now().Add(d))
		io.Copy(io.Discard, io.LimitReader(c, 256<<10))
	}
}

// Conns runs a goroutine per accepted connection and shuts them down gracefully. Stop is
// closed when the grace period of a shutdown ends: tunnels watch it.
type Conns struct {
	Stop     chan struct{}
	mu       sync.Mutex
	idle     map[net.Conn]bool
	draining bool
	wg       sync.WaitGroup
}

// NewConns returns a Conns tracking nothing yet.
func NewConns() *Conns { return &Conns{Stop: make(chan struct{}), idle: map[net.Conn]bool{}} }

// Run accepts connections on every listener and runs serve (with the listener's index) on each
// until ctx ends; then it closes the listeners and shuts down: idle connections close at once,
// the others get grace to finish, then Stop is closed and every connection left is closed.
func (cs *Conns) Run(ctx context.Context, lns []net.Listener, serve func(int, net.Conn), onErr func(error), grace time.Duration) {
	var wg sync.WaitGroup
	for i, ln := range lns {
		wg.Go(func() { cs.serve(ln, func(c net.Conn) { serve(i, c) }, onErr) })
	}
	<-ctx.Done()
	for _, ln := range lns {
		ln.Close()
	}
	wg.Wait()
	cs.shutdown(grace)
}

// serve accepts connections on ln until it is closed and runs serve on each. Accept errors
// (out of descriptors) are retried; a panic is reported to onErr and ends its connection.
func (cs *Conns) serve(ln net.Listener, serve func(net.Conn), onErr func(error)) {
	for {
		c, err := ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			onErr(err)
			time.Sleep(50 * time.Millisecond)
			continue
		}
		cs.wg.Add(1)
		go func() {
			defer cs.wg.Done()
			defer cs.forget(c)
			defer func() {
				if p := recover(); p != nil { // a bug ends one connection, not the proxy
					c.Close()
					onErr(fmt.Errorf("panic serving %s: %v", c.RemoteAddr(), p))
				}
			}()
			if cs.Idle(c, false) {
				serve(c)
			}
		}()
	}
}

// Idle records whether c is waiting for a request (idle) or serving one; it reports false
// once shutdown began and c would wait for another request.
func (cs *Conns) Idle(c net.Conn, idle bool) bool {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if idle && cs.draining {
		return false
	}
	cs.idle[c] = idle
	return true
}

func (cs *Conns) forget(c net.Conn) {
	cs.mu.Lock()
	delete(cs.idle, c)
	cs.mu.Unlock()
}

func (cs *Conns) shutdown(grace time.Duration) {
	cs.closeAll(true)
	done := make(chan struct{})
	go func() { cs.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
		close(cs.Stop)
		cs.closeAll(false)
		<-done
	}
}

func (cs *Conns) closeAll(idleOnly bool) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.draining = true
	for c, idle := range cs.idle {
		if idle || !idleOnly {
			c.Close()
		}
	}
}
