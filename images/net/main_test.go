package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sharness-ai/sharness/internal/mtls"
	"github.com/sharness-ai/sharness/policies/pbp"
)

// worldPolicy copies the full test policy into a folder of its own, with test_world appended
// (none when tw is ""), and returns the folder and its hash.
func worldPolicy(t *testing.T, tw string) (string, string) {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("../../policies/testdata/full")); err != nil {
		t.Fatal(err)
	}
	if tw != "" {
		f, err := os.OpenFile(filepath.Join(dir, "manifest.yaml"), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteString("test_world:\n  reason: a unit test\n" + tw); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	m, err := pbp.Load(os.DirFS(dir), "manifest.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return dir, m.Hash
}

// TestTestWorldSwitches: net exempts exactly the addresses its verified policy's test_world
// lists, warning once per address, and resolves through its resolver; a production policy
// exempts none. Either retired variable, set to anything, stops net under either policy.
func TestTestWorldSwitches(t *testing.T) {
	t.Setenv(mtls.EnvEndpointSocket, "")
	t.Setenv("SHARNESS_AI_COMPONENT", "net")
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // run returns once it has started
	world := "  resolver: 127.0.0.1:5353\n  allow_addrs: [10.214.0.10, fd00::1]\n"
	tests := []struct {
		name, world string
		env         map[string]string
		warned      []string // the addr or resolver of each UNSAFE warning, in order
		wantErr     []string
	}{
		{name: "a production policy", warned: nil},
		{name: "a test world", world: world, warned: []string{"127.0.0.1:5353", "10.214.0.10", "fd00::1"}},
		{name: "a test world with only a reason", world: "  llm_ca: environment\n", warned: nil},
		{name: "the retired address switch under a production policy", env: map[string]string{"SHARNESS_AI_NET_UNSAFE_ALLOW_ADDR_FOR_TESTS": "169.254.169.254"},
			wantErr: []string{`SHARNESS_AI_NET_UNSAFE_ALLOW_ADDR_FOR_TESTS is "169.254.169.254"`, "has no test_world, so it is a production policy"}},
		{name: "the retired resolver switch under a production policy", env: map[string]string{"SHARNESS_AI_NET_RESOLVER": "203.0.113.7:53"},
			wantErr: []string{`SHARNESS_AI_NET_RESOLVER is "203.0.113.7:53"`, "has no test_world"}},
		{name: "the retired address switch under a test world, even with its own value", world: world,
			env:     map[string]string{"SHARNESS_AI_NET_UNSAFE_ALLOW_ADDR_FOR_TESTS": "10.214.0.10"},
			wantErr: []string{`SHARNESS_AI_NET_UNSAFE_ALLOW_ADDR_FOR_TESTS is "10.214.0.10"`, "'s test_world sets them"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir, hash := worldPolicy(t, tt.world)
			t.Setenv("SHARNESS_AI_POLICY_HASH", hash)
			for _, k := range retiredEnv {
				t.Setenv(k, tt.env[k])
			}
			cfg := config{policyDir: dir, listen: "127.0.0.1:0", mtlsListen: "127.0.0.1:0"}
			var buf logBuf
			err := run(ctx, cfg, slog.New(slog.NewJSONHandler(&buf, nil)))
			if tt.wantErr != nil {
				if err == nil {
					t.Fatalf("net started; want a refusal containing %q", tt.wantErr)
				}
				for _, w := range append([]string{"refusing to start: "}, tt.wantErr...) {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error = %v, want it to contain %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var warned []string
			for _, line := range strings.Split(strings.TrimSpace(buf.buf.String()), "\n") {
				var l struct{ Level, Msg, Addr, Resolver string }
				if json.Unmarshal([]byte(line), &l) == nil && l.Level == "WARN" && strings.HasPrefix(l.Msg, "UNSAFE") {
					warned = append(warned, l.Addr+l.Resolver)
				}
			}
			if diff := cmp.Diff(tt.warned, warned); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
		})
	}
}
