package throwawayca

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestIssue(t *testing.T) {
	now := time.Now()
	names := []string{"allowed.sharness.test", "denied.sharness.test"}
	cert, caPEM, err := Issue("test CA", names, now)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(caPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		t.Fatalf("CA PEM = %q", caPEM)
	}
	ca, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if !ca.IsCA || !ca.MaxPathLenZero || ca.MaxPathLen != 0 || ca.Subject.CommonName != "test CA" {
		t.Errorf("CA: IsCA %v, path length zero %v, name %q", ca.IsCA, ca.MaxPathLenZero, ca.Subject.CommonName)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range append(names, "other.sharness.test") {
		_, err := leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: pool, CurrentTime: now})
		if want := name != "other.sharness.test"; (err == nil) != want {
			t.Errorf("verify for %s: %v, want ok=%v", name, err, want)
		}
	}
	if _, err := leaf.Verify(x509.VerifyOptions{DNSName: names[0], Roots: pool, CurrentTime: now.Add(Lifetime + time.Minute)}); err == nil {
		t.Error("the leaf outlives its lifetime")
	}
	// A TLS client that trusts only the CA completes a handshake for each name.
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.StartTLS()
	defer srv.Close()
	for _, name := range names {
		c, err := tls.Dial("tcp", srv.Listener.Addr().String(), &tls.Config{ServerName: name, RootCAs: pool})
		if err != nil {
			t.Errorf("handshake for %s: %v", name, err)
			continue
		}
		c.Close()
	}
}

func TestIssuePEMAndLeaf(t *testing.T) {
	now := time.Now()
	p, err := IssuePEM("test CA", []string{"a.test", "b.test"}, now)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(p.CA+p.Chain, "PRIVATE KEY") || strings.Count(p.Chain, "BEGIN CERTIFICATE") != 2 {
		t.Fatalf("chain/CA PEM malformed: %q", p.Chain)
	}
	other, err := IssuePEM("other CA", []string{"a.test"}, now)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		chain, key string
		names      []string
		at         time.Time
		wantErr    string
	}{
		{"valid for both names", p.Chain, p.Key, []string{"a.test", "b.test"}, now, ""},
		{"a name it does not carry", p.Chain, p.Key, []string{"c.test"}, now, "leaf for c.test"},
		{"key of another leaf", p.Chain, other.Key, nil, now, "parse leaf"},
		{"no CA in the chain", strings.SplitAfter(p.Chain, "-----END CERTIFICATE-----\n")[0], p.Key, nil, now, "must end with the CA"},
		{"expired", p.Chain, p.Key, []string{"a.test"}, now.Add(2 * Lifetime), "leaf for a.test"},
		{"nothing given", "", "", nil, now, "no certificate"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, pool, err := Leaf(tc.chain, tc.key, tc.names, tc.at)
			if tc.wantErr == "" {
				if err != nil || pool == nil {
					t.Fatalf("Leaf: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Leaf error = %v, want it to contain %q", err, tc.wantErr)
			}
		})
	}
}
