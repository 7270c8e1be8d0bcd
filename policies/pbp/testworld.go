package pbp

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"unicode"

	"github.com/sharness-ai/sharness/internal/strictyaml"
)

// TestWorld is a manifest's test_world section: the mark of a policy written for an offline test
// world (policies/world, compose/world.yml), with the test switches that world needs. It is part
// of the manifest, so the policy hash covers it: a compose file cannot turn a production policy
// (one without the section) into a test world, and every component refuses a test switch the
// verified policy does not grant (docs/inputs.md).
type TestWorld struct {
	// Reason says, for the person who reads the policy, why it is a test world. Required.
	Reason string `yaml:"reason" json:"reason"`
	// Resolver is the DNS server net asks (ip:port) in place of the system's: the world's.
	Resolver string `yaml:"resolver,omitempty" json:"resolver,omitempty"`
	// AllowAddrs are the exact special-range addresses net does not refuse: the world's own
	// containers, on private addresses that net refuses everywhere else.
	AllowAddrs []string `yaml:"allow_addrs,omitempty" json:"allow_addrs,omitempty"`
	// LLMCA says where llm may take one extra CA its upstream may chain to. The only value is
	// LLMCAFromEnvironment: the world's CA is made afresh, its key dropped, for every run
	// (testkit/worldca, internal/throwawayca), so its bytes cannot be in the hash; the policy grants
	// the switch and the person at `up` gives the certificate.
	LLMCA string `yaml:"llm_ca,omitempty" json:"llm_ca,omitempty"`
	// Fixtures are the world's containers, by service name, which the runtime shim admits as
	// such (fixtures.json beside the installed policy, compile.FixturesPath).
	Fixtures map[string]Fixture `yaml:"fixtures,omitempty" json:"fixtures,omitempty"`
}

// Fixture is one of a test world's containers: the networks it joins, named as in the compose
// file (without the project's prefix).
type Fixture struct {
	Networks []string `yaml:"networks" json:"networks"`
}

// LLMCAFromEnvironment is test_world.llm_ca's one value: llm reads the extra CA from
// EnvLLMUnsafeCA.
const LLMCAFromEnvironment = "environment"

// EnvLLMUnsafeCA is llm's extra CA for its upstream (PEM), granted by test_world.llm_ca.
const EnvLLMUnsafeCA = "SHARNESS_AI_LLM_UNSAFE_CA_PEM_FOR_TESTS"

// fixtureNetworks are the networks a fixture may join: the egress network alone, where it stands
// in for the internet. An edge network would put it between two components.
var fixtureNetworks = []string{EgressNetwork}

// maxReason bounds test_world.reason: a sentence, not a document.
const maxReason = 200

// ResolverAddr is the resolver net asks under this policy; ok is false when the policy names
// none (net then asks the system's). A nil TestWorld names none.
func (w *TestWorld) ResolverAddr() (a netip.AddrPort, ok bool) {
	if w == nil || w.Resolver == "" {
		return netip.AddrPort{}, false
	}
	a, err := netip.ParseAddrPort(w.Resolver)
	return a, err == nil
}

// Addrs are AllowAddrs parsed (Load refused any that does not parse). A nil TestWorld allows none.
func (w *TestWorld) Addrs() []netip.Addr {
	if w == nil {
		return nil
	}
	out := make([]netip.Addr, 0, len(w.AllowAddrs))
	for _, s := range w.AllowAddrs {
		if a, err := netip.ParseAddr(s); err == nil {
			out = append(out, a)
		}
	}
	return out
}

// LLMCAFromEnv says whether llm may take an extra CA from its environment. A nil TestWorld (a
// production policy) does not let it.
func (w *TestWorld) LLMCAFromEnv() bool { return w != nil && w.LLMCA == LLMCAFromEnvironment }

