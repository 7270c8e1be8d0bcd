package main

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sharness-ai/sharness/internal/mtls"
	"github.com/sharness-ai/sharness/internal/session"
	"github.com/sharness-ai/sharness/internal/throwawayca"
	"github.com/sharness-ai/sharness/policies/pbp"
)

// TestRunRefuses: run stops, with a reason, before serving anything it cannot serve safely.
func TestRunRefuses(t *testing.T) {
	dir := "../../policies/default"
	m, err := pbp.Load(os.DirFS(dir), "manifest.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ca, err := throwawayca.IssuePEM("llm unit test CA", []string{"api.anthropic.com"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	testCA := ca.CA
	world, err := pbp.Load(os.DirFS("../../policies/world"), "manifest.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, component, hash, socket, want string
		dir, ca                             string
	}{
		{name: "no policy hash", component: "llm", want: "no policy hash"},
		{name: "not an llm", component: "net", hash: m.Hash, want: "is kind net, not llm"},
		{name: "no identity", component: "llm", hash: m.Hash, want: "missing SVID"},
		// The test CA: refused under the default (production) policy, before anything else
		// is read; granted by the world's, which then stops for want of an identity.
		{name: "the test CA under a production policy", component: "llm", hash: m.Hash, ca: testCA,
			want: pbp.EnvLLMUnsafeCA + " is set, and policy " + m.Hash + " does not grant it (want test_world.llm_ca: environment, got no test_world (a production policy))"},
		{name: "the test CA under the world's policy", component: "llm", hash: world.Hash, dir: "../../policies/world", ca: testCA, want: "missing SVID"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(session.EnvPolicyHash, tt.hash)
			t.Setenv(session.EnvPolicyKey, "")
			t.Setenv(session.EnvComponent, tt.component)
			t.Setenv(mtls.EnvEndpointSocket, tt.socket)
			d := dir
			if tt.dir != "" {
				d = tt.dir
			}
			err := run(context.Background(), config{policyDir: d, listen: "127.0.0.1:0", unsafeCA: tt.ca}, discard())
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("run: %v, want %q", err, tt.want)
			}
		})
	}
}
