package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/sharness-ai/sharness/images/net/relay"
)

// BenchmarkPlainForward: plain-HTTP absolute-URI requests through net, 32 callers at once on
// keep-alive connections, against the same through a minimal stdlib proxy (read the request,
// http.Transport round trip, write the response: no checks, no log) in the same run. The
// ratio of their ns/op is net's cost per forwarded request; hack/bench-net.sh measures the same
// figure across processes, with smokescreen. The origin is the harness's local server.
func BenchmarkPlainForward(b *testing.B) {
	h := newHarness(b, withLimits(func(l *limits) { l.brake = relay.Brake{Rate: 1e9, Burst: 1e9} }))
	h.start(b, nil, nil)
	target := fmt.Sprintf("http://allowed.test:%d/", h.plainPort)
	stdAddr := stdlibProxy(b)
	perOp := map[string]float64{}
	for _, p := range []struct{ name, proxy, url string }{
		{"net", h.addr, target},
		{"stdlib", stdAddr, fmt.Sprintf("http://127.0.0.1:%d/", h.plainPort)},
	} {
		b.Run(p.name, func(b *testing.B) {
			c := &http.Client{Transport: &http.Transport{
				Proxy:               http.ProxyURL(&url.URL{Scheme: "http", Host: p.proxy}),
				MaxIdleConnsPerHost: 64,
			}}
			defer c.CloseIdleConnections()
			b.SetParallelism(16) // 32 callers on 2 cores
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					resp, err := c.Get(p.url)
					if err != nil {
						b.Error(err)
						return
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						b.Errorf("status %d", resp.StatusCode)
						return
					}
				}
			})
			perOp[p.name] = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			if p.name == "stdlib" && perOp["net"] > 0 { // on the baseline's line: net's ns/op ÷ its own
				b.ReportMetric(perOp["net"]/perOp["stdlib"], "net/stdlib")
			}
		})
	}
}

// stdlibProxy serves the minimal stdlib proxy on a loopback port until the benchmark ends.
func stdlibProxy(b *testing.B) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ln.Close() })
	tr := &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true, IdleConnTimeout: time.Minute}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br, bw := bufio.NewReader(c), bufio.NewWriter(c)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					req.RequestURI = ""
					resp, err := tr.RoundTrip(req)
					if err != nil {
						return
					}
					err = resp.Write(bw)
					resp.Body.Close()
					if err != nil || bw.Flush() != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}
