package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fakeNet answers the first request of each connection as net would: a refusal (with
// X-Sharness-Deny) for CONNECT to a host other than allowed.example, else 200 and an echo of
// the tunnel.
func fakeNet(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				req, err := http.ReadRequest(br)
				if err != nil {
					return
				}
				if req.Host != "allowed.example:443" {
					body := "sharness net refused this request: rule host_not_allowed: evil.example is not in the allowlist\n"
					io.WriteString(c, "HTTP/1.1 403 Forbidden\r\nX-Sharness-Deny: host_not_allowed\r\nContent-Length: "+itoa(len(body))+"\r\nConnection: close\r\n\r\n"+body)
					return
				}
				io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n")
				io.Copy(c, br)
			}()
		}
	}()
	return ln.Addr().String()
}

func itoa(n int) string { return strconv.Itoa(n) }

func startWatch(t *testing.T) (*netWatch, string) {
	t.Helper()
	w := &netWatch{upstream: fakeNet(t), log: slog.New(slog.DiscardHandler)}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go w.serve(ctx, ln)
	return w, ln.Addr().String()
}

func TestNetWatchKeepsRefusals(t *testing.T) {
	w, addr := startWatch(t)
	t0 := time.Now()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(c, "CONNECT evil.example:443 HTTP/1.1\r\nHost: evil.example:443\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	c.Close()
	if resp.StatusCode != 403 || resp.Header.Get("X-Sharness-Deny") != "host_not_allowed" || !strings.Contains(string(body), "not in the allowlist") {
		t.Fatalf("the sandbox got %d %v %q, want net's refusal as it was", resp.StatusCode, resp.Header, body)
	}
	// Kept before the sandbox read the answer: no wait is needed here.
	got := w.since(t0)
	if len(got) != 1 || got[0].request != "CONNECT evil.example:443" || got[0].rule != "host_not_allowed (403)" || got[0].reason != "evil.example is not in the allowlist" {
		t.Fatalf("refusals: %+v", got)
	}
	line := netLines(got)
	for _, want := range []string{"net refused 1 request(s)", "CONNECT evil.example:443: rule host_not_allowed (403): evil.example is not in the allowlist"} {
		if !strings.Contains(line, want) {
			t.Errorf("the tool's line %q lacks %q", line, want)
		}
	}
	if w.since(time.Now()) != nil {
		t.Errorf("a refusal before the command's start is reported")
	}
}

func TestNetWatchRelaysTunnels(t *testing.T) {
	w, addr := startWatch(t)
	t0 := time.Now()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "CONNECT allowed.example:443 HTTP/1.1\r\nHost: allowed.example:443\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	big := strings.Repeat("tunnelled bytes ", 20000)
	go io.WriteString(c, big)
	got := make([]byte, len(big))
	if _, err := io.ReadFull(br, got); err != nil || string(got) != big {
		t.Fatalf("the tunnel's bytes came back %d of %d: %v", len(got), len(big), err)
	}
	if r := w.since(t0); len(r) != 0 {
		t.Errorf("an allowed tunnel reported as refused: %+v", r)
	}
	if netLines(nil) != "" {
		t.Errorf("no refusal, yet a line")
	}
}

func TestReadHead(t *testing.T) {
	for _, tt := range []struct {
		in     string
		status int
		deny   string
		length int
		ok     bool
	}{
		{"HTTP/1.1 403 Forbidden\r\nx-sharness-deny: r\r\ncontent-length: 5\r\n\r\nbody", 403, "r", 5, true},
		{"HTTP/1.1 200 OK\r\n\r\n", 200, "", -1, true},
		{"SSH-2.0-x\r\n\r\n", 0, "", -1, false},
		{"HTTP/1.1 403 Forbidden\r\nX-Sharness-Deny: r\r\n", 0, "", -1, false}, // cut short
		{"HTTP/1.1 200 OK\r\n" + strings.Repeat("X-A: b\r\n", 10000) + "\r\n", 0, "", -1, false},
	} {
		head, status, deny, length, err := readHead(bufio.NewReader(strings.NewReader(tt.in)))
		if (err == nil) != tt.ok || status != tt.status || deny != tt.deny || length != tt.length || !strings.HasPrefix(tt.in, string(head)) {
			t.Errorf("readHead(%.40q) = %d %q %d %v", tt.in, status, deny, length, err)
		}
	}
}

// FuzzRelayParsers: what the relay reads from a sandbox (its first bytes) and from net (an
// answer's head) never panics, a request is at most maxLineBytes, and the head returned is the
// bytes read, in order.
func FuzzRelayParsers(f *testing.F) {
	f.Add([]byte("CONNECT a.example:443 HTTP/1.1\r\nHost: a\r\n\r\n"))
	f.Add([]byte("HTTP/1.1 403 Forbidden\r\nX-Sharness-Deny: r\r\nContent-Length: 3\r\n\r\nabc"))
	f.Add([]byte("\n\n\r\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if r := requestOf(b); len(r) > maxLineBytes {
			t.Fatalf("request of %d bytes", len(r))
		}
		head, _, deny, _, _ := readHead(bufio.NewReader(bytes.NewReader(b)))
		if !bytes.HasPrefix(b, head) || len(deny) > maxLineBytes {
			t.Fatalf("head %q is not a prefix of the input, or deny %d bytes", head, len(deny))
		}
	})
}

// TestNetWatchCapsConnections: connections over the cap are closed at once, and a slot freed
// by a closed connection serves the next one.
func TestNetWatchCapsConnections(t *testing.T) {
	w := &netWatch{upstream: fakeNet(t), log: slog.New(slog.DiscardHandler), slots: make(chan struct{}, 2)}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go w.serve(ctx, ln)
	var held []net.Conn
	for range 2 { // each held open by a tunnel the fake net keeps
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(c, "CONNECT allowed.example:443 HTTP/1.1\r\nHost: allowed.example:443\r\n\r\n")
		if _, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodConnect}); err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	over, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	over.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := over.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("a connection over the cap: read %d, %v, want it closed", n, err)
	}
	held[0].Close()
	deadline := time.Now().Add(5 * time.Second)
	for len(w.slots) > 1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "CONNECT allowed.example:443 HTTP/1.1\r\nHost: allowed.example:443\r\n\r\n")
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodConnect}); err != nil || resp.StatusCode != 200 {
		t.Fatalf("after a slot was freed: %v %v", resp, err)
	}
	held[1].Close()
}
