package pbp_test

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"

	"github.com/sharness-ai/sharness/policies/keys"
	"github.com/sharness-ai/sharness/policies/pbp"
)

const fullFixture = "../testdata/full"

func readTree(tb testing.TB, dir string) fstest.MapFS {
	tb.Helper()
	out := fstest.MapFS{}
	err := fs.WalkDir(os.DirFS(dir), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(os.DirFS(dir), p)
		out[p] = &fstest.MapFile{Data: data}
		return err
	})
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// fixtureFiles returns every file under the valid and invalid fixtures whose path matches keep.
func fixtureFiles(tb testing.TB, keep func(path string) bool) [][]byte {
	tb.Helper()
	var out [][]byte
	for _, root := range []string{fullFixture, "../default", invalidDir} {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !keep(filepath.ToSlash(p)) {
				return err
			}
			data, err := os.ReadFile(p)
			out = append(out, data)
			return err
		})
		if err != nil {
			tb.Fatal(err)
		}
	}
	return out
}

// FuzzDecodeManifest feeds arbitrary manifest bytes to the loader, with the full fixture's layers
// in the FS. It must never panic; a manifest it accepts must have a well-formed hash that the
// same bytes reproduce, and every component must keep the guarantees the compiler relies on.
func FuzzDecodeManifest(f *testing.F) {
	fsys := readTree(f, fullFixture)
	for _, seed := range fixtureFiles(f, func(p string) bool { return strings.HasSuffix(p, "/manifest.yaml") }) {
		f.Add(seed)
	}
	f.Add([]byte("pbp: 1\nkind: manifest\n"))
	f.Add([]byte("{pbp: 1, kind: manifest, name: x, trust_domain: t, layers: [], components: {}}"))
	if full, err := fs.ReadFile(fsys, "manifest.yaml"); err == nil {
		f.Add(append(full, "test_world:\n  reason: r\n  resolver: 10.0.0.1:53\n  allow_addrs: [10.0.0.1, fd00::1]\n  llm_ca: environment\n  fixtures: {world: {networks: [egress]}}\n"...))
		f.Add(append(full, "test_world: {reason: r, allow_addrs: ['::ffff:10.0.0.1'], resolver: '[fe80::1%eth0]:53'}\n"...))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := pbp.LoadBytes(fsys, "manifest.yaml", data)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error message")
			}
			return
		}
		if err := keys.CheckHash(m.Hash); err != nil {
			t.Fatalf("accepted manifest has a malformed hash: %v", err)
		}
		again, err := pbp.LoadBytes(fsys, "manifest.yaml", data)
		if err != nil {
			t.Fatalf("second load of the same bytes failed: %v", err)
		}
		if again.Hash != m.Hash {
			t.Fatalf("same bytes, two hashes: %s, %s", m.Hash, again.Hash)
		}
		checkGuarantees(t, m)
	})
}

