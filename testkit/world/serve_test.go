package main

import (
	"bytes"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sharness-ai/sharness/internal/throwawayca"
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
		{"bulk", "allowed.sharness.test", "/bulk/5", 200, "xxxxx", ""},
		{"bulk over the bound", "allowed.sharness.test", "/bulk/67108865", 400, "", ""},
		{"bulk not a number", "allowed.sharness.test", "/bulk/-1", 400, "", ""},
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

func TestConfigFrom(t *testing.T) {
	leaf, err := throwawayca.IssuePEM("test CA", names, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	narrow, err := throwawayca.IssuePEM("test CA", names[:1], time.Now())
	if err != nil {
		t.Fatal(err)
	}
	env := func(kv ...string) func(string) string {
		m := map[string]string{"WORLD_TLS_CERT": leaf.Chain, "WORLD_TLS_KEY": leaf.Key}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	cfg, err := configFrom(env("WORLD_ADDR", "172.30.99.10"))
	if err != nil || cfg.addr != self || cfg.cert.Leaf == nil || cfg.repo != "/srv/repo.git" || len(cfg.extra) != 0 {
		t.Errorf("configFrom = %+v, %v", cfg, err)
	}
	cfg, err = configFrom(env("WORLD_ADDR", "172.30.99.10", "WORLD_EXTRA_HOSTS", "api.anthropic.com=10.214.0.11"))
	if err != nil || cfg.extra["api.anthropic.com"] != netip.MustParseAddr("10.214.0.11") {
		t.Errorf("configFrom with WORLD_EXTRA_HOSTS = %+v, %v", cfg, err)
	}
	if _, err := configFrom(env("WORLD_ADDR", "172.30.99.10", "WORLD_EXTRA_HOSTS", "api.anthropic.com")); err == nil {
		t.Error("a bad WORLD_EXTRA_HOSTS was accepted")
	}
	for _, bad := range []string{"", "nope", "::1", "172.30.99.10:53"} {
		if _, err := configFrom(env("WORLD_ADDR", bad)); err == nil {
			t.Errorf("WORLD_ADDR=%q accepted", bad)
		}
	}
	for name, getenv := range map[string]func(string) string{
		"no leaf":                 env("WORLD_ADDR", "172.30.99.10", "WORLD_TLS_CERT", "", "WORLD_TLS_KEY", ""),
		"a leaf without denied.*": env("WORLD_ADDR", "172.30.99.10", "WORLD_TLS_CERT", narrow.Chain, "WORLD_TLS_KEY", narrow.Key),
	} {
		if _, err := configFrom(getenv); err == nil || !strings.Contains(err.Error(), "WORLD_TLS_CERT") {
			t.Errorf("%s: configFrom error = %v, want one naming WORLD_TLS_CERT", name, err)
		}
	}
}
