package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/sharness-ai/sharness/internal/throwawayca"
)

func TestConfigFrom(t *testing.T) {
	sum := sha256.Sum256([]byte(testKey))
	keyHex := hex.EncodeToString(sum[:])
	leaf, err := throwawayca.IssuePEM("test CA", []string{apiHost}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	other, err := throwawayca.IssuePEM("test CA", []string{"example.test"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	base := map[string]string{"MODEL_TLS_CERT": leaf.Chain, "MODEL_TLS_KEY": leaf.Key}
	with := func(kv ...string) map[string]string {
		env := maps.Clone(base)
		for i := 0; i < len(kv); i += 2 {
			env[kv[i]] = kv[i+1]
		}
		return env
	}
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		want    config
		wantErr string
	}{
		{"defaults", nil, base, config{listen: ":443", recordListen: ":8099"}, ""},
		{"environment", nil, with("MODEL_LISTEN", ":1443", "MODEL_RECORD_LISTEN", ":1", "MODEL_EXPECT_KEY_SHA256", keyHex),
			config{listen: ":1443", recordListen: ":1", keyHash: sum[:]}, ""},
		{"upper-case hex", nil, with("MODEL_EXPECT_KEY_SHA256", strings.ToUpper(keyHex)),
			config{listen: ":443", recordListen: ":8099", keyHash: sum[:]}, ""},
		{"health", []string{"health"}, with("MODEL_LISTEN", ":1443"),
			config{listen: ":1443", recordListen: ":8099", health: true}, ""},
		{"no certificate", nil, nil, config{}, "MODEL_TLS_CERT, MODEL_TLS_KEY: no certificate"},
		{"a leaf for another host", nil, map[string]string{"MODEL_TLS_CERT": other.Chain, "MODEL_TLS_KEY": other.Key}, config{}, "leaf for api.anthropic.com"},
		{"short hash", nil, with("MODEL_EXPECT_KEY_SHA256", keyHex[:62]), config{}, "is not 64 hex digits"},
		{"not hex", nil, with("MODEL_EXPECT_KEY_SHA256", "z"+keyHex[1:]), config{}, "is not 64 hex digits"},
		{"the key itself", nil, with("MODEL_EXPECT_KEY_SHA256", testKey), config{}, "is not 64 hex digits"},
		{"unknown verb", []string{"serve"}, base, config{}, "unknown arguments"},
		{"a flag", []string{"-listen", ":1"}, base, config{}, "unknown arguments"},
		{"health and more", []string{"health", "now"}, base, config{}, "unknown arguments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := configFrom(tt.args, func(k string) string { return tt.env[k] })
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.cert.Leaf == nil || got.ca == nil {
				t.Errorf("config without the leaf or its CA")
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(config{}), cmpopts.IgnoreFields(config{}, "cert", "ca")); diff != "" {
				t.Errorf("config (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRun runs the binary's server on loopback: the SDK over TLS trusting only the handed-over
// CA, the record on its own listener, the healthcheck, and a clean stop.
func TestRun(t *testing.T) {
	leaf, err := throwawayca.IssuePEM("test CA", []string{apiHost}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := configFrom(nil, func(k string) string {
		return map[string]string{"MODEL_LISTEN": "127.0.0.1:0", "MODEL_RECORD_LISTEN": "127.0.0.1:0",
			"MODEL_TLS_CERT": leaf.Chain, "MODEL_TLS_KEY": leaf.Key}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	logs, done := &syncBuffer{}, make(chan error, 1)
	go func() { done <- run(ctx, cfg, slog.New(slog.NewJSONHandler(logs, nil))) }()
	defer func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("run: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("run did not stop")
		}
	}()
	// The serving line names both addresses; the healthcheck dials the API's.
	var serving struct{ Msg, API, Record string }
	for i := 0; i < 200 && serving.API == ""; i++ {
		time.Sleep(10 * time.Millisecond)
		for _, line := range strings.Split(logs.String(), "\n") {
			if json.Unmarshal([]byte(line), &serving) == nil && serving.Msg == "sharness-model serving" {
				break
			}
			serving.API = ""
		}
	}
	if serving.API == "" {
		t.Fatalf("no serving line in the log:\n%s", logs.String())
	}
	cfg.listen = serving.API
	if err := health(ctx, cfg); err != nil {
		t.Fatalf("health once serving: %v", err)
	}
	pool := cfg.ca
	// The SDK dials api.anthropic.com, which only the loopback listener answers here.
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true,
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, serving.API)
		}}
	c := anthropic.NewClient(option.WithBaseURL("https://api.anthropic.com"), option.WithAPIKey(testKey),
		option.WithHTTPClient(&http.Client{Transport: tr}), option.WithMaxRetries(0))
	var raw *http.Response
	m, err := c.Messages.New(ctx, anthropic.MessageNewParams{Model: "m", MaxTokens: 50, Messages: []anthropic.MessageParam{user("over TLS")}},
		option.WithResponseInto(&raw))
	if err != nil {
		t.Fatal(err)
	}
	if raw.ProtoMajor != 2 {
		t.Errorf("protocol = %s, want HTTP/2 (as the real API offers)", raw.Proto)
	}
	if want := "offline model: 1 messages, last user text: over TLS"; m.Content[0].Text != want {
		t.Errorf("reply = %q, want %q", m.Content[0].Text, want)
	}
	resp, err := http.Get("http://" + serving.Record + "/_record")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r recordJSON
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, &r); err != nil || len(r.Requests) != 1 || !strings.Contains(r.Requests[0].Body, "over TLS") {
		t.Errorf("record = %s, %v; want the one request", b, err)
	}
	// A CA that did not sign the server's leaf fails the healthcheck.
	stale, err := throwawayca.IssuePEM("stale", []string{apiHost}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	_, cfg.ca, _ = throwawayca.Leaf(stale.Chain, stale.Key, nil, time.Now())
	if err := health(ctx, cfg); err == nil {
		t.Error("health passed with another CA")
	}
}

// syncBuffer is a bytes.Buffer safe for the server's goroutines.
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
