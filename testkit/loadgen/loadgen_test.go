package loadgen

import (
	"bufio"
	"context"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// fakeWorld is a TLS server for allowed.sharness.test (/ and /bulk/N), a CONNECT proxy in front
// of it that refuses denied.sharness.test with 403 and, past cap tunnels at once, answers 503
// conn-limit; a streaming Messages API; and an fs write endpoint.
type fakeWorld struct {
	world, proxy, llm, fs *httptest.Server
	open, capHits         atomic.Int64
	cap                   int64
	openRefused           bool // the proxy lets the refused host through (a fail-open to catch)
}

func newFakeWorld(t *testing.T, cap int64) *fakeWorld {
	f := &fakeWorld{cap: cap}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello from allowed.sharness.test\n") })
	mux.HandleFunc("GET /bulk/{n}", func(w http.ResponseWriter, r *http.Request) {
		var n int
		fmt.Sscan(r.PathValue("n"), &n)
		io.WriteString(w, strings.Repeat("x", n))
	})
	f.world = httptest.NewTLSServer(mux)
	t.Cleanup(f.world.Close)
	f.proxy = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodConnect {
			http.Error(w, "no", 400)
			return
		}
		if r.Host == refusedHost && !f.openRefused {
			w.Header().Set("X-Sharness-Deny", "host-not-allowed")
			w.WriteHeader(403)
			return
		}
		if f.open.Add(1) > f.cap {
			f.open.Add(-1)
			f.capHits.Add(1)
			w.Header().Set("X-Sharness-Deny", "conn-limit")
			w.WriteHeader(503)
			return
		}
		defer f.open.Add(-1)
		up, err := net.Dial("tcp", f.world.Listener.Addr().String())
		if err != nil {
			w.WriteHeader(502)
			return
		}
		defer up.Close()
		c, brw, _ := http.NewResponseController(w).Hijack()
		defer c.Close()
		io.WriteString(c, "HTTP/1.1 200 OK\r\n\r\n")
		go func() { io.Copy(up, brw); up.Close() }()
		io.Copy(c, up)
	}))
	t.Cleanup(f.proxy.Close)
	f.llm = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		bw := bufio.NewWriter(w)
		for i := range 5 {
			fmt.Fprintf(bw, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\"text\":\"w%d \"}}\n\n", i)
		}
		io.WriteString(bw, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
		bw.Flush()
	}))
	t.Cleanup(f.llm.Close)
	f.fs = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/write" {
			http.NotFound(w, r)
			return
		}
		io.WriteString(w, "{}")
	}))
	t.Cleanup(f.fs.Close)
	return f
}

func (f *fakeWorld) config(d time.Duration, tunnels int) Config {
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: f.world.Certificate().Raw})
	return Config{Duration: d, Tunnels: tunnels, Streams: 3, FSWriters: 1, BulkBytes: 10000, StreamWords: 5,
		Backoff: 20 * time.Millisecond, OpTimeout: 5 * time.Second, Proxy: f.proxy.URL, LLM: f.llm.URL, FSURL: f.fs.URL, CAPEM: string(ca)}
}

// The fake world's certificate names example.com; the load generator asks for
// allowed.sharness.test, so the test trusts the server's certificate under that name.
func init() { serverNameForTests = "example.com" }

func TestRunCountsEveryOutcome(t *testing.T) {
	f := newFakeWorld(t, 8)
	cfg := f.config(2*time.Second, 20)
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	rep.Finish()
	for _, kind := range []string{KindNew, KindKeepAlive, KindBulk, KindStream, KindFS} {
		st := rep.Kinds[kind]
		if st == nil || st.Outcomes[OK] == 0 || st.Outcomes[Failed] != 0 || st.Outcomes[Open] != 0 {
			t.Errorf("%s: %+v, want ok answers and no failure", kind, st)
		}
	}
	if st := rep.Kinds[KindRefused]; st == nil || st.Outcomes[Policy] == 0 || st.Rules["host-not-allowed"] == 0 || st.Outcomes[Open] != 0 {
		t.Errorf("refused host: %+v, want refusals by policy naming the rule", st)
	}
	var caps int64
	for _, st := range rep.Kinds {
		caps += st.Outcomes[Cap]
	}
	// Every refusal the load counted is one the proxy made; the proxy may have made a few more
	// that the run's end cut before the load read them (at most one per worker in flight).
	if made := f.capHits.Load(); caps == 0 || caps > made || made-caps > int64(cfg.Tunnels+cfg.Streams+cfg.FSWriters) {
		t.Errorf("the load saw %d refusals at the cap, the proxy made %d", caps, made)
	}
	if st := rep.Kinds[KindNew]; st.P99MS < st.P50MS || st.P50MS <= 0 {
		t.Errorf("latencies p50 %v p99 %v", st.P50MS, st.P99MS)
	}
}

func TestRunCatchesAFailOpen(t *testing.T) {
	f := newFakeWorld(t, 100)
	f.openRefused = true
	rep, err := Run(context.Background(), f.config(time.Second, 10))
	if err != nil {
		t.Fatal(err)
	}
	if st := rep.Kinds[KindRefused]; st == nil || st.Outcomes[Open] == 0 {
		t.Errorf("a proxy that opens the refused host: %+v, want it counted as open", st)
	}
}

func TestOnceNamesTheComponent(t *testing.T) {
	f := newFakeWorld(t, 100)
	cfg := f.config(time.Second, 0)
	f.fs.Close()
	r, err := Once(context.Background(), cfg, KindFS)
	if err != nil || r.Outcome != Failed || !strings.Contains(r.Error, "fs") {
		t.Errorf("fs away: %+v %v, want a failure naming fs", r, err)
	}
	if r, err = Once(context.Background(), cfg, KindStream); err != nil || r.Outcome != OK {
		t.Errorf("a stream: %+v %v", r, err)
	}
}
