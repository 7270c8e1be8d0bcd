package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sharness-ai/sharness/images/net/egress"
	"github.com/sharness-ai/sharness/internal/mtls"
	"github.com/sharness-ai/sharness/policies/compile"
	"github.com/sharness-ai/sharness/policies/pbp"
)

// TestCaps: per caller and in all, a connection over either cap is refused with its reason; a
// released one frees its place; renaming checks the new caller's cap only.
func TestCaps(t *testing.T) {
	c := newCaps(3, 2)
	for i, step := range []struct {
		op, caller, to string
		want           string // "" held; else a word of the reason
	}{
		{"take", "a", "", ""},
		{"take", "a", "", ""},
		{"take", "a", "", "the caller"}, // a at its cap
		{"take", "b", "", ""},           // b still gets through
		{"take", "b", "", "net holds"},  // everyone's cap
		{"give", "a", "", ""},
		{"take", "", "", ""},           // an unnamed (mTLS) connection
		{"rename", "", "b", ""},        // named b: b holds 2
		{"take", "c", "", "net holds"}, // still 3 in all
		{"give", "b", "", ""},          // 2 in all, b holds 1
		{"take", "", "", ""},           // unnamed again
		{"rename", "", "a", ""},        // a holds 2
		{"take", "d", "", "net holds"},
		{"give", "a", "", ""}, // a holds 1, 2 in all
		{"take", "", "", ""},
		{"rename", "", "b", ""}, // b holds 2
		{"give", "b", "", ""},
		{"take", "", "", ""},
		{"rename", "", "", ""}, // the same caller: nothing moves
	} {
		got := ""
		switch step.op {
		case "take":
			got = c.take(step.caller)
		case "rename":
			got = c.rename(step.caller, step.to)
		case "give":
			c.give(step.caller)
		}
		if step.want == "" && got != "" || step.want != "" && !strings.Contains(got, step.want) {
			t.Fatalf("step %d %s %q: got %q; want %q", i, step.op, step.caller, got, step.want)
		}
	}
	if c.held() != 3 || c.open["a"] != 1 || c.open["b"] != 1 || c.open[""] != 1 {
		t.Fatalf("held %d, by caller %v; want 3: a 1, b 1, unnamed 1", c.held(), c.open)
	}
	full := newCaps(3, 1)
	full.take("a")
	full.take("")
	if why := full.rename("", "a"); !strings.Contains(why, "the caller holds its maximum of 1") || full.open[""] != 1 {
		t.Fatalf("rename to a caller at its cap: %q, by caller %v; want refused and left unnamed", why, full.open)
	}
	for _, caller := range []string{"a", ""} {
		full.give(caller)
	}
	if full.held() != 0 || len(full.open) != 0 {
		t.Fatalf("after every give: held %d, by caller %v; want none", full.held(), full.open)
	}
}

// TestFileBudget: the caps must fit net's file limit (two descriptors per connection, four more
// per tunnel for its pipes, and the rest limits.files counts); the defaults fit the limit the
// compiled spec gives net (policies/compile Files).
func TestFileBudget(t *testing.T) {
	if got := defaultLimits.files(); got != 2528 {
		t.Fatalf("the defaults hold up to %d descriptors; want 2528, as defaultLimits says", got)
	}
	if compiled := compile.Files(&pbp.Component{Kind: pbp.KindNet}); uint64(defaultLimits.files()) > compiled {
		t.Fatalf("the defaults hold up to %d descriptors, over the %d the compiled spec gives net", defaultLimits.files(), compiled)
	}
	for _, tc := range []struct {
		name      string
		conns     int
		per       int
		nofile    uint64
		wantWords []string
	}{
		{"defaults in 4096", 384, 128, 4096, nil},
		{"defaults in exactly their budget", 384, 128, 2528, nil},
		{"defaults one short", 384, 128, 2527, []string{"384 connections", "up to 2528 file descriptors", "RLIMIT_NOFILE) of 2527"}},
		{"defaults in the 1024 of another component", 384, 128, 1024, []string{"up to 2528 file descriptors", "RLIMIT_NOFILE) of 1024"}},
		{"too many for 4096", 1200, 128, 4096, []string{"1200 connections", "up to 4160 file descriptors", "RLIMIT_NOFILE) of 4096"}},
		{"fewer connections than tunnels: pipes for as many tunnels as connections", 100, 100, 824, nil},
		{"per caller over all", 100, 101, 1024, []string{"100 in all and 101 per caller"}},
		{"none in all", 0, 0, 1024, []string{"at least 1"}},
		{"none per caller", 10, 0, 1024, []string{"at least 1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := defaultLimits
			l.conns, l.connsPerCaller = tc.conns, tc.per
			err := l.fit(tc.nofile)
			if tc.wantWords == nil {
				if err != nil {
					t.Fatalf("fit(%d) = %v; want nil", tc.nofile, err)
				}
				return
			}
			for _, w := range tc.wantWords {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Fatalf("fit(%d) = %v; want an error with %q", tc.nofile, err, w)
				}
			}
		})
	}
}

