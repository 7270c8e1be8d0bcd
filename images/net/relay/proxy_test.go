package relay

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sharness-ai/sharness/images/net/egress"
)

var requestCases = []struct {
	name, in string
	status   int
	rule     string
}{
	{"get", "GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n", 0, ""},
	{"connect", "CONNECT a.test:443 HTTP/1.1\r\n\r\n", 0, ""},
	{"bare lf", "GET http://a.test/ HTTP/1.1\nHost: a.test\n\n", 0, ""},
	{"cl te", "POST http://a.test/ HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400, "cl-te-conflict"},
	{"te cl", "POST http://a.test/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n", 400, "cl-te-conflict"},
	{"cl te odd case", "POST http://a.test/ HTTP/1.1\r\ncontent-LENGTH: 5\r\ntransfer-encoding: chunked\r\n\r\n", 400, "cl-te-conflict"},
	{"cl te space before colon", "POST http://a.test/ HTTP/1.1\r\nContent-Length : 5\r\nTransfer-Encoding: chunked\r\n\r\n", 400, "cl-te-conflict"},
	{"two lengths", "POST http://a.test/ HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400, "malformed-request"},
	{"unknown coding", "POST http://a.test/ HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", 400, "malformed-request"},
	{"garbage", "HELLO\r\n\r\n", 400, "malformed-request"},
	{"truncated", "GET http://a.test/ HTTP/1.1\r\nHost: a", 400, "malformed-request"},
	{"too large", "GET http://a.test/ HTTP/1.1\r\nX: " + strings.Repeat("a", 2048) + "\r\n\r\n", 431, "header-too-large"},
}

func TestReadRequest(t *testing.T) {
	for _, tc := range requestCases {
		t.Run(tc.name, func(t *testing.T) {
			req, status, d := ReadRequest(bufio.NewReaderSize(strings.NewReader(tc.in), 1024), 1024)
			if status != tc.status || d.Rule != tc.rule || (req == nil) != (tc.rule != "") {
				t.Fatalf("got %v %d %+v; want %d %s", req, status, d, tc.status, tc.rule)
			}
		})
	}
}

func TestReadRequestTimeout(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	go io.WriteString(a, "GET http://a.test/ HTTP/1.1\r\n")
	b.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if _, status, d := ReadRequest(bufio.NewReaderSize(b, 1024), 1024); status != 408 || d.Rule != "header-timeout" {
		t.Fatalf("got %d %+v; want 408 header-timeout", status, d)
	}
}

var (
	clField = regexp.MustCompile(`(?im)^[ \t]*content-length[ \t]*:`)
	teField = regexp.MustCompile(`(?im)^[ \t]*transfer-encoding[ \t]*:`)
)

// FuzzReadRequest: never panic, never accept a head naming both Content-Length and
// Transfer-Encoding, never return a request and a refusal together.
func FuzzReadRequest(f *testing.F) {
	for _, tc := range requestCases {
		f.Add([]byte(tc.in))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		req, status, d := ReadRequest(bufio.NewReaderSize(bytes.NewReader(b), 1024), 1024)
		if req == nil {
			if status < 400 || d.Rule == "" || d.Allow {
				t.Fatalf("refusal without a status or rule: %d %+v", status, d)
			}
			return
		}
		end := headEnd(b)
		switch {
		case status != 0 || d.Rule != "":
			t.Fatalf("a request and a refusal: %d %+v", status, d)
		case end < 0:
			t.Fatalf("a request from a head without an end: %q", b)
		case clField.Match(b[:end]) && teField.Match(b[:end]):
			t.Fatalf("accepted Content-Length with Transfer-Encoding: %q", b)
		}
	})
}

func TestDropHopByHop(t *testing.T) {
	h := http.Header{}
	for _, k := range []string{"Connection", "X-Named", "Keep-Alive", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
		"Proxy-Authorization", "Proxy-Connection", "Proxy-Anything", "X-Keep", "Authorization"} {
		h.Set(k, "1")
	}
	h.Set("Connection", "x-named, keep-alive")
	DropHopByHop(h)
	if len(h) != 2 || h.Get("X-Keep") == "" || h.Get("Authorization") == "" {
		t.Fatalf("left %v; want X-Keep and Authorization", h)
	}
}

// tcpPair returns the two ends of a loopback TCP connection (net.Pipe cannot half-close).
func tcpPair(t *testing.T) (net.Conn, net.Conn) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	a, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

func TestWriteResponse(t *testing.T) {
	for _, tc := range []struct {
		name       string
		proto      int // request minor version
		method     string
		resp       string
		keep       bool
		wantPrefix string
		wantKeep   bool
	}{
		{"length", 1, "GET", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: x\r\nX: y\r\n\r\nhi", true, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n", true},
		{"chunked", 1, "GET", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n", true, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n", true},
		{"chunked to http/1.0", 0, "GET", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n", true, "HTTP/1.1 200 OK\r\nConnection: close\r\n", false},
		{"close delimited", 1, "GET", "HTTP/1.0 200 OK\r\n\r\nhi", true, "HTTP/1.1 200 OK\r\nConnection: close\r\n", false},
		{"caller closes", 1, "GET", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi", false, "HTTP/1.1 200 OK\r\nConnection: close\r\n", false},
		{"head", 1, "HEAD", "HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\n", true, "HTTP/1.1 200 OK\r\nContent-Length: 99\r\n", true},
		{"redirect", 1, "GET", "HTTP/1.1 302 Found\r\nLocation: http://b.test/\r\nContent-Length: 0\r\n\r\n", true, "HTTP/1.1 302 Found\r\nLocation: http://b.test/\r\nContent-Length: 0\r\n", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := &http.Request{Method: tc.method, ProtoMajor: 1, ProtoMinor: tc.proto}
			resp, err := http.ReadResponse(bufio.NewReader(strings.NewReader(tc.resp)), req)
			if err != nil {
				t.Fatal(err)
			}
			a, b := tcpPair(t)
			type result struct {
				n    int64
				keep bool
				err  error
			}
			done := make(chan result, 1)
			go func() {
				n, keep, err := WriteResponse(a, req, resp, tc.keep, time.Minute)
				a.Close()
				done <- result{n, keep, err}
			}()
			got, _ := io.ReadAll(b)
			r := <-done
			n, keep, err := r.n, r.keep, r.err
			if !strings.HasPrefix(string(got), tc.wantPrefix) || keep != tc.wantKeep || err != nil {
				t.Fatalf("wrote %q, keep=%v, %v; want prefix %q, keep=%v", got, keep, err, tc.wantPrefix, tc.wantKeep)
			}
			if strings.Contains(string(got), "X: y") {
				t.Fatalf("a field named by Connection was relayed: %q", got)
			}
			if tc.method == "GET" && resp.StatusCode == 200 && (n != 2 || !strings.HasSuffix(strings.TrimSuffix(string(got), "\r\n0\r\n\r\n"), "hi")) {
				t.Fatalf("body: %d bytes in %q", n, got)
			}
		})
	}
}

func TestParseUpstream(t *testing.T) {
	for in, ok := range map[string]bool{
		"": true, "http://proxy.corp:3128": true, "http://u:p@proxy.corp:3128/": true,
		"https://proxy.corp:3128": false, "http://proxy.corp": false, "http://proxy.corp:3128/x": false,
		"proxy.corp:3128": false, "http://:3128": false, "http://proxy.corp:3128?x=1": false,
	} {
		if _, err := ParseUpstream(in); (err == nil) != ok {
			t.Errorf("ParseUpstream(%q) = %v; want ok=%v", in, err, ok)
		}
	}
}

func TestCheckedDialer(t *testing.T) {
	var dialled []string
	dial := func(_ context.Context, _, addr string) (net.Conn, error) {
		dialled = append(dialled, addr)
		a, _ := net.Pipe()
		return a, nil
	}
	checked := netip.MustParseAddrPort("192.0.2.7:80")
	ctx := WithTarget(context.Background(), "a.test:80", checked)
	for _, tc := range []struct {
		name     string
		ctx      context.Context
		upstream *url.URL
		addr     string
		want     string // "" means refused
	}{
		{"checked address", ctx, nil, "a.test:80", "192.0.2.7:80"},
		{"other host", ctx, nil, "b.test:80", ""},
		{"other port", ctx, nil, "a.test:8080", ""},
		{"no target", context.Background(), nil, "a.test:80", ""},
		{"upstream proxy", ctx, &url.URL{Host: "proxy.corp:3128"}, "proxy.corp:3128", "proxy.corp:3128"},
	} {
		dialled = nil
		c, err := CheckedDialer(dial, tc.upstream, time.Minute)(tc.ctx, "tcp", tc.addr)
		if tc.want == "" {
			if err == nil || len(dialled) != 0 {
				t.Errorf("%s: dialled %v, %v; want a refusal", tc.name, dialled, err)
			}
			continue
		}
		if err != nil || len(dialled) != 1 || dialled[0] != tc.want {
			t.Errorf("%s: dialled %v, %v; want %s", tc.name, dialled, err, tc.want)
		}
		c.Close()
	}
}

func TestIdleConnEndsStalls(t *testing.T) {
	a, _ := tcpPair(t)
	c := idleConn{a, 30 * time.Millisecond}
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("a stalled read did not end")
	}
}

func TestConnsRunSurvivesPanicAndShutsDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cs := NewConns()
	errs := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		cs.Run(ctx, []net.Listener{ln}, func(_ int, c net.Conn) { panic("bug") }, func(err error) { errs <- err }, time.Second)
		close(done)
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := <-errs; !strings.Contains(err.Error(), "panic") {
		t.Fatalf("onErr got %v", err)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return")
	}
}

