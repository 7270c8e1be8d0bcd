package netdial

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/pem"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sharness-ai/sharness/internal/mtls"
	"github.com/sharness-ai/sharness/policies/pbp"
	"github.com/sharness-ai/sharness/testkit/mtlstest"
)

// fakeNet is net's mTLS proxy listener in miniature: it authorizes llm by its SVID, answers
// CONNECT for allow, and refuses every other host the way net does.
func fakeNet(t *testing.T, conf *tls.Config, allow, target string) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", conf)
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
				r, err := http.ReadRequest(br)
				if err != nil {
					return
				}
				if r.Method != http.MethodConnect || r.Host != allow {
					io.WriteString(c, "HTTP/1.1 403 Forbidden\r\nX-Sharness-Deny: host not allowed\r\nContent-Length: 0\r\n\r\n")
					return
				}
				up, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer up.Close()
				io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n")
				go io.Copy(up, br)
				io.Copy(c, up)
			}()
		}
	}()
	return ln.Addr().String()
}

func TestTunnelThroughNet(t *testing.T) {
	up := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "via "+r.Host+" key="+r.Header.Get("x-api-key"))
	}))
	defer up.Close()
	ca := mtlstest.NewCA(t, "sharness.test")
	m := &pbp.Manifest{TrustDomain: "sharness.test", Components: []*pbp.Component{
		{Name: "llm", Kind: pbp.KindLLM, SPIFFEID: "spiffe://sharness.test/llm"},
		{Name: "net", Kind: pbp.KindNet, SPIFFEID: "spiffe://sharness.test/net"},
		{Name: "app", Kind: pbp.KindApp, SPIFFEID: "spiffe://sharness.test/app"}},
		Edges: []pbp.Edge{{From: "app", To: "net"}, {From: "llm", To: "net"}}}
	proxy := fakeNet(t, mtls.ServerConfig(ca.SVID(t, "net"), ca.Bundle(), m, "net"), "example.com:443", up.Listener.Addr().String())

	// The upstream's CA goes in the way SHARNESS_AI_LLM_UNSAFE_CA_PEM_FOR_TESTS puts it.
	pool, err := Roots(string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: up.Certificate().Raw})))
	if err != nil {
		t.Fatal(err)
	}
	clientConf, err := mtls.ClientConfig(ca.SVID(t, "llm"), ca.Bundle(), m, "llm", "net")
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: Transport(Through(proxy, clientConf), pool)}
	resp, err := hc.Get("https://example.com/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "via example.com key=" {
		t.Errorf("got %q", b)
	}

	// net refuses the host: the error says which rule.
	if _, err := hc.Get("https://other.example.com/"); err == nil || !strings.Contains(err.Error(), "host not allowed") {
		t.Errorf("refused CONNECT: %v", err)
	}
	// An SVID from another CA (same trust domain, same name) does not open a tunnel.
	other := mtlstest.NewCA(t, "sharness.test")
	stranger, _ := mtls.ClientConfig(other.SVID(t, "llm"), ca.Bundle(), m, "llm", "net")
	if _, err := Through(proxy, stranger)(context.Background(), "tcp", "example.com:443"); err == nil {
		t.Error("a stranger's SVID opened a tunnel")
	}
	// Without the unsafe CA, the test upstream's certificate is not trusted.
	sys, err := Roots("")
	if err != nil {
		t.Fatal(err)
	}
	hc = &http.Client{Transport: Transport(Through(proxy, clientConf), sys)}
	if _, err := hc.Get("https://example.com/"); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("untrusted upstream: %v", err)
	}
	if _, err := Roots("nothing"); err == nil {
		t.Error("a CA without PEM: accepted")
	}
}
