// Package throwawayca is the throwaway certificate authority of the offline world (the world and
// model fixture images, `sharness-ai run --offline`, and in-process tests): a CA whose key is
// dropped as soon as it has signed one server leaf. Whoever starts an offline stack
// (`sharness-ai run --offline`, testkit/worldca for hack/up.sh, the e2e suite) makes it before the
// stack starts and hands the leaf to the world and the model, and the CA certificate to their
// clients, by environment: a shared volume would be a host mount the compiled policies do not
// list, which the runtime shim refuses.
//
// It lives in internal/ rather than testkit/ because the shipped CLI's offline mode mints it; it
// is no test bypass (nothing in the harness trusts a certificate it made unless the offline world
// policy, whose llm and probe are given the CA by that same run, is the one running).
//
// What it does not guarantee: anything a real CA does. Its certificates exist for one run;
// trusting one outside the offline world is a hole, and nothing here prevents it.
package throwawayca

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"time"
)

// Lifetime covers one test run with room to spare; the CA dies with the process.
const Lifetime = 24 * time.Hour

// Issue makes a throwaway CA (ECDSA P-256, path length 0) named caName and a server leaf for
// names signed by it. It returns the leaf with its chain and the CA certificate in PEM. The CA
// key is never written anywhere and is dropped when Issue returns.
func Issue(caName string, names []string, now time.Time) (tls.Certificate, []byte, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("generate CA key: %w", err)
	}
	ca := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: caName},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(Lifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("create CA certificate: %w", err)
	}
	if ca, err = x509.ParseCertificate(caDER); err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("parse CA certificate: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("generate leaf key: %w", err)
	}
	leaf := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: names[0]},
		DNSNames:     names,
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(Lifetime),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("create leaf certificate: %w", err)
	}
	cert := tls.Certificate{Certificate: [][]byte{leafDER, caDER}, PrivateKey: key}
	return cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127)) // crypto/rand never fails
	return n
}

// PEMs is a throwaway CA's certificate and one leaf it signed (with its chain) and the leaf's key,
// in PEM, as the harness hands them to processes by environment.
type PEMs struct{ CA, Chain, Key string }

// IssuePEM is Issue in PEM. The CA key is never encoded: it is dropped when IssuePEM returns.
func IssuePEM(caName string, names []string, now time.Time) (PEMs, error) {
	cert, caPEM, err := Issue(caName, names, now)
	if err != nil {
		return PEMs{}, err
	}
	key, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	if err != nil {
		return PEMs{}, fmt.Errorf("encode leaf key: %w", err)
	}
	var chain []byte
	for _, der := range cert.Certificate {
		chain = append(chain, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	}
	return PEMs{CA: string(caPEM), Chain: string(chain),
		Key: string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: key}))}, nil
}

// Leaf parses a leaf handed over as PEM and checks that it is valid now for every one of names
// under the last certificate of its chain (its CA), which it returns as a pool.
func Leaf(chainPEM, keyPEM string, names []string, now time.Time) (tls.Certificate, *x509.CertPool, error) {
	if chainPEM == "" || keyPEM == "" {
		return tls.Certificate{}, nil, errors.New("no certificate or no key given")
	}
	cert, err := tls.X509KeyPair([]byte(chainPEM), []byte(keyPEM))
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("parse leaf: %w", err)
	}
	if len(cert.Certificate) < 2 {
		return tls.Certificate{}, nil, errors.New("parse leaf: the chain must end with the CA certificate")
	}
	ca, err := x509.ParseCertificate(cert.Certificate[len(cert.Certificate)-1])
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("parse CA: %w", err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	for _, name := range names {
		if _, err := cert.Leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: pool, CurrentTime: now}); err != nil {
			return tls.Certificate{}, nil, fmt.Errorf("leaf for %s: %w", name, err)
		}
	}
	return cert, pool, nil
}
