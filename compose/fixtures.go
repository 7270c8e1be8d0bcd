package compose

import (
	"github.com/compose-spec/compose-go/v2/types"

	"github.com/sharness-ai/sharness/policies/pbp"
)

// LabelFixture marks a test world's fixture, as EnvFixture does inside it.
const LabelFixture = "ai.sharness.fixture"

// EnvFixture names the fixture a test world's container is (pbp.TestWorld.Fixtures); with
// SHARNESS_AI_POLICY it is the marker the runtime shim admits a fixture by, when the installed
// policy's fixtures.json lists it.
const EnvFixture = "SHARNESS_AI_FIXTURE"

// fixtureServices are the part of a test world's fixtures the policy decides: each one's marker
// and networks. The world's own overlay (compose/world.yml) adds what it runs; a production
// policy has none.
func fixtureServices(m *pbp.Manifest, opt Options) map[string]types.ServiceConfig {
	if m.TestWorld == nil {
		return nil
	}
	out := map[string]types.ServiceConfig{}
	for name, f := range m.TestWorld.Fixtures {
		nets := map[string]*types.ServiceNetworkConfig{}
		for _, n := range f.Networks {
			nets[n] = nil
		}
		s := types.ServiceConfig{Name: name, Restart: types.RestartPolicyNo}
		s.Runtime = opt.Runtime
		s.Labels = types.Labels{LabelFixture: name, LabelPolicy: m.Hash}
		s.Environment = types.MappingWithEquals{EnvFixture: ptr(name), "SHARNESS_AI_POLICY": ptr(m.Hash)}
		s.Networks = nets
		out[name] = s
	}
	return out
}