// countingConn counts its writes.
type countingConn struct {
	net.Conn
	writes int
}

func (c *countingConn) Write(p []byte) (int, error) { c.writes++; return c.Conn.Write(p) }

// TestWriteResponseFlushing: a small body of known length goes out with the head in one write;
// a streamed body is not held back while the relay waits for more of it.
func TestWriteResponseFlushing(t *testing.T) {
	req := &http.Request{Method: "GET", ProtoMajor: 1, ProtoMinor: 1}
	a, b := tcpPair(t)
	cc := &countingConn{Conn: a}
	small := &http.Response{StatusCode: 200, ProtoMajor: 1, ProtoMinor: 1, Header: http.Header{}, ContentLength: 512,
		Body: io.NopCloser(strings.NewReader(strings.Repeat("x", 512)))}
	if _, _, err := WriteResponse(cc, req, small, true, time.Minute); err != nil || cc.writes != 1 {
		t.Fatalf("small body: %d writes, %v; want 1", cc.writes, err)
	}
	br := bufio.NewReader(b)
	if resp, err := http.ReadResponse(br, req); err != nil || resp.ContentLength != 512 {
		t.Fatalf("small body: %v %v", resp, err)
	} else {
		io.Copy(io.Discard, resp.Body)
	}

	for _, length := range []int64{-1, 64 << 10} { // chunked; known but over the buffer
		pr, pw := io.Pipe()
		stream := &http.Response{StatusCode: 200, ProtoMajor: 1, ProtoMinor: 1, Header: http.Header{}, ContentLength: length, Body: pr}
		if length < 0 {
			stream.TransferEncoding = []string{"chunked"}
		}
		done := make(chan error, 1)
		go func() { _, _, err := WriteResponse(a, req, stream, true, time.Minute); done <- err }()
		pw.Write([]byte("part one;"))
		b.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp, err := http.ReadResponse(br, req)
		if err != nil {
			t.Fatalf("length %d: the head was held back: %v", length, err)
		}
		got := make([]byte, len("part one;"))
		if _, err := io.ReadFull(resp.Body, got); err != nil || string(got) != "part one;" {
			t.Fatalf("length %d: the first part was held back: %q %v", length, got, err)
		}
		go func() { pw.Write(make([]byte, max(0, length-int64(len(got))))); pw.Close() }()
		io.Copy(io.Discard, resp.Body)
		if err := <-done; err != nil {
			t.Fatalf("length %d: %v", length, err)
		}
	}
}

