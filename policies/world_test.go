package policies_test

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/sharness-ai/sharness/policies/compile"
	"github.com/sharness-ai/sharness/policies/pbp"
)

// TestWorldPolicy holds the offline world's policy (policies/world) to the default one: the same
// layer files byte for byte, the same components and edges, and specs that compile the same but
// for the test world's mark (the hash, compile.AnnotationTestEnv on llm) and fixtures.json. A
// change to the default policy that is not made to the world's, or a difference slipped into the
// world's, fails here: what the e2e suite proves of the world's stack holds of the default's.
func TestWorldPolicy(t *testing.T) {
	def, err := pbp.Load(os.DirFS("default"), "manifest.yaml")
	if err != nil {
		t.Fatal(err)
	}
	world, err := pbp.Load(os.DirFS("world"), "manifest.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if def.TestWorld != nil {
		t.Fatalf("the default policy has a test_world: %+v", def.TestWorld)
	}
	if world.TestWorld == nil || len(world.TestWorld.Fixtures) == 0 || !world.TestWorld.LLMCAFromEnv() {
		t.Fatalf("the world's policy marks no test world with fixtures and llm's CA: %+v", world.TestWorld)
	}
	defLayers, _ := os.ReadDir("default/layers")
	worldLayers, _ := os.ReadDir("world/layers")
	if len(defLayers) == 0 || len(defLayers) != len(worldLayers) {
		t.Fatalf("layer files: default %d, world %d", len(defLayers), len(worldLayers))
	}
	for _, e := range defLayers {
		a, _ := os.ReadFile("default/layers/" + e.Name())
		b, err := os.ReadFile("world/layers/" + e.Name())
		if err != nil || !bytes.Equal(a, b) {
			t.Errorf("world/layers/%s differs from default/layers/%s (copy it: cp policies/default/layers/* policies/world/layers/)", e.Name(), e.Name())
		}
	}
	if !reflect.DeepEqual(def.Layers, world.Layers) || !reflect.DeepEqual(def.Edges, world.Edges) || def.TrustDomain != world.TrustDomain {
		t.Error("the world's manifest lists other layers, edges or trust domain than the default's")
	}
	da, err := compile.Compile(def)
	if err != nil {
		t.Fatal(err)
	}
	wa, err := compile.Compile(world)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := wa[compile.FixturesPath]; !ok {
		t.Errorf("the world compiles no %s", compile.FixturesPath)
	}
	if _, ok := da[compile.FixturesPath]; ok {
		t.Errorf("the default policy compiles a %s", compile.FixturesPath)
	}
	delete(wa, compile.FixturesPath)
	if !reflect.DeepEqual(da.Paths(), wa.Paths()) {
		t.Fatalf("artefacts: default %v, world %v", da.Paths(), wa.Paths())
	}
	marked := 0
	for _, p := range da.Paths() {
		w := wa[p]
		if strings.HasSuffix(p, "/config.json") {
			var s specs.Spec
			if err := json.Unmarshal(w, &s); err != nil {
				t.Fatal(err)
			}
			if _, ok := s.Annotations[compile.AnnotationTestEnv]; ok {
				marked++
				delete(s.Annotations, compile.AnnotationTestEnv)
			}
			raw, err := json.MarshalIndent(&s, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			w = []byte(strings.ReplaceAll(string(raw)+"\n", world.Hash, def.Hash))
		}
		if !bytes.Equal(da[p], w) {
			t.Errorf("%s: the world's differs from the default's beyond the test world's mark", p)
		}
	}
	if marked != 1 {
		t.Errorf("%d specs carry %s, want 1 (llm's)", marked, compile.AnnotationTestEnv)
	}
}