// TestRunChecksConnCaps: -conns and -conns-per-caller are numbers that must fit net's file
// limit, or net does not start.
func TestRunChecksConnCaps(t *testing.T) {
	dir := "../../policies/testdata/full"
	m, err := pbp.Load(os.DirFS(dir), "manifest.yaml")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("SHARNESS_AI_POLICY_HASH", m.Hash)
	t.Setenv("SHARNESS_AI_COMPONENT", "net")
	t.Setenv(mtls.EnvEndpointSocket, "")
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // run returns once it has started
	for _, tc := range []struct{ conns, per, want string }{
		{"", "", ""},
		{"64", "16", ""},
		{"many", "", "refusing to start: conns: \"many\" is not a number"},
		{"", "1e3", "refusing to start: conns-per-caller: \"1e3\" is not a number"},
		{"10", "11", "refusing to start: open connections: 10 in all and 11 per caller"},
		{"100000000", "", "file descriptors, over its file limit (RLIMIT_NOFILE)"},
	} {
		cfg := config{policyDir: dir, listen: "127.0.0.1:0", mtlsListen: "127.0.0.1:0", conns: tc.conns, connsPer: tc.per}
		err := run(ctx, cfg, slog.New(slog.DiscardHandler))
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("-conns %q -conns-per-caller %q: %v; want %q", tc.conns, tc.per, err, tc.want)
		}
	}
}

// twoCallers is a harness whose plain listener names callers by source address: agent from
// 127.0.0.1, other from 127.0.0.2, both allowed the plain server on allowed.test.
func twoCallers(t *testing.T, all, per int) *harness {
	t.Helper()
	h := twoCallersUnstarted(t, all, per, "other")
	h.start(t, nil, nil)
	return h
}

// twoCallersUnstarted is twoCallers' harness, the second caller named other, not started yet.
func twoCallersUnstarted(t *testing.T, all, per int, other string) *harness {
	t.Helper()
	if ln, err := net.Listen("tcp", "127.0.0.2:0"); err != nil {
		t.Skipf("no second loopback address here: %v", err)
	} else {
		ln.Close()
	}
	h := newHarness(t, withLimits(func(l *limits) { l.conns, l.connsPerCaller = all, per }))
	rules, err := egress.Compile(&pbp.NetRules{Callers: &[]pbp.CallerRule{
		{Caller: "agent", Ports: []int{h.plainPort}, Hosts: []string{"allowed.test"}},
		{Caller: other, Ports: []int{h.plainPort}, Hosts: []string{"allowed.test"}}}})
	if err != nil {
		t.Fatal(err)
	}
	h.s.rules = rules
	h.s.edge = func(a netip.Addr) (string, bool) {
		if a == netip.MustParseAddr("127.0.0.2") {
			return other, true
		}
		return "agent", true
	}
	return h
}

// getFrom opens a connection to net from src, sends one keep-alive plain request on it and reads
// the answer; the connection stays open.
func (h *harness) getFrom(t *testing.T, src string) (*http.Response, string, net.Conn) {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 10 * time.Second}
	c, err := d.Dial("tcp", h.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "GET http://allowed.test:%d/ HTTP/1.1\r\nHost: allowed.test:%d\r\n\r\n", h.plainPort, h.plainPort)
	return readResponse(t, c, false)
}

// wantConnLimit checks a refusal at the caps: 503, conn-limit, the reason in the body, and the
// connection closed after it.
func wantConnLimit(t *testing.T, what string, resp *http.Response, body string, c net.Conn, reason string) {
	t.Helper()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("X-Sharness-Deny") != "conn-limit" ||
		body != "sharness net refused this request: rule conn-limit: "+reason+"\n" {
		t.Fatalf("%s: %s %q %q; want 503 conn-limit with %q", what, resp.Status, resp.Header.Get("X-Sharness-Deny"), body, reason)
	}
	if n, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("%s: after the refusal read %d bytes, %v; want the connection closed (EOF)", what, n, err)
	}
}

// wantOK checks that a plain request got through.
func wantOK(t *testing.T, what string, resp *http.Response, body string) {
	t.Helper()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(body, "hello allowed.test") {
		t.Fatalf("%s: %s %q; want 200", what, resp.Status, body)
	}
}