// checkGuarantees asserts what every accepted component promises the compiler, and what an
// accepted test_world promises net and llm: exact addresses, a resolver with a port, fixtures on
// the egress network alone and named apart from the components.
func checkGuarantees(t *testing.T, m *pbp.Manifest) {
	t.Helper()
	if w := m.TestWorld; w != nil {
		if w.Reason == "" {
			t.Fatal("test_world without a reason")
		}
		if a, ok := w.ResolverAddr(); w.Resolver != "" && (!ok || a.Port() == 0 || a.String() != w.Resolver) {
			t.Fatalf("test_world.resolver %q accepted as %v %v", w.Resolver, a, ok)
		}
		if addrs := w.Addrs(); len(addrs) != len(w.AllowAddrs) {
			t.Fatalf("test_world.allow_addrs %q: %d parse", w.AllowAddrs, len(addrs))
		}
		for name, fx := range w.Fixtures {
			if m.Component(name) != nil || len(fx.Networks) == 0 {
				t.Fatalf("fixture %s: %+v", name, fx)
			}
			for _, n := range fx.Networks {
				if n != pbp.EgressNetwork {
					t.Fatalf("fixture %s on network %s", name, n)
				}
			}
		}
	}
	for _, c := range m.Components {
		switch {
		case !c.NoNewPrivs:
			t.Fatalf("%s: NoNewPrivs false", c.Name)
		case c.Image == "":
			t.Fatalf("%s: no image", c.Name)
		case c.UID < 1 || c.GID < 1:
			t.Fatalf("%s: uid/gid %d/%d", c.Name, c.UID, c.GID)
		case c.MaxPIDs < 1:
			t.Fatalf("%s: MaxPIDs %d", c.Name, c.MaxPIDs)
		case c.MaxMemory < 1:
			t.Fatalf("%s: MaxMemory %d (no limit)", c.Name, c.MaxMemory)
		case c.MaxRuntime < 0:
			t.Fatalf("%s: MaxRuntime %d", c.Name, c.MaxRuntime)
		case c.Egress && c.Kind != pbp.KindNet:
			t.Fatalf("%s: kind %s on egress", c.Name, c.Kind)
		case c.SPIFFEID != "spiffe://"+m.TrustDomain+"/"+c.Name:
			t.Fatalf("%s: SPIFFE ID %s", c.Name, c.SPIFFEID)
		}
		for _, tm := range c.Tmpfs {
			if tm.Size < 1 {
				t.Fatalf("%s: tmpfs %s size %d", c.Name, tm.Path, tm.Size)
			}
		}
		for _, cp := range c.Capabilities {
			if !(c.Kind == pbp.KindNet && cp == "CAP_NET_BIND_SERVICE") && !(c.Kind == pbp.KindKMS && cp == "CAP_IPC_LOCK") {
				t.Fatalf("%s: capability %s for kind %s", c.Name, cp, c.Kind)
			}
		}
	}
}

// FuzzCompose replaces the agent's L5 layer with arbitrary bytes (the manifest re-locked to
// them). It must never panic, and an accepted L5 may only narrow: every limit of the effective
// agent stays within the agent composed without L5, and no other component changes.
func FuzzCompose(f *testing.F) {
	base := readTree(f, fullFixture)
	const l5 = "layers/L5-session.yaml"
	manifest := base["manifest.yaml"].Data

	full, err := pbp.Load(base, "manifest.yaml")
	if err != nil {
		f.Fatal(err)
	}
	without := bytes.Replace(manifest, []byte("L3-agent, L5-session]"), []byte("L3-agent]"), 1)
	if bytes.Equal(without, manifest) {
		f.Fatal("cannot find the agent's layer chain in the full fixture")
	}
	ref, err := pbp.LoadBytes(base, "manifest.yaml", without)
	if err != nil {
		f.Fatal(err)
	}
	parent := ref.Component("agent")
	l5Hash, err := pbp.LayerHash(base, l5)
	if err != nil || !bytes.Contains(manifest, []byte("sha256: "+l5Hash+"\n")) {
		f.Fatalf("the full fixture does not record L5's hash %s: %v", l5Hash, err)
	}

	for _, seed := range fixtureFiles(f, func(p string) bool { return strings.Contains(p, "/layers/") }) {
		f.Add(seed)
		// The same layer as an L5, so the fuzzer starts past the level check.
		f.Add(bytes.Replace(seed, []byte("level: L"), []byte("level: L5\n#"), 1))
	}

	f.Fuzz(func(t *testing.T, data []byte) {
		fsys := fstest.MapFS{}
		for k, v := range base {
			fsys[k] = v
		}
		fsys[l5] = &fstest.MapFile{Data: data}
		h, err := pbp.LayerHash(fsys, l5)
		if err != nil {
			// The layer does not decode: loading must refuse it (and not panic).
			if _, err := pbp.Load(fsys, "manifest.yaml"); err == nil {
				t.Fatal("LayerHash could not hash the layer but Load accepted it")
			}
			return
		}
		// What Lock does, for this one layer (Lock itself re-hashes all twelve).
		locked := bytes.Replace(manifest, []byte(l5Hash), []byte(h), 1)
		m, err := pbp.LoadBytes(fsys, "manifest.yaml", locked)
		if err != nil {
			return
		}
		checkGuarantees(t, m)
		for _, c := range m.Components {
			if c.Name == "agent" {
				continue
			}
			if d := cmp.Diff(full.Component(c.Name), c); d != "" {
				t.Fatalf("agent's L5 changed component %s:\n%s", c.Name, d)
			}
		}
		narrower(t, parent, m.Component("agent"))
	})
}

