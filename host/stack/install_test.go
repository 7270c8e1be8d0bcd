package stack

import (
	"strings"
	"testing"
)

func TestInstallRefusesABadHash(t *testing.T) {
	for _, h := range []string{"", "sha256:..", "b7d380212da950a5b34e99dd3596dca9274f3b09cc3dfc98c5c8fa06557126f9"} {
		if _, _, err := installPolicy(t.TempDir(), h, map[string][]byte{"a/config.json": nil}, false); err == nil {
			t.Errorf("installPolicy(%q) installed", h)
		}
	}
	if _, _, err := installPolicy(t.TempDir(), "sha256:"+strings.Repeat("0", 64), map[string][]byte{"../x": nil}, false); err == nil {
		t.Error("an artefact outside the policy folder was written")
	}
}
