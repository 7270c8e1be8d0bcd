package compose

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/sharness-ai/sharness/policies/pbp"
)

// synthetic builds an in-memory manifest with one net and n-1 apps, each app with its own L3
// layer and an edge to net, so growth in components, layers and networks is all exercised.
func synthetic(tb testing.TB, n int) fstest.MapFS {
	tb.Helper()
	fsys := fstest.MapFS{}
	base, err := os.ReadFile("../policies/default/layers/L0-os.yaml")
	if err != nil {
		tb.Fatal(err)
	}
	fsys["layers/L0-os.yaml"] = &fstest.MapFile{Data: base}
	layer := func(name, body string) {
		fsys["layers/L3-"+name+".yaml"] = &fstest.MapFile{Data: []byte("pbp: 1\nkind: layer\nlevel: L3\nname: " + name + "\npolicy:\n" + body)}
	}
	layer("net", "  subject: {image: sharness/net:dev}\n  identity: {uid: 65531, gid: 65531}\n  process: {max_pids: 64, max_memory: 64Mi}\n  network: {egress: true}\n")
	var b strings.Builder
	b.WriteString("pbp: 1\nkind: manifest\nname: synthetic\ntrust_domain: bench.test\nlayers:\n")
	ref := func(id string) {
		h, err := pbp.LayerHash(fsys, "layers/"+id+".yaml")
		if err != nil {
			tb.Fatal(err)
		}
		fmt.Fprintf(&b, "  - {id: %s, file: layers/%s.yaml, sha256: %q}\n", id, id, h)
	}
	ref("L0-os")
	ref("L3-net")
	for i := 1; i < n; i++ {
		name := fmt.Sprintf("app%d", i)
		layer(name, fmt.Sprintf("  subject: {image: example/app%d:1}\n  identity: {uid: %d, gid: %d}\n  process: {max_pids: 32, max_memory: 128Mi}\n  files:\n    tmpfs: [{path: /tmp, size: 16Mi}]\n", i, 70000+i, 70000+i))
		ref("L3-" + name)
	}
	b.WriteString("components:\n  net: {kind: net, layers: [L0-os, L3-net]}\n")
	for i := 1; i < n; i++ {
		fmt.Fprintf(&b, "  app%d: {kind: app, layers: [L0-os, L3-app%d]}\n", i, i)
	}
	b.WriteString("edges:\n")
	for i := 1; i < n; i++ {
		fmt.Fprintf(&b, "  - {from: app%d, to: net}\n", i)
	}
	fsys["manifest.yaml"] = &fstest.MapFile{Data: []byte(b.String())}
	return fsys
}

// BenchmarkCompile measures the whole compile (strict load, layer composition, specs, seccomp
// profiles, compose file) for the default stack and a synthetic 50-component manifest, and reports
// the cost per component so growth is visible: ns/component should stay roughly flat.
func BenchmarkCompile(b *testing.B) {
	cases := []struct {
		name string
		fsys func(testing.TB) fstest.MapFS
		n    int
	}{
		{"default", func(tb testing.TB) fstest.MapFS {
			fsys := fstest.MapFS{}
			for _, f := range []string{"manifest.yaml", "layers/L0-os.yaml", "layers/L1-static-go.yaml", "layers/L3-agent.yaml"} {
				data, err := os.ReadFile("../policies/default/" + f)
				if err != nil {
					tb.Fatal(err)
				}
				fsys[f] = &fstest.MapFile{Data: data}
			}
			return fsys
		}, 1},
		{"synthetic-50", func(tb testing.TB) fstest.MapFS { return synthetic(tb, 50) }, 50},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			fsys := tc.fsys(b)
			b.ReportAllocs()
			for b.Loop() {
				m, err := pbp.Load(fsys, "manifest.yaml")
				if err != nil {
					b.Fatal(err)
				}
				if _, err := Build(m, Options{}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(tc.n), "ns/component")
		})
	}
}
