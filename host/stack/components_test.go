package stack

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sharness-ai/sharness/policies/pbp"
)

// repoRoot is the repository, two folders up from this package.
var repoRoot, _ = filepath.Abs("../..")

// TestCheckComponents: a policy that llm or kms would refuse at start is refused when it is
// loaded, naming the component and the field.
func TestCheckComponents(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(m *pbp.Manifest)
		want string // "" for no error
	}{
		{"as committed", func(*pbp.Manifest) {}, ""},
		{"llm without key_secret", func(m *pbp.Manifest) { m.Component("llm").Business.LLM.KeySecret = "" },
			"component llm (kind llm) would refuse to start: business.llm.key_secret is not set"},
		{"filter rule named like a curated one", func(m *pbp.Manifest) {
			m.Component("llm").Business.LLM.FilterRules = []pbp.FilterRule{{Name: "harness-secret", Regex: "x+"}}
		}, "component llm (kind llm) would refuse to start"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := pbp.Load(os.DirFS(filepath.Join(repoRoot, "policies", "default")), "manifest.yaml")
			if err != nil {
				t.Fatal(err)
			}
			tc.edit(m)
			err = CheckComponents(m)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("CheckComponents: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("CheckComponents: %v, want %q", err, tc.want)
			}
		})
	}
}
