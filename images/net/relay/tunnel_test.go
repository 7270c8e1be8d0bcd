package relay

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"runtime/debug"
	"testing"
	"time"
)

// clientHello returns the first flight a TLS client sends for serverName.
func clientHello(t testing.TB, serverName string) []byte {
	a, b := net.Pipe()
	go func() {
		tls.Client(a, &tls.Config{ServerName: serverName, InsecureSkipVerify: serverName == ""}).Handshake()
	}()
	defer a.Close()
	defer b.Close()
	b.SetReadDeadline(time.Now().Add(5 * time.Second))
	var got []byte
	buf := make([]byte, 64<<10)
	for len(got) < 5 || len(got) < 5+int(got[3])<<8+int(got[4]) {
		n, err := b.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, buf[:n]...)
	}
	return got
}

func TestPeekHello(t *testing.T) {
	hello := clientHello(t, "allowed.test")
	for _, tc := range []struct {
		name string
		in   []byte
		sni  string
	}{
		{"with sni", hello, "allowed.test"},
		{"with sni and early bytes", append(append([]byte{}, hello...), "more"...), "allowed.test"},
		{"without sni", clientHello(t, ""), ""},
		{"plaintext", []byte("GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n"), ""},
		{"truncated", hello[:len(hello)/2], ""},
		{"empty", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			br := bufio.NewReader(bytes.NewReader(tc.in))
			got, sni := PeekHello(br)
			if sni != tc.sni {
				t.Fatalf("sni %q; want %q", sni, tc.sni)
			}
			if !bytes.HasPrefix(tc.in, got) || br.Buffered() != 0 {
				t.Fatalf("returned %d bytes that are not what was read (%d left buffered)", len(got), br.Buffered())
			}
			if tc.sni != "" && !bytes.Equal(got, tc.in) {
				t.Fatalf("kept %d of %d bytes to replay", len(got), len(tc.in))
			}
		})
	}
}

// FuzzPeekHello: never panic, and return exactly a prefix of what the caller sent.
func FuzzPeekHello(f *testing.F) {
	hello := clientHello(f, "allowed.test")
	f.Add(hello)
	f.Add(hello[:40])
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))
	f.Add([]byte{22, 3, 1, 0, 4, 1, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		br := bufio.NewReader(bytes.NewReader(b))
		got, sni := PeekHello(br)
		if !bytes.HasPrefix(b, got) {
			t.Fatalf("returned bytes that were not sent")
		}
		if sni != "" && (len(got) < 5 || got[0] != 22) {
			t.Fatalf("SNI %q from something that is not a handshake record", sni)
		}
	})
}

// tcpPair returns the two ends of a loopback TCP connection (net.Pipe cannot half-close).
func TestSpliceHalfClose(t *testing.T) {
	caller, near := tcpPair(t)
	far, server := tcpPair(t)
	type result struct{ out, in int64 }
	done := make(chan result, 1)
	go func() {
		out, in := Splice(near, far, time.Minute, time.Minute, nil)
		done <- result{out, in}
	}()
	io.WriteString(caller, "ping")
	caller.(*net.TCPConn).CloseWrite()
	got, err := io.ReadAll(server) // ends: the caller's half-close was passed on
	if err != nil || string(got) != "ping" {
		t.Fatalf("server read %q, %v", got, err)
	}
	io.WriteString(server, "pong!") // the other direction still works
	server.Close()
	if got, err := io.ReadAll(caller); err != nil || string(got) != "pong!" {
		t.Fatalf("caller read %q, %v", got, err)
	}
	if r := <-done; r.out != 4 || r.in != 5 {
		t.Fatalf("counted out=%d in=%d; want 4 and 5", r.out, r.in)
	}
}

func TestSpliceEnds(t *testing.T) {
	for _, tc := range []struct {
		name string
		idle time.Duration
		stop bool
	}{
		{"idle", 30 * time.Millisecond, false},
		{"stop", time.Hour, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			caller, near := tcpPair(t)
			far, _ := tcpPair(t)
			stop := make(chan struct{})
			if tc.stop {
				close(stop)
			}
			go Splice(near, far, tc.idle, time.Hour, stop)
			caller.SetReadDeadline(time.Now().Add(10 * time.Second))
			if _, err := caller.Read(make([]byte, 1)); err != io.EOF {
				t.Fatalf("read %v; want EOF once the tunnel ends", err)
			}
		})
	}
}

func TestDialConnect(t *testing.T) {
	for _, tc := range []struct {
		name, answer string
		ok           bool
	}{
		{"ok", "HTTP/1.1 200 OK\r\n\r\n", true},
		{"refused", "HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 0\r\n\r\n", false},
		{"early data", "HTTP/1.1 200 OK\r\n\r\nsurprise", false},
		{"garbage", "SSH-2.0-x\r\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			seen := make(chan string, 1)
			go func() {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				defer c.Close()
				req, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil {
					seen <- err.Error()
					return
				}
				seen <- req.Method + " " + req.RequestURI + " " + req.Header.Get("Proxy-Authorization")
				io.WriteString(c, tc.answer)
				time.Sleep(50 * time.Millisecond) // let the early data arrive with the answer
			}()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			up := &url.URL{Host: ln.Addr().String(), User: url.UserPassword("u", "p")}
			c, err := DialConnect(ctx, (&net.Dialer{}).DialContext, up, "allowed.test:443")
			if (err == nil) != tc.ok {
				t.Fatalf("DialConnect: %v; want ok=%v", err, tc.ok)
			}
			if c != nil {
				c.Close()
			}
			if got := <-seen; got != "CONNECT allowed.test:443 Basic dTpw" {
				t.Fatalf("upstream saw %q", got)
			}
		})
	}
}

