package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// events writes one JSON line per thing that reached the world, on stdout: the e2e suite reads
// `docker compose logs world` to prove what did or did not get out of the stack.
type events struct {
	mu  sync.Mutex
	enc *json.Encoder
}

func newEvents(w io.Writer) *events { return &events{enc: json.NewEncoder(w)} }

func (e *events) log(v any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.enc.Encode(v) // stdout is the log; nothing better to do with its error
}

// dnsEvent is one DNS query: answer fills in the question and the answer's code.
type dnsEvent struct {
	Query string `json:"dns_query"`
	QType string `json:"qtype"`
	From  string `json:"from"`
	Proto string `json:"proto"`
	RCode string `json:"rcode"`
}

type httpEvent struct {
	Host   string `json:"http_host"`
	Method string `json:"method"`
	Path   string `json:"path"`
	TLS    bool   `json:"tls"`
	SNI    string `json:"sni,omitempty"`
	From   string `json:"from"`
}

type echoEvent struct {
	Proto string `json:"echo"`
	From  string `json:"from"`
}

// hostOf drops the port of a host:port.
func hostOf(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}

// handler serves GET / with a greeting naming the host asked for, GET /redirect with a redirect
// to denied.sharness.test (net must check the second hop on its own), GET /bulk/{n} with n bytes
// (at most maxBulk), and, when repo is not
// empty, the files of the bare repository repo under /repo.git/ for git's "dumb HTTP" protocol.
func handler(repo string, ev *events) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, "hello from "+hostOf(r.Host)+"\n")
	})
	mux.HandleFunc("GET /redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://denied.sharness.test/", http.StatusFound)
	})
	mux.HandleFunc("GET /bulk/{n}", func(w http.ResponseWriter, r *http.Request) {
		n, err := strconv.ParseInt(r.PathValue("n"), 10, 64)
		if err != nil || n < 0 || n > maxBulk {
			http.Error(w, fmt.Sprintf("bulk: want 0 to %d bytes", maxBulk), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
		io.CopyN(w, filler{}, n) // a client gone away only loses the rest
	})
	if repo != "" {
		mux.Handle("GET /repo.git/", http.StripPrefix("/repo.git", http.FileServer(http.Dir(repo))))
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e := httpEvent{Host: r.Host, Method: r.Method, Path: r.URL.Path, TLS: r.TLS != nil, From: hostOf(r.RemoteAddr)}
		if r.TLS != nil {
			e.SNI = r.TLS.ServerName
		}
		ev.log(e)
		mux.ServeHTTP(w, r)
	})
}

// maxBulk bounds GET /bulk/{n}, the soak's bulk download (e2e TestSoak).
const maxBulk = 64 << 20

// filler reads as an endless run of 'x'.
type filler struct{}

func (filler) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	return len(p), nil
}

// echoConn and echoPacket are the targets of the agent's direct-egress attempts on port 7
// (RFC 862): an answer proves a path out of the stack that bypasses net.
func echoConn(ev *events) func(net.Conn) {
	return func(c net.Conn) {
		ev.log(echoEvent{Proto: "tcp", From: hostOf(c.RemoteAddr().String())})
		c.SetDeadline(time.Now().Add(10 * time.Second))
		io.Copy(c, io.LimitReader(c, 1<<16))
	}
}

func echoPacket(ev *events) func([]byte, net.Addr) []byte {
	return func(p []byte, from net.Addr) []byte {
		ev.log(echoEvent{Proto: "udp", From: hostOf(from.String())})
		return p
	}
}

// names are the host names of the world's certificate; the first is its common name.
var names = []string{"allowed.sharness.test", "denied.sharness.test"}
