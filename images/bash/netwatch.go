package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"io"
	"log/slog"
	"net"
	"net/textproto"
	"strconv"
	"strings"
	"sync"
	"time"
)

// netWatch is the proxy address build's sandboxes are given: a relay on the container's loopback
// to net's proxy that reads the answer to the first request of each connection and keeps net's
// refusals (an answer with X-Sharness-Deny), so that a tool result can say in a plain line that
// net refused a request the command made. curl prints only "CONNECT tunnel failed, response
// 403", and a person could not tell the harness working from the harness broken (issue 21).
//
// It observes and decides nothing: the sandbox's Landlock domain lets it connect to the proxy's
// port on any address, so a program that goes to net directly loses only the line. It reads the
// first answer of a connection alone; net closes a connection after a refusal, so a refusal that
// follows allowed plain-HTTP requests on one connection is not reported.
type netWatch struct {
	upstream string // net's proxy, host:port
	log      *slog.Logger
	slots    chan struct{} // one per connection relayed; nil: maxRelayed

	mu   sync.Mutex
	seen []netRefusal // the last maxRefusals, oldest first
}

// netRefusal is one of net's refusals as the relay saw it.
type netRefusal struct {
	at      time.Time
	request string // the request line's method and target, as the sandbox sent them
	rule    string // X-Sharness-Deny
	reason  string // the first line of net's answer's body
}

const (
	maxRefusals   = 64
	maxRelayed    = 128      // connections relayed at once: net's own cap per caller
	maxHeadBytes  = 64 << 10 // an answer's head the relay reads, at most
	maxLineBytes  = 256      // of a request line or a reason kept
	relayDialWait = 10 * time.Second
)

// serve relays each connection ln accepts to the upstream proxy until ctx ends, at most
// maxRelayed at once: a sandbox opening connections without end would otherwise spend the
// server's own descriptors (two a connection), and with them its MCP calls; one over the cap is
// closed at once, as net closes one over its cap.
func (w *netWatch) serve(ctx context.Context, ln net.Listener) {
	if w.slots == nil {
		w.slots = make(chan struct{}, maxRelayed)
	}
	go func() { <-ctx.Done(); ln.Close() }()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() == nil {
				w.log.Warn("proxy relay: accept", "error", err.Error())
			}
			return
		}
		select {
		case w.slots <- struct{}{}:
			go func() {
				defer func() { <-w.slots }()
				w.relay(c)
			}()
		default:
			c.Close()
		}
	}
}

// relay copies one connection both ways, reading the first request line on its way up and the
// first answer's head on its way down.
func (w *netWatch) relay(c net.Conn) {
	defer c.Close()
	up, err := net.DialTimeout("tcp", w.upstream, relayDialWait)
	if err != nil {
		w.log.Warn("proxy relay: dial net", "error", err.Error())
		return
	}
	defer up.Close()
	first := make(chan string, 1)
	go func() {
		defer closeWrite(up)
		buf := make([]byte, 4096)
		n, err := c.Read(buf) // the request line, unless a client sends less than one at first
		first <- requestOf(buf[:n])
		if n > 0 {
			if _, werr := up.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err == nil {
			io.Copy(up, c)
		}
	}()
	br := bufio.NewReaderSize(up, 4096)
	head, status, deny, length, err := readHead(br)
	var body []byte
	if err == nil && deny != "" {
		// Kept before the sandbox reads a byte of the answer: the tool asks for the refusals as
		// soon as the command ends, which may be as soon as it has read them.
		body = make([]byte, min(max(length, 0), maxLineBytes))
		n, _ := io.ReadFull(br, body)
		body = body[:n]
		reason, _, _ := strings.Cut(string(body), "\n")
		reason = strings.TrimPrefix(strings.TrimPrefix(reason, "sharness net refused this request: "), "rule "+deny+": ")
		var request string
		select {
		case request = <-first:
		case <-time.After(time.Second):
		}
		w.add(netRefusal{at: time.Now(), request: request, rule: deny + " (" + strconv.Itoa(status) + ")", reason: reason})
	}
	if _, werr := c.Write(append(head, body...)); werr != nil || err != nil {
		return
	}
	io.Copy(c, br)
}

// closeWrite ends the upstream's half of the stream, so that it sees the sandbox's end.
func closeWrite(c net.Conn) {
	if t, ok := c.(*net.TCPConn); ok {
		t.CloseWrite()
	}
}

// requestOf is the method and target of the request line at the start of b, cut to
// maxLineBytes; "" when b holds no line yet.
func requestOf(b []byte) string {
	line, _, ok := bytes.Cut(b, []byte("\r\n"))
	if !ok {
		line, _, ok = bytes.Cut(b, []byte("\n"))
	}
	if !ok {
		return ""
	}
	f := strings.Fields(string(line))
	if len(f) < 2 {
		return ""
	}
	return clip(f[0]+" "+f[1], maxLineBytes)
}

// readHead reads an answer's status line and headers, and returns their bytes as read, the
// status, X-Sharness-Deny and Content-Length (-1 if none). An error is a head that does not
// end within maxHeadBytes or does not parse; the bytes read are returned all the same.
func readHead(br *bufio.Reader) (head []byte, status int, deny string, length int, err error) {
	length = -1
	for n := 0; ; n++ {
		line, err := br.ReadSlice('\n')
		head = append(head, line...)
		if err != nil || len(head) > maxHeadBytes {
			return head, 0, "", -1, io.ErrUnexpectedEOF
		}
		text := strings.TrimRight(string(line), "\r\n")
		switch {
		case n == 0:
			f := strings.Fields(text)
			if len(f) < 2 || !strings.HasPrefix(f[0], "HTTP/") {
				return head, 0, "", -1, io.ErrUnexpectedEOF
			}
			status, _ = strconv.Atoi(f[1])
		case text == "":
			return head, status, deny, length, nil
		default:
			k, v, _ := strings.Cut(text, ":")
			switch textproto.CanonicalMIMEHeaderKey(strings.TrimSpace(k)) {
			case "X-Sharness-Deny":
				deny = clip(strings.TrimSpace(v), maxLineBytes)
			case "Content-Length":
				length, _ = strconv.Atoi(strings.TrimSpace(v))
			}
		}
	}
}

func (w *netWatch) add(r netRefusal) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen = append(w.seen, r)
	if len(w.seen) > maxRefusals {
		w.seen = w.seen[len(w.seen)-maxRefusals:]
	}
}

// since returns the refusals seen at or after t, oldest first.
func (w *netWatch) since(t time.Time) []netRefusal {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []netRefusal
	for _, r := range w.seen {
		if !r.at.Before(t) {
			out = append(out, r)
		}
	}
	return out
}

// netLines are the plain lines a tool result gets for refusals: what was asked and net's rule
// and reason.
func netLines(rs []netRefusal) string {
	if len(rs) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\nnet refused " + strconv.Itoa(len(rs)) + " request(s) made from bash's sandboxes while this command ran (the policy's allowlist decides; ask the person running SHarness to change it):")
	for _, r := range rs {
		b.WriteString("\n  " + cmp.Or(r.request, "a request") + ": rule " + r.rule)
		if r.reason != "" {
			b.WriteString(": " + r.reason)
		}
	}
	return b.String()
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
