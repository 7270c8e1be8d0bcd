package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNotInShippedBinaries (testkit/benchprofile, which starts profiling when linked, so it is
// tested from here): no binary the images or the host install imports benchprofile in
// its default build; only a diagnostic build with its tag does (images/net, -tags netprofile).
func TestNotInShippedBinaries(t *testing.T) {
	const self = "github.com/sharness-ai/sharness/testkit/benchprofile"
	for _, tc := range []struct {
		tags string
		want bool
	}{{"", false}, {"netprofile", true}} {
		out, err := exec.Command("go", "list", "-tags", tc.tags, "-deps", "github.com/sharness-ai/sharness/images/...", "github.com/sharness-ai/sharness/cmd/...").Output()
		if err != nil {
			t.Fatalf("go list -deps: %v", err)
		}
		if got := strings.Contains("\n"+string(out), "\n"+self+"\n"); got != tc.want {
			t.Errorf("with tags %q, the images and commands import %s: %v, want %v", tc.tags, self, got, tc.want)
		}
	}
}