// narrower fails unless child is within parent on every limit.
func narrower(t *testing.T, parent, child *pbp.Component) {
	t.Helper()
	subset := func(what string, small, big []string) {
		for _, v := range small {
			if !slices.Contains(big, v) {
				t.Fatalf("%s widened: %v is not within %v", what, small, big)
			}
		}
	}
	switch {
	case child.Image != parent.Image || child.CodeSHA256 != parent.CodeSHA256 || !slices.Equal(child.Entrypoint, parent.Entrypoint):
		t.Fatalf("what runs changed: %s %v %s → %s %v %s", parent.Image, parent.Entrypoint, parent.CodeSHA256, child.Image, child.Entrypoint, child.CodeSHA256)
	case child.UID != parent.UID || child.GID != parent.GID:
		t.Fatalf("identity changed: %d:%d → %d:%d", parent.UID, parent.GID, child.UID, child.GID)
	case child.MaxPIDs > parent.MaxPIDs:
		t.Fatalf("max_pids widened: %d → %d", parent.MaxPIDs, child.MaxPIDs)
	case child.MaxMemory > parent.MaxMemory:
		t.Fatalf("max_memory widened: %d → %d", parent.MaxMemory, child.MaxMemory)
	case parent.MaxRuntime != 0 && (child.MaxRuntime == 0 || child.MaxRuntime > parent.MaxRuntime):
		t.Fatalf("max_runtime widened: %d → %d (0 = no limit)", parent.MaxRuntime, child.MaxRuntime)
	case child.Egress && !parent.Egress:
		t.Fatal("egress turned on")
	case !cmp.Equal(child.Business, parent.Business):
		t.Fatalf("business rules changed: %v", cmp.Diff(parent.Business, child.Business))
	case !slices.Equal(child.ConnectTo, parent.ConnectTo) || !slices.Equal(child.AcceptFrom, parent.AcceptFrom):
		t.Fatal("edges changed")
	}
	subset("capabilities", child.Capabilities, parent.Capabilities)
	subset("syscall allow list", child.SyscallAllow, parent.SyscallAllow)
	subset("syscall deny list (shrank)", parent.SyscallDeny, child.SyscallDeny)
	subset("protected paths (shrank)", parent.Protected, child.Protected)
	for _, tm := range child.Tmpfs {
		k := slices.IndexFunc(parent.Tmpfs, func(p pbp.TmpfsMount) bool { return p.Path == tm.Path })
		if k < 0 || tm.Size > parent.Tmpfs[k].Size {
			t.Fatalf("tmpfs widened: %v → %v", parent.Tmpfs, child.Tmpfs)
		}
	}
	for _, v := range child.Volumes {
		k := slices.IndexFunc(parent.Volumes, func(p pbp.VolumeMount) bool { return p.Name == v.Name && p.Target == v.Target })
		if k < 0 || parent.Volumes[k].ReadOnly && !v.ReadOnly {
			t.Fatalf("volumes widened: %v → %v", parent.Volumes, child.Volumes)
		}
	}
}

// FuzzLock: Lock must never panic, and what it writes must be a manifest whose recorded hashes
// are the layers' (so locking again changes nothing).
func FuzzLock(f *testing.F) {
	fsys := readTree(f, fullFixture)
	for _, seed := range fixtureFiles(f, func(p string) bool { return strings.HasSuffix(p, "/manifest.yaml") }) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		locked, err := pbp.Lock(fsys, "manifest.yaml", data)
		if err != nil {
			return
		}
		again, err := pbp.Lock(fsys, "manifest.yaml", locked)
		if err != nil {
			t.Fatalf("Lock of its own output failed: %v", err)
		}
		if !bytes.Equal(again, locked) {
			t.Fatalf("Lock is not idempotent:\n%q\n%q", locked, again)
		}
	})
}
