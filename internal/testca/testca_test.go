package testca

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
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

func TestWriteAtomic(t *testing.T) {
	dir := t.TempDir()
	for _, data := range []string{"first", "second"} {
		if err := WriteAtomic(dir, "ca.pem", []byte(data)); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(dir, "ca.pem"))
		if err != nil || string(got) != data {
			t.Errorf("ca.pem = %q, %v; want %q", got, err, data)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("dir holds %d entries, want only ca.pem (no temporary left)", len(entries))
	}
	if st, err := os.Stat(filepath.Join(dir, "ca.pem")); err != nil || st.Mode().Perm() != 0o644 {
		t.Errorf("ca.pem mode = %v, %v; want 0644", st.Mode(), err)
	}
	if err := WriteAtomic(filepath.Join(dir, "missing"), "ca.pem", nil); err == nil {
		t.Error("writing into a missing directory succeeded")
	}
}
