package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sharness-ai/sharness/images/llm/messages"
)

// BenchmarkAddedLatency measures what llm adds to a call, against the named baseline of the same
// client calling the same fake upstream directly, interleaved in one run: the full round trip of
// a non-streaming call, and the time to the first byte of a stream. llm runs with the real
// secret filter and a key source that answers from memory (kms's round trip is measured with
// kms); the upstream is plain HTTP through an injected transport (net's tunnel is measured
// with net). Metrics: p50/p99 of each path in µs and what llm adds.
func BenchmarkAddedLatency(b *testing.B) {
	// The fake upstream reads each body into a buffer it reuses: a real one is another process,
	// and its garbage is not llm's collector's work.
	bufs := sync.Pool{New: func() any { return new(bytes.Buffer) }}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		buf := bufs.Get().(*bytes.Buffer)
		defer bufs.Put(buf)
		buf.Reset()
		buf.ReadFrom(r.Body)
		if bytes.Contains(buf.Bytes(), []byte(`"stream":true`)) {
			w.Header().Set("content-type", "text/event-stream")
			io.WriteString(w, sseStream)
			return
		}
		w.Header().Set("content-type", "application/json")
		io.WriteString(w, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"Hello world"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":20}}`)
	}))
	defer up.Close()
	p := llmPolicy(b)
	p.Budget = ptr(1 << 62)
	rules, err := messages.Compile(p)
	if err != nil {
		b.Fatal(err)
	}
	f, err := newFilter(nil)
	if err != nil {
		b.Fatal(err)
	}
	base, _ := url.Parse(up.URL)
	llm := httptest.NewServer(newServer(rules, f, &fakeKMS{}, to{base}, discard()))
	defer llm.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}

	small := req(`,"system":"` + strings.Repeat("You are a careful coding agent. ", 30) + `","tools":` + testTools)
	// A tool result of n KiB of source, as a Read of a large file sends it: 67 bytes a line,
	// with the quotes and the line break escaped.
	toolResult := func(kib int) string {
		line := "func main() { fmt.Println(\\\"hello, world\\\") } // a line of source\\n"
		return `{"model":"claude-sonnet-4-5","max_tokens":100,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"` +
			strings.Repeat(line, kib<<10/len(line)) + `"}]}]}`
	}
	for _, c := range []struct {
		name   string
		body   string
		stream bool
	}{
		{"nonstream/1KiB", small, false},
		{"nonstream/64KiB", toolResult(64), false},
		{"nonstream/256KiB", toolResult(256), false},
		{"nonstream/1MiB", toolResult(1024), false},
		{"ttfb/1KiB", strings.Replace(small, `"max_tokens"`, `"stream":true,"max_tokens"`, 1), true},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.Logf("body %d bytes", len(c.body))
			call := func(target string) time.Duration {
				start := time.Now()
				r, _ := http.NewRequest(http.MethodPost, target+"/v1/messages", strings.NewReader(c.body))
				r.Header.Set("x-api-key", placeholder)
				resp, err := client.Do(r)
				if err != nil {
					b.Fatal(err)
				}
				var d time.Duration
				if c.stream {
					one := make([]byte, 1)
					if _, err := io.ReadFull(resp.Body, one); err != nil {
						b.Fatal(err)
					}
					d = time.Since(start)
					io.Copy(io.Discard, resp.Body)
				} else {
					io.Copy(io.Discard, resp.Body)
					d = time.Since(start)
				}
				resp.Body.Close()
				if resp.StatusCode != 200 {
					b.Fatalf("status %d", resp.StatusCode)
				}
				return d
			}
			call(up.URL) // warm both connections
			call(llm.URL)
			direct, via := make([]time.Duration, 0, b.N), make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				direct = append(direct, call(up.URL))
				via = append(via, call(llm.URL))
			}
			b.StopTimer()
			q := func(d []time.Duration, p float64) float64 {
				slices.Sort(d)
				return float64(d[min(len(d)-1, int(p*float64(len(d))))].Nanoseconds()) / 1e3
			}
			d50, d99, v50, v99 := q(direct, .5), q(direct, .99), q(via, .5), q(via, .99)
			b.ReportMetric(d50, "direct-p50-µs")
			b.ReportMetric(v50, "llm-p50-µs")
			b.ReportMetric(v50-d50, "added-p50-µs")
			b.ReportMetric(v99-d99, "added-p99-µs")
			b.ReportMetric(v50/d50, "ratio-p50")
		})
	}
}