func TestParseBrake(t *testing.T) {
	for in, want := range map[string]string{
		"2000/4000": "2000/4000", "0.5/1": "0.5/1", "1e6/1000000": "1e+06/1000000",
		"": "", "2000": "", "0/1": "", "-1/5": "", "2000/0": "", "2000/-1": "", "inf/1": "", "NaN/1": "",
		"2000/4000/1": "", " 2000/4000": "", "2000/4.5": "",
	} {
		b, err := ParseBrake(in)
		if got := b.String(); want == "" && err == nil || want != "" && (err != nil || got != want) {
			t.Errorf("ParseBrake(%q) = %s, %v; want %q", in, got, err, want)
		}
	}
}

// TestLoopKeepsBusyReaders: Loop hands its head buffer to the next connection only when no
// request body still reads from it (a Transport may read one after the response is back).
func TestLoopKeepsBusyReaders(t *testing.T) {
	cs := NewConns()
	lim := Limits{Header: 5 * time.Second, KeepAlive: 5 * time.Second, MaxHeader: 1024}
	a, b := tcpPair(t)
	go io.WriteString(a, "POST http://x.test/ HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello")
	var post *http.Request
	var busy *bufio.Reader
	cs.Loop(b, b, lim, func(br *bufio.Reader, req *http.Request, _ int, _ egress.Decision) bool {
		post, busy = req, br
		return false
	})
	for range 3 {
		c, d := tcpPair(t)
		go io.WriteString(c, "GET http://x.test/ HTTP/1.1\r\nHost: x\r\n\r\n")
		cs.Loop(d, d, lim, func(br *bufio.Reader, req *http.Request, _ int, _ egress.Decision) bool {
			if br == busy {
				t.Error("a buffer a request body still reads from went to another connection")
			}
			return false
		})
	}
	if got, err := io.ReadAll(post.Body); string(got) != "hello" || err != nil {
		t.Fatalf("the body: %q, %v", got, err)
	}
}