// metricsText is what net's /metrics would serve now.
func (h *harness) metricsText(t *testing.T) string {
	t.Helper()
	server, client := net.Pipe()
	go func() { h.s.met.Serve(server, time.Second); server.Close() }()
	body, _ := io.ReadAll(bufio.NewReader(client))
	return string(body)
}

// waitOK retries a plain request from src until it gets through: a closed connection frees its
// place once net has closed its side.
func (h *harness) waitOK(t *testing.T, src, what string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		resp, body, c := h.getFrom(t, src)
		if resp.StatusCode == http.StatusOK {
			wantOK(t, what, resp, body)
			return
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatalf("%s: the place was not freed: %s %q", what, resp.Status, body)
		}
	}
}

// TestConnLimitPerCaller: a caller at its cap is refused (answered 503 conn-limit, closed,
// logged and counted) while another caller still gets through; closing one of its connections
// lets it in again.
func TestConnLimitPerCaller(t *testing.T) {
	h := twoCallers(t, 10, 2)
	var held []net.Conn
	for i := range 2 {
		resp, body, c := h.getFrom(t, "127.0.0.1")
		wantOK(t, fmt.Sprintf("agent's connection %d", i+1), resp, body)
		held = append(held, c)
	}
	resp, body, c := h.getFrom(t, "127.0.0.1")
	wantConnLimit(t, "agent's third connection", resp, body, c, "the caller holds its maximum of 2 open connections; retry later")
	resp, body, _ = h.getFrom(t, "127.0.0.2")
	wantOK(t, "other's connection, agent at its cap", resp, body)

	d := h.log.waitDecision(t, "conn-limit")
	if d["caller"] != "agent" || d["allow"] != false || d["reason"] != "the caller holds its maximum of 2 open connections; retry later" {
		t.Errorf("decision line %v; want agent refused with the per-caller reason", d)
	}
	m := h.metricsText(t)
	for _, want := range []string{`sharness_net_decisions_total{allow="false",caller="agent",rule="conn-limit"} 1`, "sharness_net_conns_open 3"} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %q:\n%s", want, m)
		}
	}
	held[0].Close()
	h.waitOK(t, "127.0.0.1", "agent, one connection closed")
}

// TestConnLimitInAll: past the cap in all every caller is refused, with net's reason; closing
// any connection lets one in again.
func TestConnLimitInAll(t *testing.T) {
	h := twoCallers(t, 3, 3)
	var held []net.Conn
	for _, src := range []string{"127.0.0.1", "127.0.0.1", "127.0.0.2"} {
		resp, body, c := h.getFrom(t, src)
		wantOK(t, "a connection from "+src, resp, body)
		held = append(held, c)
	}
	const reason = "net holds its maximum of 3 open connections; retry later"
	for _, src := range []string{"127.0.0.1", "127.0.0.2"} {
		resp, body, c := h.getFrom(t, src)
		wantConnLimit(t, "a fourth connection from "+src, resp, body, c, reason)
	}
	refused := 0
	for range 100 {
		refused = 0
		for _, d := range h.log.decisions() {
			if d["rule"] == "conn-limit" {
				refused++
			}
		}
		if refused == 2 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if refused != 2 {
		t.Fatalf("%d conn-limit decision lines; want one per refusal, 2:\n%s", refused, h.log.buf.String())
	}
	m := h.metricsText(t)
	for _, want := range []string{
		`sharness_net_decisions_total{allow="false",caller="agent",rule="conn-limit"} 1`,
		`sharness_net_decisions_total{allow="false",caller="other",rule="conn-limit"} 1`, "sharness_net_conns_open 3",
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %q:\n%s", want, m)
		}
	}
	held[2].Close() // other's: agent may take its place
	h.waitOK(t, "127.0.0.1", "agent, a connection closed")
}

// TestConnLimitUnanswered: with every answering slot taken (here none), a connection over the
// caps is closed at once, unanswered, so refusals cannot hold descriptors past the budget; it
// is still logged.
func TestConnLimitUnanswered(t *testing.T) {
	h := newHarness(t, withLimits(func(l *limits) { l.conns, l.connsPerCaller, l.refusing = 1, 1, 0 }))
	h.start(t, nil, nil)
	resp, body, _ := h.raw(t, fmt.Sprintf("GET http://allowed.test:%d/ HTTP/1.1\r\nHost: a\r\n\r\n", h.plainPort))
	wantOK(t, "the first connection", resp, body)
	c, err := net.Dial("tcp", h.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "GET http://allowed.test:%d/ HTTP/1.1\r\nHost: a\r\n\r\n", h.plainPort)
	if got, err := io.ReadAll(c); len(got) != 0 {
		t.Fatalf("the second connection got %q (%v); want it closed unanswered", got, err)
	}
	if d := h.log.waitDecision(t, "conn-limit"); d["caller"] != "agent" || d["allow"] != false {
		t.Errorf("decision line %v; want agent refused", d)
	}
}

