// Package policies_test holds the trust-zone test for the whole policies tree.
package policies_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestPoliciesArePure holds the line STYLE.md draws: the policy model and compiler decide, they
// never reach the network, start processes or log. The compose renderer is held to no network.
func TestPoliciesArePure(t *testing.T) {
	cases := []struct {
		pkgs      string
		forbidden []string
	}{
		{"github.com/sharness-ai/sharness/policies/...", []string{"net/http", "os/exec", "log/slog", "log"}},
		{"github.com/sharness-ai/sharness/compose", []string{"net/http"}},
	}
	for _, tc := range cases {
		out, err := exec.Command("go", "list", "-deps", tc.pkgs).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", tc.pkgs, err)
		}
		deps := map[string]bool{}
		for _, d := range strings.Fields(string(out)) {
			deps[d] = true
		}
		for _, f := range tc.forbidden {
			if deps[f] {
				t.Errorf("%s depends on %s", tc.pkgs, f)
			}
		}
	}
}
