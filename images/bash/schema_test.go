package main

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"
)

// TestInputSchemaIsPinned: the tool's input schema is in every tool list Claude Code sends, which
// the default policy pins byte for byte (business.llm.tools, L3-llm.yaml). Changing it breaks
// Claude Code in the stack (e2e TestClaudeCodeStack: tools_not_pinned) until those pins are
// taken again (docs/claude-code.md); this test says so before the e2e suite does.
func TestInputSchemaIsPinned(t *testing.T) {
	const pinned = "8901d76a1add5654c1c471243fcc2ddae9b4a6c283fd37e6515b0d2eb93c1d11"
	sum := sha256.Sum256([]byte(inputSchema))
	if got := hex.EncodeToString(sum[:]); got != pinned {
		t.Errorf("bash's input schema hashes to %s, not %s: update business.llm.tools in policies/default/layers/L3-llm.yaml (docs/claude-code.md says how), then this constant", got, pinned)
	}
}
