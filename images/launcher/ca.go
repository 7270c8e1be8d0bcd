package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"fmt"
	"math/big"
	"net/url"
	"time"

	"github.com/sharness-ai/sharness/policies/pbp"
)

// identities is everything the launcher keeps for the session: the session CA's certificate and
// one SVID per role. It has no field that could hold the CA's private key (a test checks its
// type): issue destroys that key before it returns.
type identities struct {
	trustDomain string // spiffe://<trust domain>
	caDER       []byte
	caSHA256    string // hex SHA-256 of caDER, for the session's audit record
	notAfter    time.Time
	svids       map[string]svid // by role
	self        svid            // the launcher's own, for its audit log; never served
}

// svid is one role's X.509 SVID, as the Workload API sends it.
type svid struct {
	id      string
	certDER []byte // the leaf; the CA is the bundle, not part of the chain
	keyDER  []byte // PKCS#8
}

// issue makes the session CA (P-256, path length 0, valid for length), issues an SVID to every
// component of m, self included (it signs the launcher's audit log and is served to no one),
// and destroys the CA key. Nothing is written anywhere.
func issue(m *pbp.Manifest, self string, length time.Duration, now time.Time) (*identities, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate session CA key: %w", err)
	}
	defer destroy(caKey)
	td := &url.URL{Scheme: "spiffe", Host: m.TrustDomain}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{Organization: []string{"SHarness"}, CommonName: "SHarness session CA"},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(length),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLen:            0,
		MaxPathLenZero:        true, // the CA signs leaves only
		KeyUsage:              x509.KeyUsageCertSign,
		URIs:                  []*url.URL{td},
	}
	caDER, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("make session CA: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, fmt.Errorf("parse session CA: %w", err)
	}
	sum := sha256.Sum256(caDER)
	ids := &identities{trustDomain: td.String(), caDER: caDER, caSHA256: hex.EncodeToString(sum[:]), notAfter: ca.NotAfter, svids: map[string]svid{}}
	for _, c := range m.Components {
		s, err := leaf(c, ca, caKey, now)
		if err != nil {
			return nil, fmt.Errorf("issue SVID for %s: %w", c.Name, err)
		}
		if c.Name == self {
			ids.self = s
		} else {
			ids.svids[c.Name] = s
		}
	}
	return ids, nil
}

func leaf(c *pbp.Component, ca *x509.Certificate, caKey *ecdsa.PrivateKey, now time.Time) (svid, error) {
	id, err := url.Parse(c.SPIFFEID)
	if err != nil || id.Scheme != "spiffe" {
		return svid{}, fmt.Errorf("bad SPIFFE ID %q", c.SPIFFEID)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return svid{}, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return svid{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{Organization: []string{"SHarness"}, CommonName: c.Name},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              ca.NotAfter,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		URIs:                  []*url.URL{id},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return svid{}, err
	}
	return svid{id: c.SPIFFEID, certDER: der, keyDER: keyDER}, nil
}

// serial is a random 128-bit serial number (CA/Browser Forum practice: at least 64 random bits).
func serial() *big.Int {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // never fails since Go 1.24: it crashes the program instead
	return new(big.Int).SetBytes(b)
}

// destroy overwrites the CA's private scalar in place (its words, then the value) so the key
// cannot sign again. Go cannot guarantee erasure: crypto/ecdsa makes transient copies when it
// generates and signs, keeps its own copy in an internal cache that is freed but not wiped once
// the key is unreachable, and the garbage collector may have left old copies behind. What holds:
// the key is never written to disk or sent anywhere, and no reference to it outlives issue.
func destroy(k *ecdsa.PrivateKey) {
	if k == nil {
		return
	}
	//lint:ignore SA1019 wiping the scalar in place is the point, and no other API reaches it
	d := k.D
	if d != nil {
		clear(d.Bits()) // the words, in place: SetInt64(0) alone only shortens the slice
		d.SetInt64(0)
	}
}
