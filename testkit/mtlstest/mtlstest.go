// Package mtlstest is a throwaway session CA for tests: it issues X.509-SVIDs for
// spiffe://<trust-domain>/<role> the way the launcher does, so tests of any component can build
// internal/mtls configurations over real TLS 1.3 without a Workload API.
//
// It is for _test.go files only. What it does not guarantee: anything a production CA must (its
// keys live in test memory, serial numbers are not unique across CAs, there is no revocation).
package mtlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spiffe/go-spiffe/v2/bundle/x509bundle"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"

	"github.com/sharness-ai/sharness/policies/pbp"
)

// CA is a session CA for one trust domain. Its certificate is valid from a minute ago for an
// hour, and every certificate it issues expires with it.
type CA struct {
	td     spiffeid.TrustDomain
	cert   *x509.Certificate
	key    *ecdsa.PrivateKey
	bundle *x509bundle.Bundle
	serial atomic.Int64
}

// NewCA makes a CA for trust domain td (e.g. "sharness.test"), failing tb on any error.
func NewCA(tb testing.TB, td string) *CA {
	tb.Helper()
	trust, err := spiffeid.TrustDomainFromString(td)
	if err != nil {
		tb.Fatalf("mtlstest: trust domain %q: %v", td, err)
	}
	key := newKey(tb)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "mtlstest session CA"},
		NotBefore:             time.Now().Add(-time.Minute),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign,
		URIs:                  []*url.URL{{Scheme: "spiffe", Host: td}},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatalf("mtlstest: CA certificate: %v", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatalf("mtlstest: CA certificate: %v", err)
	}
	ca := &CA{td: trust, cert: cert, key: key, bundle: x509bundle.FromX509Authorities(trust, []*x509.Certificate{cert})}
	ca.serial.Store(1)
	return ca
}

// Bundle is the CA's trust bundle: an x509bundle.Source for mtls.ServerConfig and ClientConfig.
func (ca *CA) Bundle() *x509bundle.Bundle { return ca.bundle }

// Cert is the CA certificate, for tests that build a bundle of several CAs.
func (ca *CA) Cert() *x509.Certificate { return ca.cert }

// SVID issues an SVID for spiffe://<td>/<role>. An *x509svid.SVID is an x509svid.Source.
func (ca *CA) SVID(tb testing.TB, role string) *x509svid.SVID {
	tb.Helper()
	return ca.SVIDFor(tb, ca.td.String()+"/"+role)
}

// SVIDFor issues an SVID for any SPIFFE ID, including one of another trust domain (which a
// correct peer then refuses).
func (ca *CA) SVIDFor(tb testing.TB, id string) *x509svid.SVID {
	tb.Helper()
	if len(id) < len("spiffe://") || id[:len("spiffe://")] != "spiffe://" {
		id = "spiffe://" + id
	}
	u, err := url.Parse(id)
	if err != nil {
		tb.Fatalf("mtlstest: SPIFFE ID %q: %v", id, err)
	}
	der, key := ca.Sign(tb, u, "")
	pk, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		tb.Fatalf("mtlstest: %v", err)
	}
	svid, err := x509svid.ParseRaw(der, pk)
	if err != nil {
		tb.Fatalf("mtlstest: go-spiffe refuses the SVID for %s: %v", id, err)
	}
	return svid
}

// Session issues one SVID per component of m, keyed by component name, with the SPIFFE ID the
// manifest derives for it.
func (ca *CA) Session(tb testing.TB, m *pbp.Manifest) map[string]*x509svid.SVID {
	tb.Helper()
	svids := make(map[string]*x509svid.SVID, len(m.Components))
	for _, c := range m.Components {
		svids[c.Name] = ca.SVIDFor(tb, c.SPIFFEID)
	}
	return svids
}

// Sign issues an end-entity certificate (DER) with a fresh P-256 key for a SPIFFE ID, a DNS name
// (for a plain-TLS baseline), or both; either may be empty.
func (ca *CA) Sign(tb testing.TB, id *url.URL, dns string) ([]byte, *ecdsa.PrivateKey) {
	tb.Helper()
	key := newKey(tb)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(ca.serial.Add(1)),
		NotBefore:             time.Now().Add(-time.Minute),
		NotAfter:              ca.cert.NotAfter,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	if id != nil {
		tmpl.URIs = []*url.URL{id}
	}
	if dns != "" {
		tmpl.DNSNames = []string{dns}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		tb.Fatalf("mtlstest: issue: %v", err)
	}
	return der, key
}

func newKey(tb testing.TB) *ecdsa.PrivateKey {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatalf("mtlstest: key: %v", err)
	}
	return key
}
