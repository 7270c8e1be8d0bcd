package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer safe for the servers' goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestHandler(t *testing.T) {
	repo := t.TempDir()
	if err := os.MkdirAll(filepath.Join(repo, "info"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repo, "info", "refs"), []byte("abc\trefs/heads/main\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var buf syncBuffer
	h := handler(repo, newEvents(&buf))
	tests := []struct {
		name, host, path string
		status           int
		body, location   string
	}{
		{"hello", "allowed.sharness.test", "/", 200, "hello from allowed.sharness.test\n", ""},
		{"hello drops the port", "denied.sharness.test:8443", "/", 200, "hello from denied.sharness.test\n", ""},
		{"redirect", "allowed.sharness.test", "/redirect", 302, "", "http://denied.sharness.test/"},
		{"repo file", "allowed.sharness.test", "/repo.git/info/refs", 200, "abc\trefs/heads/main\n", ""},
		{"smart probe gets the static file", "allowed.sharness.test", "/repo.git/info/refs?service=git-upload-pack", 200, "abc\trefs/heads/main\n", ""},
		{"dot segments are cleaned away, not served", "allowed.sharness.test", "/repo.git/../../etc/passwd", 307, "", "/etc/passwd"},
		{"unknown path", "allowed.sharness.test", "/nope", 404, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest("GET", "http://"+tt.host+tt.path, nil)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			if w.Code != tt.status {
				t.Fatalf("status = %d, want %d", w.Code, tt.status)
			}
			if tt.body != "" && w.Body.String() != tt.body {
				t.Errorf("body = %q, want %q", w.Body.String(), tt.body)
			}
			if got := w.Header().Get("Location"); got != tt.location {
				t.Errorf("Location = %q, want %q", got, tt.location)
			}
		})
	}
	if !strings.Contains(buf.String(), `{"http_host":"allowed.sharness.test","method":"GET","path":"/redirect","tls":false,"from":"192.0.2.1"}`) {
		t.Errorf("log misses the redirect request:\n%s", buf.String())
	}
}

func TestIssue(t *testing.T) {
	now := time.Now()
	cert, caPEM, err := issue(names, now)
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
	if !ca.IsCA || !ca.MaxPathLenZero || ca.MaxPathLen != 0 {
		t.Errorf("CA: IsCA %v, path length zero %v", ca.IsCA, ca.MaxPathLenZero)
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
		if err := writeAtomic(dir, "ca.pem", []byte(data)); err != nil {
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
	if err := writeAtomic(filepath.Join(dir, "missing"), "ca.pem", nil); err == nil {
		t.Error("writing into a missing directory succeeded")
	}
}

func TestConfigFrom(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	cfg, err := configFrom(env(map[string]string{"WORLD_ADDR": "172.30.99.10"}))
	if err != nil || cfg.addr != self || cfg.caDir != "/world-ca" || cfg.repo != "/srv/repo.git" {
		t.Errorf("configFrom = %+v, %v", cfg, err)
	}
	for _, bad := range []string{"", "nope", "::1", "172.30.99.10:53"} {
		if _, err := configFrom(env(map[string]string{"WORLD_ADDR": bad})); err == nil {
			t.Errorf("WORLD_ADDR=%q accepted", bad)
		}
	}
}
