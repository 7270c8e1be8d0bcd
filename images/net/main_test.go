package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sharness-ai/sharness/internal/mtls"
	"github.com/sharness-ai/sharness/policies/pbp"
)

// TestUnsafeAllowAddrsList: -unsafe-allow-addr-for-tests takes a comma-separated list of exact
// addresses, warns once per address at start, and refuses to start on anything else in it.
func TestUnsafeAllowAddrsList(t *testing.T) {
	dir := "../../policies/testdata/full"
	m, err := pbp.Load(os.DirFS(dir), "manifest.yaml")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("SHARNESS_AI_POLICY_HASH", m.Hash)
	t.Setenv("SHARNESS_AI_COMPONENT", "net")
	t.Setenv(mtls.EnvEndpointSocket, "")
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // run returns once it has started
	tests := []struct {
		name, list string
		warned     []string // the addr of each UNSAFE warning, in order
		wantErr    string
	}{
		{"unset", "", nil, ""},
		{"one", "10.214.0.10", []string{"10.214.0.10"}, ""},
		{"the world and the model", "10.214.0.10,10.214.0.11", []string{"10.214.0.10", "10.214.0.11"}, ""},
		{"spaces around entries", " 10.214.0.10 , 10.214.0.11", []string{"10.214.0.10", "10.214.0.11"}, ""},
		{"IPv6", "fd00::1,10.214.0.10", []string{"fd00::1", "10.214.0.10"}, ""},
		{"mapped IPv4 is its IPv4", "::ffff:10.214.0.10", []string{"10.214.0.10"}, ""},
		{"empty entry", "10.214.0.10,", nil, `"" is not an IP address`},
		{"only a comma", ",", nil, `"" is not an IP address`},
		{"a range", "10.214.0.0/24", nil, `"10.214.0.0/24" is not an IP address`},
		{"a name", "world.sharness.test", nil, "is not an IP address"},
		{"with a port", "10.214.0.10:443", nil, "is not an IP address"},
		{"short form", "127.1", nil, "is not an IP address"},
		{"leading zero", "010.214.0.10", nil, "is not an IP address"},
		{"zone", "fe80::1%eth0", nil, "is not an IP address without a zone"},
		{"twice", "10.214.0.10,10.214.0.10", nil, `"10.214.0.10" is not an IP address without a zone, or is given twice`},
		{"twice, once mapped", "10.214.0.10,::ffff:10.214.0.10", nil, "or is given twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := config{policyDir: dir, listen: "127.0.0.1:0", mtlsListen: "127.0.0.1:0", unsafeAllowAddrs: tt.list}
			var buf logBuf
			err := run(ctx, cfg, slog.New(slog.NewJSONHandler(&buf, nil)))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), "refusing to start: unsafe-allow-addr-for-tests") || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("error = %v, want a refusal containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var warned []string
			for _, line := range strings.Split(strings.TrimSpace(buf.buf.String()), "\n") {
				var l struct{ Level, Msg, Addr string }
				if json.Unmarshal([]byte(line), &l) == nil && l.Level == "WARN" && strings.HasPrefix(l.Msg, "UNSAFE") {
					warned = append(warned, l.Addr)
				}
			}
			if diff := cmp.Diff(tt.warned, warned); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
		})
	}
}
