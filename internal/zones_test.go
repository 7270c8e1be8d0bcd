// Package internal_test holds the lines between the tree's trust zones (docs/architecture.md,
// "The tree"): each component whole in images/<name>, the host zone in host/, the pure policy
// code in policies/, shared libraries in internal/, and the test kit in testkit/, which nothing
// that ships may link.
package internal_test

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/sharness-ai/sharness/"

// shipped are the binaries a person runs or an image carries as a product. The demo agent
// (images/agent) is not among them: it is the side-door probe's carrier and links the test
// kit's re-executed attempts (testkit/reexec) on purpose.
var shipped = []string{
	"cmd/sharness-ai", "cmd/sharness-runtime", "cmd/sharness-runtime/check", "cmd/sharness-landlock",
	"images/launcher", "images/net", "images/llm", "images/kms", "images/bash", "images/fs",
	"images/claude-code",
}

// TestShippedBinariesLinkNoTestKit: no shipped binary depends, however indirectly, on a package
// of testkit/ (the offline world, the scripted model, the probes, test CAs).
func TestShippedBinariesLinkNoTestKit(t *testing.T) {
	for _, bin := range shipped {
		for _, d := range goList(t, "{{.ImportPath}}", "-deps", module+bin) {
			if strings.HasPrefix(d, module+"testkit/") {
				t.Errorf("%s links %s", bin, strings.TrimPrefix(d, module))
			}
		}
	}
}

// TestZoneImports: who may import whom, for every non-test import in the tree. A component's
// packages import no other component and nothing of the host; shared libraries and the policy
// code import no component, no host code and no test kit; host code imports no test kit. The
// host may import a component's packages (it checks a policy with the same code the component
// will run it with, e.g. images/llm/messages for the tool pins).
func TestZoneImports(t *testing.T) {
	lines := goList(t, "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", "./...")
	checked := 0
	for _, line := range lines {
		f := strings.Fields(line)
		from := strings.TrimPrefix(f[0], module)
		for _, imp := range f[1:] {
			if !strings.HasPrefix(imp, module) {
				continue
			}
			to := strings.TrimPrefix(imp, module)
			checked++
			if why := forbidden(from, to); why != "" {
				t.Errorf("%s imports %s: %s", from, to, why)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no import inside the module was seen: the listing is wrong")
	}
}

// forbidden says why from may not import to, or "" when it may.
func forbidden(from, to string) string {
	zone := func(p string) string { return strings.SplitN(p, "/", 2)[0] }
	component := func(p string) string { // images/net/egress -> images/net
		parts := strings.SplitN(p, "/", 3)
		if len(parts) < 2 {
			return p
		}
		return parts[0] + "/" + parts[1]
	}
	switch zone(from) {
	case "images":
		switch {
		case zone(to) == "images" && component(to) != component(from):
			return "a component imports no other component"
		case zone(to) == "host":
			return "a component imports nothing of the host"
		case zone(to) == "testkit" && component(from) != "images/agent":
			return "a component links no test kit"
		}
	case "internal", "policies", "compose":
		switch zone(to) {
		case "images", "host", "testkit":
			return "shared and policy code import no component, host code or test kit"
		}
	case "host", "cmd":
		if zone(to) == "testkit" {
			return "host code links no test kit"
		}
	}
	return ""
}

func goList(t *testing.T, format string, args ...string) []string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-f", format}, args...)...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %v: %v", args, err)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

func TestForbidden(t *testing.T) {
	for _, tc := range []struct {
		from, to string
		refused  bool
	}{
		{"images/net", "images/net/egress", false},
		{"images/net/egress", "internal/audit", false},
		{"images/net", "images/llm/messages", true},
		{"images/fs/guard", "host/cli", true},
		{"images/kms", "testkit/world", true},
		{"images/agent", "testkit/reexec", false},
		{"internal/gate", "images/fs/guard", true},
		{"policies/pbp", "host/shim", true},
		{"compose", "testkit/world", true},
		{"host/cli", "images/llm/messages", false},
		{"host/cli", "testkit/sidedoor", true},
		{"cmd/sharness-ai", "host/cli", false},
		{"testkit/probe", "images/net/egress", false},
	} {
		if got := forbidden(tc.from, tc.to) != ""; got != tc.refused {
			t.Errorf("forbidden(%s, %s) refused = %v, want %v", tc.from, tc.to, got, tc.refused)
		}
	}
}
