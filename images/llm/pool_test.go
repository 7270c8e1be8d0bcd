package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sharness-ai/sharness/images/llm/messages"
)

// lateTransport answers at once and keeps each request body unread and open, as a transport
// still writing a body after the response came back does; with replay, it closes the body and
// keeps the one GetBody gives instead, as a transport retrying on a new connection does.
type lateTransport struct {
	bodies chan io.ReadCloser
	replay *atomic.Bool
}

func (l lateTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.GetBody == nil || r.ContentLength <= 0 {
		return nil, errors.New("no GetBody or no length: the transport could not retry the request")
	}
	body := r.Body
	if l.replay.Load() {
		r.Body.Close()
		var err error
		if body, err = r.GetBody(); err != nil {
			return nil, err
		}
	}
	l.bodies <- body
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(strings.NewReader(`{"usage":{"input_tokens":1,"output_tokens":1}}`)), Request: r}, nil
}

// TestBodyBufferOutlivesTheTransport: llm reuses request body buffers (readBody), but never one
// the transport has not closed: a later request must not overwrite the bytes of one the
// upstream is still being sent.
func TestBodyBufferOutlivesTheTransport(t *testing.T) {
	rules, err := messages.Compile(llmPolicy(t))
	if err != nil {
		t.Fatal(err)
	}
	late := lateTransport{bodies: make(chan io.ReadCloser, 8), replay: &atomic.Bool{}}
	srv := httptest.NewServer(newServer(rules, &fakeFilter{}, &fakeKMS{}, late, discard()))
	defer srv.Close()
	send := func(c string) string {
		body := req(`,"system":"` + strings.Repeat(c, 64<<10) + `"`)
		r, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/messages", strings.NewReader(body))
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d", resp.StatusCode)
		}
		return body
	}
	first := send("A")
	held := <-late.bodies
	late.replay.Store(true) // a body read again (a retry) is not reused either, closed or not
	again := send("R")
	replayed := <-late.bodies
	late.replay.Store(false)
	for _, c := range []string{"B", "C", "D"} { // each one's body closed at once: its buffer is free
		send(c)
		(<-late.bodies).Close()
	}
	for _, b := range []struct {
		r    io.ReadCloser
		want string
	}{{held, first}, {replayed, again}} {
		got, err := io.ReadAll(b.r)
		b.r.Close()
		if err != nil || string(got) != b.want {
			t.Fatalf("a body still being sent changed under the transport (%d bytes, %v)", len(got), err)
		}
	}
}

// TestBodyIsSentWithItsLength: the body goes upstream with a Content-Length, as NewRequest
// would give a *bytes.Reader, not chunked; and concurrent requests each get their own bytes.
func TestBodyIsSentWithItsLength(t *testing.T) {
	var mu sync.Mutex
	got := map[string]bool{}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got[string(b)] = true
		mu.Unlock()
		if r.ContentLength != int64(len(b)) || len(r.TransferEncoding) > 0 {
			t.Errorf("upstream got Content-Length %d, Transfer-Encoding %v for %d bytes", r.ContentLength, r.TransferEncoding, len(b))
		}
		w.Header().Set("content-type", "application/json")
		io.WriteString(w, `{"usage":{"input_tokens":1,"output_tokens":1}}`)
	}))
	defer up.Close()
	rules, err := messages.Compile(llmPolicy(t))
	if err != nil {
		t.Fatal(err)
	}
	base, _ := url.Parse(up.URL)
	srv := httptest.NewServer(newServer(rules, &fakeFilter{}, &fakeKMS{}, to{base}, discard()))
	defer srv.Close()
	var wg sync.WaitGroup
	bodies := make([]string, 8)
	for i := range bodies {
		bodies[i] = req(`,"system":"` + strings.Repeat(string(rune('a'+i)), 32<<10) + `"`)
		wg.Go(func() {
			resp, err := http.Post(srv.URL+"/v1/messages", "application/json", strings.NewReader(bodies[i]))
			if err != nil {
				t.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("request %d: status %d", i, resp.StatusCode)
			}
		})
	}
	wg.Wait()
	for i, b := range bodies {
		if !got[b] {
			t.Errorf("request %d did not reach the upstream as sent", i)
		}
	}
}

