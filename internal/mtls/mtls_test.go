package mtls

import (
	"context"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spiffe/go-spiffe/v2/bundle/x509bundle"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/spiffetls/tlsconfig"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"

	"github.com/sharness-ai/sharness/policies/pbp"
	"github.com/sharness-ai/sharness/testkit/mtlstest"
)

func loadFull(t testing.TB) *pbp.Manifest {
	t.Helper()
	m, err := pbp.Load(os.DirFS("../../policies/testdata/full"), "manifest.yaml")
	if err != nil {
		t.Fatalf("load fixture: %v", err)
	}
	return m
}

// testCA is a throwaway session CA for one test (mtlstest), with the field names the tests and
// benchmarks of this package use.
type testCA struct {
	*mtlstest.CA
	cert   *x509.Certificate
	bundle *x509bundle.Bundle
}

func newCA(t testing.TB, td string) *testCA {
	t.Helper()
	ca := mtlstest.NewCA(t, td)
	return &testCA{CA: ca, cert: ca.Cert(), bundle: ca.Bundle()}
}

func (ca *testCA) issue(t testing.TB, id string) *x509svid.SVID {
	t.Helper()
	return ca.SVIDFor(t, id)
}

// sign issues an end-entity certificate for a SPIFFE ID or a DNS name, with a fresh P-256 key.
func (ca *testCA) sign(t testing.TB, id *url.URL, dns string) ([]byte, *ecdsa.PrivateKey) {
	t.Helper()
	return ca.Sign(t, id, dns)
}

// session is a CA and one SVID per component of m.
func session(t *testing.T, m *pbp.Manifest) (*testCA, map[string]*x509svid.SVID) {
	ca := newCA(t, m.TrustDomain)
	svids := map[string]*x509svid.SVID{}
	for _, c := range m.Components {
		svids[c.Name] = ca.issue(t, c.SPIFFEID)
	}
	return ca, svids
}

// result is what each side of one connection saw.
type result struct {
	server, client error // handshake errors
	exchange       error // a byte there and back, after both handshakes
	resumed        bool
}

func (r result) ok() bool { return r.server == nil && r.client == nil && r.exchange == nil }

// connect runs one TLS connection over loopback TCP: the server echoes one byte.
func connect(t *testing.T, ln net.Listener, addr string, client *tls.Config, server *tls.Config) result {
	t.Helper()
	type srvOut struct{ hs, ex error }
	done := make(chan srvOut, 1)
	go func() {
		raw, err := ln.Accept()
		if err != nil {
			done <- srvOut{hs: err}
			return
		}
		defer raw.Close()
		_ = raw.SetDeadline(time.Now().Add(5 * time.Second))
		c := tls.Server(raw, server)
		if err := c.Handshake(); err != nil {
			done <- srvOut{hs: err}
			return
		}
		b := make([]byte, 1)
		_, err = io.ReadFull(c, b)
		if err == nil {
			_, err = c.Write(b)
		}
		done <- srvOut{ex: err}
	}()
	var r result
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	_ = raw.SetDeadline(time.Now().Add(5 * time.Second))
	c := tls.Client(raw, client)
	if r.client = c.Handshake(); r.client == nil {
		r.resumed = c.ConnectionState().DidResume
		b := []byte{42}
		if _, err := c.Write(b); err != nil {
			r.exchange = err
		} else if _, err := io.ReadFull(c, b); err != nil {
			r.exchange = err
		} else if b[0] != 42 {
			r.exchange = errors.New("echo differs")
		}
	} else {
		raw.Close() // let the server see the client's refusal
	}
	s := <-done
	r.server = s.hs
	if r.exchange == nil {
		r.exchange = s.ex
	}
	return r
}

func listen(t *testing.T) (net.Listener, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln, ln.Addr().String()
}

