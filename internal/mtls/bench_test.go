package mtls

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"math/big"
	"net"
	"net/url"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/spiffe/go-spiffe/v2/bundle/x509bundle"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"

	"github.com/sharness-ai/sharness/policies/pbp"
)

// The benchmarks measure what mutual TLS costs two components (the agent dialing net, an edge
// of the full fixture) against a named baseline in the same run, and report the ratio as
// "×baseline", ns/op over the median ns/op of the baseline's runs (issue 3, "Benchmarks"):
//
//	go test -run '^$' -bench . -benchtime 2s ./internal/mtls
//
// BenchmarkHandshake: a loopback TCP connect plus a full TLS 1.3 handshake, until both sides
// are done (in TLS 1.3 the server verifies the client's certificate after the client has
// finished), with ServerConfig/ClientConfig against plain TLS 1.3 with server authentication
// only. Both sides use P-256 certificates from the same throwaway CA and the default key
// exchange; neither issues session tickets, so every handshake is a full one.
//
// BenchmarkRoundTrip: one 64-byte write and the echo's read on an established connection,
// mTLS against plain TCP.

const roundTripSize = 64

func BenchmarkHandshake(b *testing.B) {
	s := newBenchSession(b)
	var baseline []float64
	b.Run("baseline=tls13-server-auth", func(b *testing.B) {
		srv := &tls.Config{Certificates: []tls.Certificate{s.plain}, MinVersion: tls.VersionTLS13, SessionTicketsDisabled: true}
		cli := &tls.Config{RootCAs: s.roots, ServerName: s.plainName, MinVersion: tls.VersionTLS13}
		baseline = append(baseline, handshakes(b, srv, cli))
	})
	b.Run("mtls", func(b *testing.B) {
		cli, err := ClientConfig(s.agent, s.ca.bundle, s.m, "agent", "net")
		if err != nil {
			b.Fatal(err)
		}
		ns := handshakes(b, ServerConfig(s.net, s.ca.bundle, s.m, "net"), cli)
		reportRatio(b, ns, baseline)
	})
}

func BenchmarkRoundTrip(b *testing.B) {
	s := newBenchSession(b)
	var baseline []float64
	b.Run("baseline=tcp", func(b *testing.B) {
		baseline = append(baseline, roundTrips(b, nil, nil))
	})
	b.Run("mtls", func(b *testing.B) {
		cli, err := ClientConfig(s.agent, s.ca.bundle, s.m, "agent", "net")
		if err != nil {
			b.Fatal(err)
		}
		ns := roundTrips(b, ServerConfig(s.net, s.ca.bundle, s.m, "net"), cli)
		reportRatio(b, ns, baseline)
	})
}

// reportRatio reports ns/op over the median of the baseline's runs in this process (with
// -count N, go test runs a sub-benchmark N times before the next one).
func reportRatio(b *testing.B, ns float64, baseline []float64) {
	if len(baseline) > 0 {
		v := slices.Sorted(slices.Values(baseline))
		b.ReportMetric(ns/v[len(v)/2], "×baseline")
	}
}

// handshakes times TCP connect + handshake on both sides, and returns ns per handshake.
func handshakes(b *testing.B, srv, cli *tls.Config) float64 {
	ln := benchListener(b)
	done := make(chan error, 1)
	go func() {
		for {
			raw, err := ln.Accept()
			if err != nil {
				return
			}
			done <- tls.Server(raw, srv).Handshake()
			raw.Close()
		}
	}()
	for b.Loop() {
		raw, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		if err := tls.Client(raw, cli).Handshake(); err != nil {
			b.Fatalf("client handshake: %v", err)
		}
		if err := <-done; err != nil {
			b.Fatalf("server handshake: %v", err)
		}
		raw.Close()
	}
	return float64(b.Elapsed().Nanoseconds()) / float64(b.N)
}

