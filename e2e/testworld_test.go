//go:build e2e

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestTestSwitchesNeedATestWorld: the offline world's test switches work only under a policy
// whose hash marks a test world (policies/world), never under the default (production) policy
// that docker-compose.yml runs. Set on the default stack by an overlay, as an edited compose file
// would: llm's extra CA and net's old resolver and allowed-address switches are each refused by
// the runtime shim, with its reason in `docker compose up` output, before the container starts;
// and without the shim (runc), llm and net refuse them themselves, naming the variable and the
// policy, rather than start with them.
func TestTestSwitchesNeedATestWorld(t *testing.T) {
	requireShim(t)
	root := repoRoot(t)
	s := newStack(t, "SHARNESS_AI_POLICY_HASH="+defaultHash(t, root), "SHARNESS_AI_SECRETS_DIR="+t.TempDir(),
		"SHARNESS_AI_MANIFEST="+filepath.Join(root, "policies", "default", "manifest.yaml"))
	s.files = []string{filepath.Join(root, "docker-compose.yml")} // the production stack, no world
	ca := ""
	for _, kv := range s.env {
		if v, ok := strings.CutPrefix(kv, "SHARNESS_WORLD_CA_PEM="); ok {
			ca = v
		}
	}
	if ca == "" {
		t.Fatal("no world CA in the stack's environment")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	with := func(t *testing.T, service, runtime, env string) *stack {
		t.Helper()
		f := filepath.Join(t.TempDir(), "override.yml")
		body := "services:\n  " + service + ":\n    runtime: " + runtime + "\n    environment:\n      " + env + "\n"
		if err := os.WriteFile(f, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		o := *s
		o.files = append(append([]string{}, s.files...), f)
		return &o
	}
	caEnv := "SHARNESS_AI_LLM_UNSAFE_CA_PEM_FOR_TESTS: ${SHARNESS_WORLD_CA_PEM}"
	for _, tc := range []struct{ name, service, env, field, want string }{
		{"llm-test-ca", "llm", caEnv, "process.env[SHARNESS_AI_LLM_UNSAFE_CA_PEM_FOR_TESTS]", "only under a policy whose test_world.llm_ca grants it"},
		{"net-allowed-addresses", "net", "SHARNESS_AI_NET_UNSAFE_ALLOW_ADDR_FOR_TESTS: 10.214.0.10,10.214.0.11",
			"process.env[SHARNESS_AI_NET_UNSAFE_ALLOW_ADDR_FOR_TESTS]", `"10.214.0.10,10.214.0.11"`},
		{"net-resolver", "net", "SHARNESS_AI_NET_RESOLVER: 10.214.0.10:53", "process.env[SHARNESS_AI_NET_RESOLVER]", `"10.214.0.10:53"`},
	} {
		t.Run("shim/"+tc.name, func(t *testing.T) {
			o := with(t, tc.service, "sharness", tc.env)
			out, err := o.compose(ctx, "up", "--pull", "never", "--no-deps", "--detach", tc.service)
			if err == nil || !strings.Contains(string(out), "sharness-runtime: refused "+tc.service) || !strings.Contains(string(out), tc.field) ||
				!strings.Contains(string(out), tc.want) {
				t.Errorf("%s under the default policy: want the shim's refusal naming %s (%q), got (%v):\n%s", tc.name, tc.field, tc.want, err, out)
			}
			for _, line := range strings.Split(string(out), "\n") {
				if strings.Contains(line, "sharness-runtime: refused") {
					t.Logf("%s", strings.TrimSpace(line))
				}
			}
			o.compose(ctx, "rm", "-f", "-s", tc.service)
		})
	}
	// Without the shim the component is the last check: it stops before it serves.
	// The components log JSON, so the quotes in their messages arrive escaped.
	for _, tc := range []struct{ name, service, env, want, why string }{
		{"llm-test-ca", "llm", caEnv, "SHARNESS_AI_LLM_UNSAFE_CA_PEM_FOR_TESTS is set, and policy " + defaultHash(t, root) + " does not grant it",
			"got no test_world (a production policy)"},
		{"net-allowed-addresses", "net", "SHARNESS_AI_NET_UNSAFE_ALLOW_ADDR_FOR_TESTS: 169.254.169.254",
			`SHARNESS_AI_NET_UNSAFE_ALLOW_ADDR_FOR_TESTS is \"169.254.169.254\"`, "policy " + defaultHash(t, root) + " has no test_world"},
	} {
		t.Run("component/"+tc.name, func(t *testing.T) {
			out, err := with(t, tc.service, "runc", tc.env).run(ctx, "", tc.service)
			if err == nil || !strings.Contains(string(out), "refusing to start: "+tc.want) || !strings.Contains(string(out), tc.why) {
				t.Errorf("%s under runc and the default policy: want %s to refuse to start (%q, %q), got (%v):\n%s", tc.name, tc.service, tc.want, tc.why, err, out)
			}
		})
	}
}
