package main

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/sharness-ai/sharness/internal/mtls"
	"github.com/sharness-ai/sharness/internal/session"
	"github.com/sharness-ai/sharness/policies/pbp"
)

// TestRunRefuses: run stops, with a reason, before serving anything it cannot serve safely.
func TestRunRefuses(t *testing.T) {
	dir := "../../policies/default"
	m, err := pbp.Load(os.DirFS(dir), "manifest.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, component, hash, socket, want string
	}{
		{"no policy hash", "llm", "", "", "no policy hash"},
		{"not an llm", "net", m.Hash, "", "is kind net, not llm"},
		{"no identity", "llm", m.Hash, "", "missing SVID"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(session.EnvPolicyHash, tt.hash)
			t.Setenv(session.EnvPolicyKey, "")
			t.Setenv(session.EnvComponent, tt.component)
			t.Setenv(mtls.EnvEndpointSocket, tt.socket)
			err := run(context.Background(), config{policyDir: dir, listen: "127.0.0.1:0"}, discard())
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("run: %v, want %q", err, tt.want)
			}
		})
	}
}
