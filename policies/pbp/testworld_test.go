package pbp_test

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sharness-ai/sharness/policies/pbp"
)

// loadWorld loads policies/testdata/full with tw appended as its test_world ("" for none).
func loadWorld(t *testing.T, tw string) (*pbp.Manifest, error) {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("../testdata/full")); err != nil {
		t.Fatal(err)
	}
	if tw != "" {
		data, err := os.ReadFile(filepath.Join(dir, "manifest.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "manifest.yaml"), append(data, "test_world:\n"+tw...), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return pbp.Load(os.DirFS(dir), "manifest.yaml")
}

// TestTestWorld: test_world is read into the manifest, changes the hash (so a compose file cannot
// add it to the policy a person supplied), and is refused, naming its field, for every value that
// would grant more than one exact thing.
func TestTestWorld(t *testing.T) {
	prod, err := loadWorld(t, "")
	if err != nil {
		t.Fatal(err)
	}
	if prod.TestWorld != nil || prod.TestWorld.LLMCAFromEnv() || prod.TestWorld.Addrs() != nil {
		t.Fatalf("a manifest without test_world grants a test switch: %+v", prod.TestWorld)
	}
	if _, ok := prod.TestWorld.ResolverAddr(); ok {
		t.Fatal("a manifest without test_world names a resolver")
	}
	world, err := loadWorld(t, "  reason: the offline world\n  resolver: '[fd00::53]:53'\n  allow_addrs: [10.214.0.10, fd00::1]\n  llm_ca: environment\n  fixtures:\n    world: {networks: [egress]}\n")
	if err != nil {
		t.Fatal(err)
	}
	if world.Hash == prod.Hash {
		t.Fatal("test_world does not change the policy hash")
	}
	if a, ok := world.TestWorld.ResolverAddr(); !ok || a != netip.MustParseAddrPort("[fd00::53]:53") {
		t.Errorf("resolver %v %v", a, ok)
	}
	if got := world.TestWorld.Addrs(); len(got) != 2 || got[0] != netip.MustParseAddr("10.214.0.10") || got[1] != netip.MustParseAddr("fd00::1") {
		t.Errorf("addrs %v", got)
	}
	if !world.TestWorld.LLMCAFromEnv() || world.TestWorld.Fixtures["world"].Networks[0] != "egress" {
		t.Errorf("test_world read as %+v", world.TestWorld)
	}
	reasonOnly, err := loadWorld(t, "  reason: the offline world\n")
	if err != nil {
		t.Fatal(err)
	}
	if reasonOnly.TestWorld.LLMCAFromEnv() || len(reasonOnly.TestWorld.Addrs()) > 0 {
		t.Error("a test world with a reason alone grants llm's CA or an address")
	}
	for _, tc := range []struct{ name, tw, field string }{
		{"no reason", "  resolver: 10.0.0.1:53\n", "test_world.reason"},
		{"a reason of two lines", "  reason: \"a\\nb\"\n", "test_world.reason"},
		{"a reason with space around it", "  reason: \" a\"\n", "test_world.reason"},
		{"a reason too long", "  reason: " + strings.Repeat("a", 201) + "\n", "test_world.reason"},
		{"a resolver without a port", "  reason: r\n  resolver: 10.0.0.1\n", "test_world.resolver"},
		{"a resolver on port 0", "  reason: r\n  resolver: 10.0.0.1:0\n", "test_world.resolver"},
		{"a resolver by name", "  reason: r\n  resolver: world:53\n", "test_world.resolver"},
		{"a resolver spelt twice over", "  reason: r\n  resolver: '[::ffff:10.0.0.1]:53'\n", "test_world.resolver"},
		{"a range", "  reason: r\n  allow_addrs: [10.214.0.0/24]\n", "test_world.allow_addrs[0]"},
		{"a name", "  reason: r\n  allow_addrs: [10.0.0.1, world]\n", "test_world.allow_addrs[1]"},
		{"an address with a port", "  reason: r\n  allow_addrs: [10.0.0.1:53]\n", "test_world.allow_addrs[0]"},
		{"a short form", "  reason: r\n  allow_addrs: [127.1]\n", "test_world.allow_addrs[0]"},
		{"a leading zero", "  reason: r\n  allow_addrs: [010.0.0.1]\n", "test_world.allow_addrs[0]"},
		{"a mapped address", "  reason: r\n  allow_addrs: ['::ffff:10.0.0.1']\n", "test_world.allow_addrs[0]"},
		{"a zone", "  reason: r\n  allow_addrs: ['fe80::1%eth0']\n", "test_world.allow_addrs[0]"},
		{"an uncanonical IPv6", "  reason: r\n  allow_addrs: ['FD00::1']\n", "test_world.allow_addrs[0]"},
		{"an address twice", "  reason: r\n  allow_addrs: [10.0.0.1, 10.0.0.1]\n", "test_world.allow_addrs[1]"},
		{"no addresses", "  reason: r\n  allow_addrs: []\n", "test_world.allow_addrs"},
		{"a CA from a file", "  reason: r\n  llm_ca: /etc/ca.pem\n", "test_world.llm_ca"},
		{"a fixture named as a component", "  reason: r\n  fixtures: {agent: {networks: [egress]}}\n", "test_world.fixtures.agent"},
		{"a fixture on an edge network", "  reason: r\n  fixtures: {world: {networks: [egress, edge-agent-net]}}\n", "test_world.fixtures.world.networks[1]"},
		{"a fixture on no network", "  reason: r\n  fixtures: {world: {networks: []}}\n", "test_world.fixtures.world.networks"},
		{"a fixture on egress twice", "  reason: r\n  fixtures: {world: {networks: [egress, egress]}}\n", "test_world.fixtures.world.networks[1]"},
		{"no fixtures", "  reason: r\n  fixtures: {}\n", "test_world.fixtures"},
		{"an unknown field", "  reason: r\n  unsafe_best_effort: true\n", "test_world.unsafe_best_effort"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := loadWorld(t, tc.tw)
			if err == nil {
				t.Fatalf("accepted (policy %s, test_world %+v)", m.Hash, m.TestWorld)
			}
			pe, ok := err.(*pbp.Error)
			if !ok || pe.Field != tc.field || pe.Line <= 0 {
				t.Errorf("error %v, want one at field %s with a line", err, tc.field)
			}
		})
	}
}