// roundTrips times a write and the echo's read on one established connection, TLS when srv
// and cli are given, and returns ns per round trip.
func roundTrips(b *testing.B, srv, cli *tls.Config) float64 {
	ln := benchListener(b)
	go func() {
		raw, err := ln.Accept()
		if err != nil {
			return
		}
		defer raw.Close()
		c := raw
		if srv != nil {
			c = tls.Server(raw, srv)
		}
		buf := make([]byte, roundTripSize)
		for {
			if _, err := io.ReadFull(c, buf); err != nil {
				return
			}
			if _, err := c.Write(buf); err != nil {
				return
			}
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	if cli != nil {
		tc := tls.Client(c, cli)
		if err := tc.Handshake(); err != nil {
			b.Fatal(err)
		}
		c = tc
	}
	msg := make([]byte, roundTripSize)
	for b.Loop() {
		if _, err := c.Write(msg); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(c, msg); err != nil {
			b.Fatal(err)
		}
	}
	return float64(b.Elapsed().Nanoseconds()) / float64(b.N)
}

func benchListener(b *testing.B) net.Listener {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ln.Close() })
	return ln
}

// benchSession is the full fixture, a throwaway session CA (P-256, as the launcher's), the
// SVIDs of agent and net, and for the baseline a plain server certificate with a DNS name from
// the same CA.
type benchSession struct {
	m          *pbp.Manifest
	ca         *testCA
	agent, net *x509svid.SVID
	plain      tls.Certificate
	plainName  string
	roots      *x509.CertPool
}

// newBenchSession builds the session like mtls_test.go's loadFull, newCA and issue, which take
// a *testing.T and so cannot run inside a benchmark.
func newBenchSession(tb testing.TB) *benchSession {
	tb.Helper()
	m, err := pbp.Load(os.DirFS("../../policies/testdata/full"), "manifest.yaml")
	if err != nil {
		tb.Fatalf("load fixture: %v", err)
	}
	key := benchKey(tb)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "bench session CA"},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		BasicConstraintsValid: true, MaxPathLenZero: true, KeyUsage: x509.KeyUsageCertSign,
		URIs: []*url.URL{{Scheme: "spiffe", Host: m.TrustDomain}}}
	cert := benchCert(tb, tmpl, tmpl, key, key)
	ca := &testCA{cert: cert, key: key, bundle: x509bundle.FromX509Authorities(spiffeid.RequireTrustDomainFromString(m.TrustDomain), []*x509.Certificate{cert})}
	s := &benchSession{m: m, ca: ca, plainName: "net.sharness.test", roots: x509.NewCertPool()}
	s.roots.AddCert(cert)
	svid := func(name string) *x509svid.SVID {
		c := m.Component(name)
		if c == nil {
			tb.Fatalf("the full fixture has no component %s", name)
		}
		u, err := url.Parse(c.SPIFFEID)
		if err != nil {
			tb.Fatal(err)
		}
		k := benchKey(tb)
		leaf := benchCert(tb, ca.leafTemplate(u, ""), ca.cert, k, ca.key)
		pk, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			tb.Fatal(err)
		}
		v, err := x509svid.ParseRaw(leaf.Raw, pk)
		if err != nil {
			tb.Fatalf("go-spiffe refuses the bench SVID: %v", err)
		}
		return v
	}
	s.agent, s.net = svid("agent"), svid("net")
	k := benchKey(tb)
	leaf := benchCert(tb, ca.leafTemplate(nil, s.plainName), ca.cert, k, ca.key)
	s.plain = tls.Certificate{Certificate: [][]byte{leaf.Raw}, PrivateKey: k, Leaf: leaf}
	return s
}

// leafTemplate is an end-entity certificate for a SPIFFE ID or for a DNS name.
func (ca *testCA) leafTemplate(id *url.URL, dns string) *x509.Certificate {
	t := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), NotBefore: time.Now().Add(-time.Minute),
		NotAfter: ca.cert.NotAfter, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	if id != nil {
		t.URIs = []*url.URL{id}
	}
	if dns != "" {
		t.DNSNames = []string{dns}
	}
	return t
}

func benchKey(tb testing.TB) *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	return k
}

func benchCert(tb testing.TB, tmpl, parent *x509.Certificate, k, signer *ecdsa.PrivateKey) *x509.Certificate {
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &k.PublicKey, signer)
	if err != nil {
		tb.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}