// anyClient and anyServer authorize every SVID of the bundle: the other side of a one-sided test.
func anyClient(svid *x509svid.SVID, b x509bundle.Source) *tls.Config {
	c := tlsconfig.MTLSClientConfig(svid, b, tlsconfig.AuthorizeAny())
	c.MinVersion = tls.VersionTLS13
	return c
}

func anyServer(svid *x509svid.SVID, b x509bundle.Source) *tls.Config {
	c := tlsconfig.MTLSServerConfig(svid, b, tlsconfig.AuthorizeAny())
	c.MinVersion = tls.VersionTLS13
	return c
}

// TestEdgeMatrix connects every ordered pair of the full fixture's components: an edge connects
// and carries a byte; every other pair is refused by the server alone, by the client alone (before
// dialing, and by the handshake), and with both sides ours.
func TestEdgeMatrix(t *testing.T) {
	m := loadFull(t)
	if len(m.Components) != 7 {
		t.Fatalf("fixture has %d components, want 7", len(m.Components))
	}
	ca, svids := session(t, m)
	ln, addr := listen(t)
	allowed := 0
	for _, cl := range m.Components {
		for _, sv := range m.Components {
			want := false
			for _, e := range m.Edges {
				want = want || (e.From == cl.Name && e.To == sv.Name)
			}
			if want {
				allowed++
			}
			t.Run(cl.Name+"->"+sv.Name, func(t *testing.T) {
				if got := Allowed(m, cl.Name, sv.Name); got != want {
					t.Fatalf("Allowed = %v, want %v", got, want)
				}
				server := ServerConfig(svids[sv.Name], ca.bundle, m, sv.Name)
				client, err := ClientConfig(svids[cl.Name], ca.bundle, m, cl.Name, sv.Name)
				if want != (err == nil) {
					t.Fatalf("ClientConfig error = %v, want error: %v", err, !want)
				}
				if !want && !errors.Is(err, ErrNoEdge) {
					t.Errorf("ClientConfig error %v does not wrap ErrNoEdge", err)
				}
				if want {
					if r := connect(t, ln, addr, client, server); !r.ok() {
						t.Errorf("both ours: %+v, want a connection", r)
					}
				}
				// The server alone, against a client that authorizes anything.
				r := connect(t, ln, addr, anyClient(svids[cl.Name], ca.bundle), server)
				if want && !r.ok() {
					t.Errorf("server alone: %+v, want a connection", r)
				}
				if !want && r.server == nil {
					t.Errorf("server alone: server accepted client %s", cl.Name)
				}
				// The client alone (its handshake, past the refusal to dial), against a server
				// that accepts anything.
				r = connect(t, ln, addr, clientConfig(svids[cl.Name], ca.bundle, m, cl.Name, sv.Name), anyServer(svids[sv.Name], ca.bundle))
				if want && !r.ok() {
					t.Errorf("client alone: %+v, want a connection", r)
				}
				if !want && r.client == nil {
					t.Errorf("client alone: client accepted server %s", sv.Name)
				}
			})
		}
	}
	if allowed != len(m.Edges) || allowed == 0 {
		t.Errorf("matrix allowed %d pairs, fixture has %d edges", allowed, len(m.Edges))
	}
}

// TestImpostorServer: on an allowed edge, a server presenting any other component's SVID of the
// same session is refused by the client.
func TestImpostorServer(t *testing.T) {
	m := loadFull(t)
	ca, svids := session(t, m)
	ln, addr := listen(t)
	for _, e := range m.Edges {
		for _, other := range m.Components {
			if other.Name == e.To {
				continue
			}
			t.Run(e.From+"->"+e.To+"/as-"+other.Name, func(t *testing.T) {
				client, err := ClientConfig(svids[e.From], ca.bundle, m, e.From, e.To)
				if err != nil {
					t.Fatal(err)
				}
				r := connect(t, ln, addr, client, anyServer(svids[other.Name], ca.bundle))
				if r.client == nil {
					t.Errorf("client accepted %s presenting as %s", other.Name, e.To)
				}
			})
		}
	}
}

