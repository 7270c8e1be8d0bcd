package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"
)

// stdproxyMain is the minimal stdlib proxy, the practical ceiling the issue measures net
// against: for CONNECT it reads the request line, dials, answers 200 and runs two io.Copy
// (which splice(2) between the two TCP sockets); for an absolute http:// URI it sends the
// request through an http.Transport and writes the response back, keeping the caller's
// connection. It checks nothing. It serves the listener inherited as file descriptor 3 and
// resolves names through -resolver, like net, once per tunnel and per new upstream connection.
func stdproxyMain(args []string) int {
	fs := flag.NewFlagSet("stdproxy", flag.ContinueOnError)
	resolver := fs.String("resolver", "", "DNS server ip:port")
	fs.BoolVar(&userCopy, "copy", false, "copy tunnels through a 64 KiB buffer in user space instead of splice(2)")
	if fs.Parse(args) != nil {
		return 2
	}
	ln, err := net.FileListener(os.NewFile(3, "listener"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "stdproxy: no listener on fd 3:", err)
		return 1
	}
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, *resolver)
	}}
	d := &net.Dialer{Resolver: r, Timeout: 10 * time.Second}
	tr := &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 64, DisableCompression: true}
	for {
		c, err := ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return 0
		} else if err != nil {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		go stdServe(c, d, tr)
	}
}

func stdServe(c net.Conn, d *net.Dialer, tr *http.Transport) {
	defer c.Close()
	br := bufio.NewReader(c)
	bw := bufio.NewWriter(c)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		if req.Method == http.MethodConnect {
			stdTunnel(c, br, d, req.RequestURI)
			return
		}
		req.RequestURI = ""
		req.Header.Del("Proxy-Connection")
		resp, err := tr.RoundTrip(req)
		if err != nil {
			io.WriteString(c, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
			return
		}
		err = resp.Write(bw)
		resp.Body.Close()
		if err != nil || bw.Flush() != nil || resp.Close || req.Close {
			return
		}
	}
}

// userCopy hides the sockets' ReadFrom/WriteTo from io.Copy, so tunnel bytes go through user
// space (read, write) rather than splice(2): the diagnostic peer stdlib-copy.
var userCopy bool

func tunnelCopy(dst, src net.Conn) {
	if !userCopy {
		io.Copy(dst, src)
		return
	}
	io.CopyBuffer(struct{ io.Writer }{dst}, struct{ io.Reader }{src}, make([]byte, 64<<10))
}

func stdTunnel(c net.Conn, br *bufio.Reader, d *net.Dialer, authority string) {
	up, err := d.Dial("tcp", authority)
	if err != nil {
		io.WriteString(c, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
		return
	}
	defer up.Close()
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection Established\r\n\r\n"); err != nil {
		return
	}
	if n := br.Buffered(); n > 0 { // sent before our 200: pass it on first
		b, _ := br.Peek(n)
		up.Write(b)
	}
	done := make(chan struct{})
	go func() {
		tunnelCopy(up, c)
		up.(*net.TCPConn).CloseWrite()
		close(done)
	}()
	tunnelCopy(c, up)
	c.(*net.TCPConn).CloseWrite()
	<-done
}
