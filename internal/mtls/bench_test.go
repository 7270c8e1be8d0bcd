package mtls

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"slices"
	"testing"

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

// newBenchSession builds the session with the test helpers of mtls_test.go.
func newBenchSession(tb testing.TB) *benchSession {
	tb.Helper()
	m := loadFull(tb)
	ca := newCA(tb, m.TrustDomain)
	s := &benchSession{m: m, ca: ca, plainName: "net.sharness.test", roots: x509.NewCertPool()}
	s.roots.AddCert(ca.cert)
	s.agent, s.net = ca.issue(tb, m.Component("agent").SPIFFEID), ca.issue(tb, m.Component("net").SPIFFEID)
	der, key := ca.sign(tb, nil, s.plainName)
	s.plain = tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	return s
}
