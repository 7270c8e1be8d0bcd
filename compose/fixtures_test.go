package compose

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestWorldFixtures: the world's policy (policies/world) renders each of its fixtures with the
// marker the runtime shim admits it by, on exactly the networks the policy lists, and the default
// policy renders none: its compose file carries no test switch and no fixture.
func TestWorldFixtures(t *testing.T) {
	def, err := Build(loadFixture(t, "../policies/default"), Options{Runtime: "sharness", PolicyDir: "./policies/default"})
	if err != nil {
		t.Fatal(err)
	}
	p := loadCompose(t, def)
	for _, name := range []string{"world", "model"} {
		if _, ok := p.Services[name]; ok {
			t.Errorf("the default policy's compose file has a %s service", name)
		}
	}
	for _, s := range p.Services {
		for k := range s.Environment {
			if k == EnvFixture || k == "SHARNESS_AI_NET_RESOLVER" || k == "SHARNESS_AI_NET_UNSAFE_ALLOW_ADDR_FOR_TESTS" || k == "SHARNESS_AI_LLM_UNSAFE_CA_PEM_FOR_TESTS" {
				t.Errorf("the default policy's %s sets %s", s.Name, k)
			}
		}
	}
	m := loadFixture(t, "../policies/world")
	out, err := Render(m, Options{Runtime: "sharness"})
	if err != nil {
		t.Fatal(err)
	}
	w := fixtureServices(m, Options{Runtime: "sharness"})
	if len(w) != 2 {
		t.Fatalf("%d fixtures rendered, want world and model", len(w))
	}
	for _, name := range []string{"world", "model"} {
		s := w[name]
		got := map[string]string{}
		for k, v := range s.Environment {
			got[k] = *v
		}
		if diff := cmp.Diff(map[string]string{EnvFixture: name, "SHARNESS_AI_POLICY": m.Hash}, got); diff != "" {
			t.Errorf("%s's environment (-want +got):\n%s", name, diff)
		}
		if len(s.Networks) != 1 || !hasKey(s.Networks, EgressNetwork) || s.Runtime != "sharness" || s.Labels[LabelFixture] != name {
			t.Errorf("%s: networks %v runtime %q labels %v", name, s.Networks, s.Runtime, s.Labels)
		}
	}
	if len(out) == 0 {
		t.Fatal("empty compose file")
	}
}

// TestWorldCompiled: compose/world/ holds exactly what the world's policy compiles to, as
// `sharness-ai -f policies/world/manifest.yaml compile -o compose/world` writes it: the offline
// world (hack/up.sh, the e2e suite) runs these files, and `compile --check` checks only the
// default policy's.
func TestWorldCompiled(t *testing.T) {
	files, err := Build(loadFixture(t, "../policies/world"), Options{Runtime: "sharness", PolicyDir: "../../policies/world"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range files.Paths() {
		got, err := os.ReadFile(filepath.Join("world", filepath.FromSlash(p)))
		if err != nil || !bytes.Equal(got, files[p]) {
			t.Errorf("compose/world/%s differs from what policies/world compiles to (err %v): run go run ./cmd/sharness-ai -f policies/world/manifest.yaml compile -o compose/world", p, err)
		}
	}
	var extra []string
	filepath.WalkDir(filepath.Join("world", "compiled"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel("world", p)
			if _, ok := files[filepath.ToSlash(rel)]; !ok {
				extra = append(extra, rel)
			}
		}
		return nil
	})
	if len(extra) > 0 {
		t.Errorf("compose/world holds files the policy does not compile to: %v", extra)
	}
}
