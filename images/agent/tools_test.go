package main

import (
	"encoding/json"
	"os"
	"slices"
	"testing"

	"github.com/sharness-ai/sharness/images/llm/messages"
	"github.com/sharness-ai/sharness/policies/pbp"
)

// TestDemoToolsArePinned: the default policy pins the demo agent's tool list by the hash llm
// computes, so the demo's model call passes llm's check and a changed list would not.
func TestDemoToolsArePinned(t *testing.T) {
	raw, err := json.Marshal(demoTools())
	if err != nil {
		t.Fatal(err)
	}
	got, err := messages.ToolsHash(raw)
	if err != nil {
		t.Fatal(err)
	}
	m, err := pbp.Load(os.DirFS("../../policies/default"), "manifest.yaml")
	if err != nil {
		t.Fatal(err)
	}
	llm := m.Component("llm")
	if llm == nil || llm.Business.LLM == nil || llm.Business.LLM.Tools == nil {
		t.Fatalf("the default policy pins no tools for llm; the demo's list hashes to %s", got)
	}
	if pins := *llm.Business.LLM.Tools; !slices.Contains(pins, got) {
		t.Errorf("the demo's tool list hashes to %s; the default policy pins %v", got, pins)
	}
}