// TestSpliceKeepsActiveTunnels: bytes trickling through a spliced TCP tunnel, slower than the
// idle limit in total but faster than it between bytes, keep it open (the kernel's TCP_INFO is
// the activity clock there), and then quiet ends it.
func TestSpliceKeepsActiveTunnels(t *testing.T) {
	caller, near := tcpPair(t)
	far, origin := tcpPair(t)
	if _, ok := lastData(near); !ok {
		t.Fatal("TCP_INFO is not readable on this kernel: the spliced path is not under test")
	}
	const idle = 200 * time.Millisecond
	ended := make(chan struct{})
	go func() { Splice(near, far, idle, time.Hour, nil); close(ended) }()
	buf := make([]byte, 1)
	for i := 0; i < 12; i++ { // 12 × 50 ms: three times the idle limit in all
		if _, err := caller.Write([]byte{byte(i)}); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		origin.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.ReadFull(origin, buf); err != nil || buf[0] != byte(i) {
			t.Fatalf("byte %d through the tunnel: %v %v", i, buf, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	select {
	case <-ended:
		t.Fatal("the tunnel ended while bytes were moving")
	default:
	}
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the tunnel did not end once quiet for longer than the idle limit")
	}
}

// openFiles counts this process's file descriptors.
func openFiles(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// TestSplicePipesAreTheTunnels: a spliced tunnel holds PipeFiles descriptors besides its two
// sockets while it runs, moves every byte exactly both ways, and gives the pipes back when it
// ends, not when the collector runs: net's file budget counts on it (a tunnel through io.Copy
// left the Go runtime's pooled pipes open after it, docs/load.md). Without kernelCopy's own
// pipes, the count after the tunnels end stays up by the pooled pipes.
func TestSplicePipesAreTheTunnels(t *testing.T) {
	// No collection during the test: pooled pipes would be closed by one at random, and the
	// count after the tunnels would pass or fail by chance.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	const tunnels = 20
	type ends struct{ caller, origin net.Conn }
	var open []ends
	var near []net.Conn
	for i := 0; i < tunnels; i++ {
		c, n := tcpPair(t)
		f, o := tcpPair(t)
		open = append(open, ends{c, o})
		near = append(near, n, f)
	}
	before := openFiles(t)
	done := make(chan [2]int64, tunnels)
	for i := 0; i < tunnels; i++ {
		go func() {
			out, in := Splice(near[2*i], near[2*i+1], time.Minute, time.Minute, nil)
			done <- [2]int64{out, in}
		}()
	}
	up := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB each way
	down := bytes.Repeat([]byte("fedcba9876543210"), 64<<10)
	// Every tunnel is open (its first bytes through) before the count.
	for _, e := range open {
		e.caller.Write(up[:1])
		e.origin.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.ReadFull(e.origin, make([]byte, 1)); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := openFiles(t)-before, tunnels*PipeFiles; got != want {
		t.Fatalf("%d tunnels hold %d descriptors besides their sockets; want %d (PipeFiles each)", tunnels, got, want)
	}
	errs := make(chan error, 2*tunnels)
	for _, e := range open {
		go func() {
			_, err := e.caller.Write(up[1:])
			e.caller.(*net.TCPConn).CloseWrite()
			errs <- err
		}()
		go func() {
			_, err := e.origin.Write(down)
			e.origin.(*net.TCPConn).CloseWrite()
			errs <- err
		}()
	}
	for _, e := range open {
		e.origin.SetReadDeadline(time.Now().Add(30 * time.Second))
		got, err := io.ReadAll(e.origin)
		if err != nil || !bytes.Equal(got, up[1:]) {
			t.Fatalf("origin read %d bytes (%v); want the caller's %d exactly", len(got), err, len(up)-1)
		}
		e.caller.SetReadDeadline(time.Now().Add(30 * time.Second))
		got, err = io.ReadAll(e.caller)
		if err != nil || !bytes.Equal(got, down) {
			t.Fatalf("caller read %d bytes (%v); want the origin's %d exactly", len(got), err, len(down))
		}
	}
	for i := 0; i < 2*tunnels; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < tunnels; i++ {
		if r := <-done; r[0] != int64(len(up)) || r[1] != int64(len(down)) {
			t.Fatalf("counted out=%d in=%d; want %d and %d", r[0], r[1], len(up), len(down))
		}
	}
	for _, e := range open {
		e.caller.Close()
		e.origin.Close()
	}
	for _, c := range near { // Splice's caller closes its two sockets
		c.Close()
	}
	if got, want := openFiles(t), before-4*tunnels; got != want {
		t.Fatalf("after the tunnels ended %d descriptors are open; want %d (their pipes closed with them)", got, want)
	}
}