// TestConnLimitMTLS: on the mTLS listener a connection counts as the caller of the edge it came
// from until its handshake, and as its SVID's after: a caller at its cap is refused before the
// handshake (logged, unanswered: no HTTP is spoken yet), and a connection named after its
// handshake as a caller at its cap is refused over TLS (503 conn-limit); the other caller is not.
func TestConnLimitMTLS(t *testing.T) {
	h := mtlsCapsHarness(t, 2)
	for i := 0; i < 2; i++ {
		resp, body, _ := h.getMTLS(t, "127.0.0.1", "spiffe://sharness.test/agent")
		wantOK(t, "agent's connection", resp, body)
	}
	if _, err := h.dialMTLS(t, "127.0.0.1", "spiffe://sharness.test/agent"); err == nil {
		t.Fatal("agent's third connection: the handshake went through; want it refused before, at the agent's cap")
	}
	if d := h.log.waitDecision(t, "conn-limit"); d["caller"] != "agent" {
		t.Errorf("decision line %v; want caller agent", d)
	}
	// From llm's edge with the agent's SVID: held as llm's until the handshake, then the
	// agent's, which is at its cap: refused over TLS.
	resp, body, c := h.getMTLS(t, "127.0.0.2", "spiffe://sharness.test/agent")
	wantConnLimit(t, "the agent's SVID from llm's edge", resp, body, c, "the caller holds its maximum of 2 open connections; retry later")
	if resp, _, _ := h.getMTLS(t, "127.0.0.2", "spiffe://sharness.test/llm"); resp.Header.Get("X-Sharness-Deny") == "conn-limit" {
		t.Fatalf("llm, agent at its cap: %s conn-limit; want past the caps", resp.Status)
	}
}

// TestConnLimitMTLSHandshakes: connections to the mTLS port that never send a handshake count
// against the caller of the edge they came from. Counted as one unnamed caller by all, the
// agent (whose Landlock rules let it connect to the port) held the unnamed callers' cap with
// them and llm's next connection was refused before its handshake, so llm could not reach the
// model API (an attack on the running stack, issue 22).
func TestConnLimitMTLSHandshakes(t *testing.T) {
	const per = 4
	h := mtlsCapsHarness(t, per)
	for i := 0; i < per+2; i++ { // the agent at its cap, and past it
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.1")}, Timeout: 5 * time.Second}
		c, err := d.Dial("tcp", h.mtlsAddr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
	}
	deadline := time.Now().Add(5 * time.Second)
	for h.s.caps.held() < per && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := h.s.caps.held(); got != per {
		t.Fatalf("net holds %d connections; want the agent's %d silent ones", got, per)
	}
	resp, body, _ := h.getMTLS(t, "127.0.0.2", "spiffe://sharness.test/llm")
	wantOK(t, "llm while the agent holds silent connections to the mTLS port", resp, body)
}

// mtlsCapsHarness is a harness whose mTLS listener has per connections per caller, where
// 127.0.0.2 is llm's edge and every other address the agent's.
func mtlsCapsHarness(t *testing.T, per int) *harness {
	h := twoCallersUnstarted(t, 10, per, "llm")
	tlsConf := &tls.Config{Certificates: []tls.Certificate{h.ca.issue(t, "127.0.0.1")},
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: h.ca.pool, MinVersion: tls.VersionTLS13}
	h.start(t, tlsConf, peerCaller(fixture(t)))
	return h
}

// dialMTLS makes an mTLS connection to net from src with an SVID of id.
func (h *harness) dialMTLS(t *testing.T, src, id string) (*tls.Conn, error) {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 10 * time.Second}
	c, err := tls.DialWithDialer(d, "tcp", h.mtlsAddr, &tls.Config{RootCAs: h.ca.pool, Certificates: []tls.Certificate{h.ca.issue(t, id)}})
	if err == nil {
		t.Cleanup(func() { c.Close() })
		// TLS 1.3: a refusal before the handshake shows on the first read at the latest.
		c.SetDeadline(time.Now().Add(10 * time.Second))
	}
	return c, err
}

// getMTLS sends one plain request over an mTLS connection from src and reads the answer.
func (h *harness) getMTLS(t *testing.T, src, id string) (*http.Response, string, net.Conn) {
	t.Helper()
	c, err := h.dialMTLS(t, src, id)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "GET http://allowed.test:%d/ HTTP/1.1\r\nHost: a\r\n\r\n", h.plainPort)
	return readResponse(t, c, false)
}
