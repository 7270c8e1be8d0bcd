package compile

import (
	"encoding/json"
	"fmt"
	"path"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/sharness-ai/sharness/policies/pbp"
)

// AnnotationTestEnv lists, comma-separated, the test switches a test world's policy lets the
// person at `up` set in this component's environment, with a value the compiled spec cannot carry
// (the world's CA, made afresh every run). The runtime shim lets each one through only where the
// compiled spec lists it (host/shim/env.go); a production policy lists none.
const AnnotationTestEnv = "ai.sharness.test-world.env"

// EnvLLMUnsafeCA is llm's extra CA for its upstream (PEM), granted by test_world.llm_ca.
const EnvLLMUnsafeCA = pbp.EnvLLMUnsafeCA

// FixturesPath is where a test world's fixtures are written, beside the components' folders:
// `sharness-ai install` puts it at <root>/<the hash's hex>/fixtures.json, where the runtime shim
// reads which containers of the world it admits.
var FixturesPath = path.Join(Dir, "fixtures.json")

// Fixtures is fixtures.json: {"fixtures":{"<service>":{"networks":["egress"]}}}.
type Fixtures struct {
	Fixtures map[string]pbp.Fixture `json:"fixtures"`
}

// withTestWorld marks the spec of a component that a test world's policy grants a test switch
// by environment: llm, when test_world.llm_ca is "environment".
func withTestWorld(m *pbp.Manifest, c *pbp.Component) SpecOpt {
	return func(s *specs.Spec) error {
		if c.Kind == pbp.KindLLM && m.TestWorld.LLMCAFromEnv() {
			if s.Annotations == nil {
				s.Annotations = map[string]string{}
			}
			s.Annotations[AnnotationTestEnv] = EnvLLMUnsafeCA
		}
		return nil
	}
}

// fixtures is fixtures.json for m, or nil when m has no fixtures (a production policy has none).
func fixtures(m *pbp.Manifest) ([]byte, error) {
	if m.TestWorld == nil || len(m.TestWorld.Fixtures) == 0 {
		return nil, nil
	}
	raw, err := json.MarshalIndent(Fixtures{Fixtures: m.TestWorld.Fixtures}, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", FixturesPath, err)
	}
	return append(raw, '\n'), nil
}