// shapeTestWorld checks test_world's shape, as the schema does (policies/schema): a reason, lists
// and maps that are not empty, no entry twice, a known llm_ca, and fixtures by name that join
// only the egress network. checkTestWorld checks the values.
func shapeTestWorld(d *strictyaml.Document, w *TestWorld) error {
	if w == nil {
		return nil
	}
	const f = "test_world"
	if w.Reason == "" {
		return d.ErrAt(f+".reason", "missing: say why this policy is a test world")
	}
	if w.AllowAddrs != nil && len(w.AllowAddrs) == 0 {
		return d.ErrAt(f+".allow_addrs", "an empty list: leave it out to allow no address")
	}
	for i, s := range w.AllowAddrs {
		if slices.Index(w.AllowAddrs, s) != i {
			return d.ErrAt(fmt.Sprintf("%s.allow_addrs[%d]", f, i), "%q is listed twice", s)
		}
	}
	if w.LLMCA != "" && w.LLMCA != LLMCAFromEnvironment {
		return d.ErrAt(f+".llm_ca", "%q: the only value is %q (llm reads the CA from %s)", w.LLMCA, LLMCAFromEnvironment, EnvLLMUnsafeCA)
	}
	if w.Fixtures != nil && len(w.Fixtures) == 0 {
		return d.ErrAt(f+".fixtures", "an empty map: leave it out for a world without fixtures")
	}
	for _, n := range sortedKeys(w.Fixtures) {
		ff := f + ".fixtures." + n
		if !ValidComponentName(n) {
			return d.ErrAt(ff, "fixture name %q must match %s", n, ComponentNamePattern)
		}
		nets := w.Fixtures[n].Networks
		if len(nets) == 0 {
			return d.ErrAt(ff+".networks", "a fixture joins at least one network (one of %v)", fixtureNetworks)
		}
		for i, net := range nets {
			if !slices.Contains(fixtureNetworks, net) {
				return d.ErrAt(fmt.Sprintf("%s.networks[%d]", ff, i), "%q: a fixture joins only %v (an edge network would put it between two components)", net, fixtureNetworks)
			}
			if slices.Index(nets, net) != i {
				return d.ErrAt(fmt.Sprintf("%s.networks[%d]", ff, i), "%q is listed twice", net)
			}
		}
	}
	return nil
}

// checkTestWorld checks test_world's values, after its shape: a reason of one line, a resolver
// and addresses each in its one canonical spelling, and fixtures that are not components.
func checkTestWorld(d *strictyaml.Document, w *TestWorld, components map[string]ComponentRef) error {
	if w == nil {
		return nil
	}
	const f = "test_world"
	if r := strings.TrimSpace(w.Reason); r != w.Reason || len(r) > maxReason || strings.ContainsFunc(r, unicode.IsControl) {
		return d.ErrAt(f+".reason", "%q: want one line of text (1 to %d bytes, no surrounding space) that says why this policy is a test world", w.Reason, maxReason)
	}
	if w.Resolver != "" {
		a, err := netip.ParseAddrPort(w.Resolver)
		if err != nil || a.Port() == 0 || a.Addr().Zone() != "" || a.Addr().Is4In6() || a.String() != w.Resolver {
			return d.ErrAt(f+".resolver", "%q: want ip:port (IPv6 in brackets), a port above 0, no zone, in its canonical spelling", w.Resolver)
		}
	}
	for i, s := range w.AllowAddrs {
		// Exact addresses only: a range or a name would exempt more than a test world needs.
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" || a.Is4In6() || a.String() != s {
			return d.ErrAt(fmt.Sprintf("%s.allow_addrs[%d]", f, i), "%q: want one IP address (no range, no zone, not IPv4-mapped) in its canonical spelling", s)
		}
	}
	for _, n := range sortedKeys(w.Fixtures) {
		if _, ok := components[n]; ok {
			return d.ErrAt(f+".fixtures."+n, "%q is a component of this manifest: a fixture is a container beside the stack, never one of it", n)
		}
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
