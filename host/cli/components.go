package cli

import (
	"fmt"

	"github.com/sharness-ai/sharness/images/llm/messages"
	"github.com/sharness-ai/sharness/internal/kms"
	"github.com/sharness-ai/sharness/internal/secretfilter"
	"github.com/sharness-ai/sharness/policies/pbp"
)

// checkComponents refuses a policy that a component would refuse at start: the compiler's
// artefacts would run, and the component would stop, so the person learns it here instead.
// Each component reads its business block with the same function here as at start.
func checkComponents(m *pbp.Manifest) error {
	for _, c := range m.Components {
		var err error
		switch c.Kind {
		case pbp.KindLLM:
			if _, err = messages.Compile(c.Business.LLM); err == nil && c.Business.LLM != nil {
				_, err = secretfilter.New(c.Business.LLM.FilterRules)
			}
		case pbp.KindKMS:
			_, err = kms.NewRules(m, c.Name, "")
		}
		if err != nil {
			return fmt.Errorf("component %s (kind %s) would refuse to start: %w", c.Name, c.Kind, err)
		}
	}
	return nil
}