// TestBodyBudget: the request bodies llm holds at once are bounded (bodyBudget, by their declared
// length): callers that declare large bodies and then hold them unfinished fill it, and the
// next request is answered 503 overloaded_error after bodyWait instead of taking more memory
// (twelve such bodies of 32 MiB OOM-killed llm on the running stack); once one is let go, the
// next is served again.
func TestBodyBudget(t *testing.T) {
	rules, err := messages.Compile(llmPolicy(t))
	if err != nil {
		t.Fatal(err)
	}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("content-type", "application/json")
		io.WriteString(w, `{"type":"message","usage":{"input_tokens":1,"output_tokens":1}}`)
	}))
	defer up.Close()
	base, _ := url.Parse(up.URL)
	s := newServer(rules, &fakeFilter{}, &fakeKMS{}, to{base}, discard())
	s.bodyWait = 200 * time.Millisecond
	srv := httptest.NewServer(s)
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	// Two holders of 24 MiB each: the budget, declared, and nothing of it sent but a byte.
	var holders []net.Conn
	for i := 0; i < 2; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "POST /v1/messages HTTP/1.1\r\nHost: llm\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{", bodyBudget/2)
		holders = append(holders, c)
	}
	small := func() *http.Response {
		resp, err := http.Post(srv.URL+"/v1/messages", "application/json", strings.NewReader(req("")))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	deadline := time.Now().Add(5 * time.Second)
	var resp *http.Response
	for resp = small(); resp.StatusCode == http.StatusOK && time.Now().Before(deadline); resp = small() {
		time.Sleep(20 * time.Millisecond) // the holders' requests not read yet
	}
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("x-sharness-deny") != string(messages.ReasonBusy) {
		t.Fatalf("with the budget held: %s %q; want 503 %s", resp.Status, resp.Header.Get("x-sharness-deny"), messages.ReasonBusy)
	}
	holders[0].Close()
	deadline = time.Now().Add(5 * time.Second)
	for resp = small(); resp.StatusCode != http.StatusOK && time.Now().Before(deadline); resp = small() {
		time.Sleep(20 * time.Millisecond)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("after a holder let go: %s %q; want 200", resp.Status, resp.Header.Get("x-sharness-deny"))
	}
}

// TestBodyDeadlineIsTheBodys: the read deadline set for a request's body (bodyDeadline) does
// not bound the answer: a stream that outlasts it goes on to its end. (Measured with Go 1.26
// over HTTP/1.1: the deadline left set on the connection did not cancel the request either;
// llm clears it all the same.)
func TestBodyDeadlineIsTheBodys(t *testing.T) {
	rules, err := messages.Compile(llmPolicy(t))
	if err != nil {
		t.Fatal(err)
	}
	const events = 6
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("content-type", "text/event-stream")
		for i := 0; i < events; i++ {
			io.WriteString(w, "event: ping\ndata: {\"type\":\"ping\"}\n\n")
			w.(http.Flusher).Flush()
			time.Sleep(100 * time.Millisecond)
		}
	}))
	defer up.Close()
	base, _ := url.Parse(up.URL)
	s := newServer(rules, &fakeFilter{}, &fakeKMS{}, to{base}, discard())
	s.bodyRead = 150 * time.Millisecond // the stream lasts 600 ms
	srv := httptest.NewServer(s)
	defer srv.Close()
	resp, err := http.Post(srv.URL+"/v1/messages", "application/json", strings.NewReader(req(`,"stream":true`)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, _ := io.ReadAll(resp.Body)
	if n := strings.Count(string(got), "event: ping"); n != events {
		t.Fatalf("the stream carried %d of %d events (%s); want all: the body's deadline cut it", n, events, resp.Status)
	}
}