// TestForeignCA: an SVID with a valid component ID from another CA (same trust domain name) is
// refused by a server and by a client.
func TestForeignCA(t *testing.T) {
	m := loadFull(t)
	ca, svids := session(t, m)
	evil := newCA(t, m.TrustDomain)
	// The impostor side trusts both CAs, so the refusal can only come from the side under test.
	both := x509bundle.FromX509Authorities(ca.bundle.TrustDomain(), []*x509.Certificate{ca.cert, evil.cert})
	ln, addr := listen(t)
	agent, net_ := m.Component("agent"), m.Component("net")

	r := connect(t, ln, addr, anyClient(evil.issue(t, agent.SPIFFEID), both), ServerConfig(svids["net"], ca.bundle, m, "net"))
	if r.server == nil || !strings.Contains(r.server.Error(), "verify") {
		t.Errorf("server with a foreign client: %+v, want a verification error", r)
	}
	client, err := ClientConfig(svids["agent"], ca.bundle, m, "agent", "net")
	if err != nil {
		t.Fatal(err)
	}
	r = connect(t, ln, addr, client, anyServer(evil.issue(t, net_.SPIFFEID), both))
	if r.client == nil || !strings.Contains(r.client.Error(), "verify") {
		t.Errorf("client with a foreign server: %+v, want a verification error", r)
	}
}

// TestNoTickets: ServerConfig issues no tickets, so a client with a session cache never resumes.
func TestNoTickets(t *testing.T) {
	m := loadFull(t)
	ca, svids := session(t, m)
	ln, addr := listen(t)
	server := ServerConfig(svids["net"], ca.bundle, m, "net")
	if !server.SessionTicketsDisabled || server.MinVersion != tls.VersionTLS13 {
		t.Fatalf("server config: tickets disabled %v, min version %#x", server.SessionTicketsDisabled, server.MinVersion)
	}
	client, err := ClientConfig(svids["agent"], ca.bundle, m, "agent", "net")
	if err != nil {
		t.Fatal(err)
	}
	client.ClientSessionCache = tls.NewLRUClientSessionCache(4)
	for i := range 2 {
		if r := connect(t, ln, addr, client, server); !r.ok() || r.resumed {
			t.Fatalf("connection %d: %+v, want a full handshake", i, r)
		}
	}
}

// TestResumedSessionClientSide: a client session cache shared between two destinations lets a
// session with net be resumed where llm was meant. go-spiffe alone accepts it (docs/pitfalls.md);
// VerifyConnection refuses it, and still accepts the legitimate resumption.
func TestResumedSessionClientSide(t *testing.T) {
	m := loadFull(t)
	ca, svids := session(t, m)
	ln, addr := listen(t)
	server := anyServer(svids["net"], ca.bundle) // tickets on
	cache := tls.NewLRUClientSessionCache(4)
	withCache := func(c *tls.Config) *tls.Config { c.ClientSessionCache = cache; return c }

	toNet, err := ClientConfig(svids["agent"], ca.bundle, m, "agent", "net")
	if err != nil {
		t.Fatal(err)
	}
	toNet = withCache(toNet)
	if r := connect(t, ln, addr, toNet, server); !r.ok() || r.resumed {
		t.Fatalf("first connection: %+v", r)
	}
	if r := connect(t, ln, addr, toNet, server); !r.ok() || !r.resumed {
		t.Fatalf("legitimate resumption: %+v, want resumed and authorized", r)
	}

	// The pitfall: go-spiffe's authorizer for llm, with the shared cache, resumes net's session.
	plain := withCache(tlsconfig.MTLSClientConfig(svids["agent"], ca.bundle, tlsconfig.AuthorizeID(spiffeid.RequireFromString(m.Component("llm").SPIFFEID))))
	if r := connect(t, ln, addr, plain, server); !r.ok() || !r.resumed {
		t.Fatalf("control: go-spiffe alone %+v; this test no longer shows the pitfall", r)
	}
	toLLM, err := ClientConfig(svids["agent"], ca.bundle, m, "agent", "llm")
	if err != nil {
		t.Fatal(err)
	}
	r := connect(t, ln, addr, withCache(toLLM), server)
	if r.client == nil || !strings.Contains(r.client.Error(), "not llm") {
		t.Errorf("resumed net session where llm was meant: %+v, want refused by VerifyConnection", r)
	}
}

