package compile

import (
	"encoding/json"
	"os"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/sharness-ai/sharness/policies/pbp"
)

// TestTestWorldArtefacts: a test world's policy compiles to fixtures.json, shaped as the runtime
// shim reads it, and marks llm's spec with the one test switch it grants by environment; a
// production policy compiles neither, nor does a test world that grants llm no CA.
func TestTestWorldArtefacts(t *testing.T) {
	prod, err := Compile(loadFull(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := prod[FixturesPath]; ok {
		t.Errorf("a production policy compiles %s", FixturesPath)
	}
	for p, data := range prod {
		var s specs.Spec
		if json.Unmarshal(data, &s) == nil && s.Annotations[AnnotationTestEnv] != "" {
			t.Errorf("%s: a production policy's spec grants %s", p, s.Annotations[AnnotationTestEnv])
		}
	}
	world, err := pbp.Load(os.DirFS("../world"), "manifest.yaml")
	if err != nil {
		t.Fatal(err)
	}
	files, err := Compile(world)
	if err != nil {
		t.Fatal(err)
	}
	want := "{\n  \"fixtures\": {\n    \"model\": {\n      \"networks\": [\n        \"egress\"\n      ]\n    },\n    \"world\": {\n      \"networks\": [\n        \"egress\"\n      ]\n    }\n  }\n}\n"
	if got := string(files[FixturesPath]); got != want {
		t.Errorf("%s:\n%s\nwant:\n%s", FixturesPath, got, want)
	}
	for _, c := range world.Components {
		var s specs.Spec
		if err := json.Unmarshal(files[SpecPath(c.Name)], &s); err != nil {
			t.Fatal(err)
		}
		want := ""
		if c.Kind == pbp.KindLLM {
			want = EnvLLMUnsafeCA
		}
		if got := s.Annotations[AnnotationTestEnv]; got != want {
			t.Errorf("%s: %s = %q, want %q", c.Name, AnnotationTestEnv, got, want)
		}
	}
	noCA := *world
	tw := *world.TestWorld
	tw.LLMCA = ""
	noCA.TestWorld = &tw
	files, err = Compile(&noCA)
	if err != nil {
		t.Fatal(err)
	}
	var s specs.Spec
	if err := json.Unmarshal(files[SpecPath("llm")], &s); err != nil {
		t.Fatal(err)
	}
	if got, ok := s.Annotations[AnnotationTestEnv]; ok {
		t.Errorf("a test world without llm_ca grants llm %q", got)
	}
}
