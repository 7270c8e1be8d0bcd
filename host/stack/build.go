package stack

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/sharness-ai/sharness/compose"
	"github.com/sharness-ai/sharness/images/llm/messages"
	"github.com/sharness-ai/sharness/internal/artefact"
	"github.com/sharness-ai/sharness/internal/kms"
	"github.com/sharness-ai/sharness/internal/secretfilter"
	"github.com/sharness-ai/sharness/policies/compile"
	"github.com/sharness-ai/sharness/policies/pbp"
)

// Build compiles every artefact of the stack (the compose file, compiled/) as they belong in the
// folder out: the compose file names the manifest's folder relative to out. manifest is m's
// path; runtime is the runtime every service asks for ("sharness", or "" for the engine's
// default). compile writes what it returns; up checks the committed files against it.
func Build(m *pbp.Manifest, manifest, out, runtime string) (compile.Artefacts, error) {
	policyDir, err := relDir(out, filepath.Dir(manifest))
	if err != nil {
		return nil, err
	}
	return compose.Build(m, compose.Options{Runtime: runtime, PolicyDir: policyDir})
}

// CheckCompiled refuses, naming each file on w, if the compose file or compiled/ in the folder dir
// differ from what m (at the path manifest) compiles to: what compile -o dir --check does.
func CheckCompiled(m *pbp.Manifest, manifest, dir string, w io.Writer) error {
	files, err := Build(m, manifest, dir, "sharness")
	if err != nil {
		return err
	}
	drift, err := artefact.Check(dir, files, compile.Dir)
	if err != nil {
		return err
	}
	for _, d := range drift {
		fmt.Fprintf(w, "drift: %s: %s\n", filepath.Join(dir, d.Path), d.Reason)
	}
	if len(drift) > 0 {
		return refused{fmt.Errorf("%d compiled files drifted from the manifest: nothing started; run sharness-ai compile", len(drift))}
	}
	return nil
}

// relDir names dir as the compose file in out refers to it: relative, starting with "./".
func relDir(out, dir string) (string, error) {
	absOut, err := filepath.Abs(out)
	if err != nil {
		return "", err
	}
	absDir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	rel, err := filepath.Rel(absOut, absDir)
	if err != nil {
		return "", fmt.Errorf("the manifest's folder %s cannot be named relative to %s: %w", dir, out, err)
	}
	if !strings.HasPrefix(rel, "..") {
		rel = "./" + rel
	}
	return filepath.ToSlash(rel), nil
}

// CheckComponents refuses a policy that a component would refuse at start: the compiler's
// artefacts would run, and the component would stop, so the person learns it here instead.
// Each component reads its business block with the same function here as at start.
func CheckComponents(m *pbp.Manifest) error {
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