// TestResumedSessionServerSide: two servers sharing ticket keys (a config cloned with tickets
// turned back on). A ticket agent got from net is presented to kms, which agent has no edge to:
// resumption skips VerifyPeerCertificate, and VerifyConnection refuses.
func TestResumedSessionServerSide(t *testing.T) {
	m := loadFull(t)
	ca, svids := session(t, m)
	ln, addr := listen(t)
	var key [32]byte
	if _, err := rand.Read(key[:]); err != nil {
		t.Fatal(err)
	}
	ticketsOn := func(c *tls.Config) *tls.Config {
		c.SessionTicketsDisabled = false
		c.SetSessionTicketKeys([][32]byte{key})
		return c
	}
	netSrv := ticketsOn(ServerConfig(svids["net"], ca.bundle, m, "net"))
	kmsSrv := ticketsOn(ServerConfig(svids["kms"], ca.bundle, m, "kms"))
	client := anyClient(svids["agent"], ca.bundle)
	client.ClientSessionCache = tls.NewLRUClientSessionCache(4)
	client.ServerName = "same"

	if r := connect(t, ln, addr, client, netSrv); !r.ok() {
		t.Fatalf("agent->net: %+v", r)
	}
	if r := connect(t, ln, addr, client, netSrv); !r.ok() || !r.resumed {
		t.Fatalf("agent->net resumed: %+v, want resumed and authorized", r)
	}
	r := connect(t, ln, addr, client, kmsSrv)
	if r.server == nil || !errors.Is(r.server, ErrNoEdge) {
		t.Errorf("agent->kms with net's ticket: %+v, want refused by the server's VerifyConnection", r)
	}
}

func TestPeerComponent(t *testing.T) {
	m := loadFull(t)
	_, svids := session(t, m)
	cs := tls.ConnectionState{HandshakeComplete: true, PeerCertificates: svids["llm"].Certificates}
	if c, err := PeerComponent(m, cs); err != nil || c.Name != "llm" {
		t.Errorf("PeerComponent = %v, %v; want llm", c, err)
	}
	if _, err := PeerComponent(m, tls.ConnectionState{HandshakeComplete: true}); err == nil {
		t.Error("PeerComponent without certificates: want an error")
	}
	if _, err := Peer(m, spiffeid.RequireFromString("spiffe://sharness.test/stranger")); err == nil {
		t.Error("Peer of an unknown ID: want an error")
	}
}

func TestSourceFailsClosed(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ name, addr string }{
		{"unset", ""},
		{"not unix", "tcp://127.0.0.1:1"},
		{"no socket", "unix://" + filepath.Join(dir, "agent.sock")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := source(context.Background(), tc.addr, time.Second)
			if err == nil || !strings.HasPrefix(err.Error(), "missing SVID") || !strings.HasSuffix(err.Error(), "fail closed") {
				t.Errorf("source(%q) error = %v, want a missing SVID error that fails closed", tc.addr, err)
			}
		})
	}
	t.Run("silent socket", func(t *testing.T) {
		path := filepath.Join(dir, "silent.sock")
		ln, err := net.Listen("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		_, err = source(context.Background(), "unix://"+path, 300*time.Millisecond)
		if err == nil || !strings.Contains(err.Error(), "no answer") {
			t.Errorf("source on a silent socket: %v, want a timeout that fails closed", err)
		}
	})
}
