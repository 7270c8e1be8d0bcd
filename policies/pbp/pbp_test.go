package pbp

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/sharness-ai/sharness/internal/strictyaml"
	"github.com/sharness-ai/sharness/policies/keys"
)

const (
	fullDir    = "../testdata/full"
	defaultDir = "../default"
)

// mapFS copies a fixture folder into memory so a test can edit it freely.
func mapFS(t testing.TB, dir string) fstest.MapFS {
	t.Helper()
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
		t.Fatal(err)
	}
	return out
}

func clone(m fstest.MapFS) fstest.MapFS {
	out := fstest.MapFS{}
	for k, v := range m {
		out[k] = &fstest.MapFile{Data: bytes.Clone(v.Data)}
	}
	return out
}

func mustLoad(t testing.TB, fsys fs.FS) *Manifest {
	t.Helper()
	m, err := Load(fsys, "manifest.yaml")
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return m
}

func ptr[T any](v T) *T { return &v }

const (
	ki = 1 << 10
	mi = 1 << 20
	gi = 1 << 30
)

// TestLoadFixtures checks the effective policy of every component of the two valid fixtures.
func TestLoadFixtures(t *testing.T) {
	full := mustLoad(t, os.DirFS(fullDir))
	def := mustLoad(t, os.DirFS(defaultDir))

	for _, m := range []*Manifest{full, def} {
		if err := keys.CheckHash(m.Hash); err != nil {
			t.Errorf("%s: %v", m.Name, err)
		}
		for _, c := range m.Components {
			if !c.NoNewPrivs {
				t.Errorf("%s/%s: NoNewPrivs is false", m.Name, c.Name)
			}
			if want := "spiffe://" + m.TrustDomain + "/" + c.Name; c.SPIFFEID != want {
				t.Errorf("%s/%s: SPIFFEID = %q, want %q", m.Name, c.Name, c.SPIFFEID, want)
			}
		}
	}
	if got, want := names(full), []string{"agent", "bash", "fs", "kms", "launcher", "llm", "net"}; !cmp.Equal(got, want) {
		t.Errorf("full components = %v, want %v", got, want)
	}
	wantEdges := []Edge{{"agent", "bash"}, {"agent", "fs"}, {"agent", "llm"}, {"agent", "net"}, {"bash", "net"}, {"llm", "kms"}, {"llm", "net"}}
	if d := cmp.Diff(wantEdges, full.Edges); d != "" {
		t.Errorf("full edges (-want +got):\n%s", d)
	}

	opts := cmp.Options{cmpopts.EquateEmpty()}
	wholeComponents := []struct {
		m    *Manifest
		want *Component
	}{
		{def, &Component{
			Name: "agent", Kind: KindApp, SPIFFEID: "spiffe://sharness.local/agent",
			Image: "sharness/agent:dev", Entrypoint: []string{"/sharness-agent"}, UID: 65532, GID: 65532,
			Capabilities: []string{}, NoNewPrivs: true, MaxPIDs: 256, MaxMemory: 1024 * mi,
			Exec: []string{"/bin/busybox", "/lib64/ld-linux-x86-64.so.2", "/sharness-agent", "/sharness-fsprobe",
				"/sharness-modelprobe", "/sharness-probe", "/sharness-shellprobe", "/usr/bin/curl", "/usr/bin/git",
				"/usr/lib/git-core/git-remote-http", "/usr/local/bin/claude", "/usr/local/bin/sharness-claude"},
			Landlock: LandlockEnforce,
			Tmpfs:    []TmpfsMount{{"/home/claude", 128 * mi}, {"/tmp", 64 * mi}},
			Protected: []string{".bashrc", ".claude/", ".envrc", ".git/config", ".git/hooks/", ".idea/",
				".profile", ".vscode/", ".zshrc"},
			Workspace: "rw",
			Business:  Business{}, Audit: []string{"deny"},
			ConnectTo: []string{"bash", "fs", "llm", "net"},
		}},
		{full, &Component{
			Name: "agent", Kind: KindApp, SPIFFEID: "spiffe://sharness.test/agent",
			Image: "sharness/agent:dev", Entrypoint: []string{"/sharness-agent"}, UID: 65532, GID: 65532, Exec: []string{"/sharness-agent"}, Landlock: LandlockEnforce,
			Capabilities: []string{}, NoNewPrivs: true, MaxPIDs: 64,
			MaxMemory: 128 * mi,                        // L5 narrowed 256Mi
			Tmpfs:     []TmpfsMount{{"/tmp", 32 * mi}}, // L5 narrowed 64Mi
			Volumes:   []VolumeMount{{Name: "workspace", Target: "/workspace"}},
			Protected: []string{".claude", ".git/config", ".git/hooks"},
			Audit:     []string{"deny"},
			ConnectTo: []string{"bash", "fs", "llm", "net"},
		}},
		{full, &Component{
			Name: "bash", Kind: KindBash, SPIFFEID: "spiffe://sharness.test/bash",
			Image: "sharness/bash:dev", Entrypoint: []string{"/sharness-bash"}, UID: 65535, GID: 65535, Exec: []string{"/sharness-bash"}, Landlock: LandlockEnforce,
			Capabilities: []string{}, NoNewPrivs: true, MaxPIDs: 256, MaxMemory: 512 * mi,
			Tmpfs:        []TmpfsMount{{"/tmp", 256 * mi}},
			Volumes:      []VolumeMount{{Name: "workspace", Target: "/workspace"}},
			SyscallAllow: []string{"clone_namespaces", "mount", "pivot_root", "setns", "umount2", "unshare"},
			Business:     Business{Bash: &BashRules{Profiles: &[]string{"analyse", "build"}}},
			Audit:        []string{"deny"},
			ConnectTo:    []string{"net"}, AcceptFrom: []string{"agent"},
		}},
		{full, &Component{
			Name: "net", Kind: KindNet, SPIFFEID: "spiffe://sharness.test/net",
			Image: "sharness/net:dev", Entrypoint: []string{"/sharness-net"}, UID: 65531, GID: 65531, Exec: []string{"/sharness-net"}, Landlock: LandlockEnforce,
			Capabilities: []string{}, // L3 gave CAP_NET_BIND_SERVICE, L4 took it away
			NoNewPrivs:   true, MaxPIDs: 128, MaxMemory: 256 * mi, Egress: true,
			Business: Business{Net: &NetRules{
				Callers: &[]CallerRule{
					{Caller: "agent", Hosts: []string{"proxy.golang.org"}, Ports: []int{443}},
					{Caller: "llm", Hosts: []string{"api.anthropic.com"}, Ports: []int{443}},
					{Caller: "bash", Hosts: []string{"deb.debian.org"}, Ports: []int{443}},
				},
				DenyHosts: []string{"169.254.169.254.nip.io", "metadata.google.internal"},
			}},
			Audit:      []string{"deny"},
			AcceptFrom: []string{"agent", "bash", "llm"},
		}},
		{full, &Component{
			Name: "llm", Kind: KindLLM, SPIFFEID: "spiffe://sharness.test/llm",
			Image: "sharness/llm:dev", Entrypoint: []string{"/sharness-llm"}, UID: 65533, GID: 65533, Exec: []string{"/sharness-llm"}, Landlock: LandlockEnforce,
			Capabilities: []string{}, NoNewPrivs: true, MaxPIDs: 128, MaxMemory: 256 * mi,
			Business: Business{LLM: &LLMRules{
				Upstream: "https://api.anthropic.com", Models: &[]string{"claude-haiku-4-5", "claude-sonnet-4-5"},
				MaxTokens: ptr(32000), Budget: ptr(2000000), OnSecret: "refuse", KeySecret: "anthropic-api-key",
			}},
			Audit:     []string{"deny"},
			ConnectTo: []string{"kms", "net"}, AcceptFrom: []string{"agent"},
		}},
		{full, &Component{
			Name: "kms", Kind: KindKMS, SPIFFEID: "spiffe://sharness.test/kms",
			Image: "sharness/kms:dev", Entrypoint: []string{"/sharness-kms"}, UID: 65534, GID: 65534, Exec: []string{"/sharness-kms"}, Landlock: LandlockEnforce,
			Capabilities: []string{}, NoNewPrivs: true, MaxPIDs: 32, MaxMemory: 64 * mi,
			Volumes:    []VolumeMount{{Name: "sealed-secrets", Target: "/run/sharness/sealed", ReadOnly: true}},
			Business:   Business{KMS: &KMSRules{Ops: &[]string{"destroy", "public", "unwrap"}, MaxUnwraps: ptr(200)}},
			Audit:      []string{"deny"},
			AcceptFrom: []string{"llm"},
		}},
		{full, &Component{
			Name: "fs", Kind: KindFS, SPIFFEID: "spiffe://sharness.test/fs",
			Image: "sharness/fs:dev", Entrypoint: []string{"/sharness-fs"}, UID: 65536, GID: 65536, Exec: []string{"/sharness-fs"}, Landlock: LandlockEnforce,
			Capabilities: []string{}, NoNewPrivs: true, MaxPIDs: 64, MaxMemory: 128 * mi,
			Volumes:    []VolumeMount{{Name: "workspace", Target: "/workspace"}},
			Protected:  []string{".bashrc", ".claude", ".envrc", ".git/config", ".git/hooks", ".idea", ".vscode"},
			Business:   Business{FS: &FSRules{MaxFileSize: "1Mi", ExecBits: ptr(false)}},
			Audit:      []string{"deny"},
			AcceptFrom: []string{"agent"},
		}},
		{full, &Component{
			Name: "launcher", Kind: KindLauncher, SPIFFEID: "spiffe://sharness.test/launcher",
			Image: "sharness/launcher:dev", Entrypoint: []string{"/sharness-launcher"}, UID: 65530, GID: 65530, Exec: []string{"/sharness-launcher"}, Landlock: LandlockEnforce,
			Capabilities: []string{}, NoNewPrivs: true, MaxPIDs: 32, MaxMemory: 64 * mi,
			Audit: []string{"ca_destroyed", "deny", "svid_issued"},
		}},
	}
	for _, tc := range wholeComponents {
		t.Run(tc.m.Name+"/"+tc.want.Name, func(t *testing.T) {
			got := tc.m.Component(tc.want.Name)
			if got == nil {
				t.Fatalf("no component %s", tc.want.Name)
			}
			if d := cmp.Diff(tc.want, got, opts); d != "" {
				t.Errorf("effective policy (-want +got):\n%s", d)
			}
		})
	}

	// The narrowings the fixture exists to show, spelled out one by one.
	checks := []struct {
		name      string
		got, want any
	}{
		{"net capabilities narrowed to [] by L4 (not nil)", full.Component("net").Capabilities != nil && len(full.Component("net").Capabilities) == 0, true},
		{"agent memory 128Mi from L5", full.Component("agent").MaxMemory, int64(128 * mi)},
		{"agent tmpfs 32Mi from L5", full.Component("agent").Tmpfs, []TmpfsMount{{"/tmp", 32 * mi}}},
		{"agent pids from L3", full.Component("agent").MaxPIDs, int64(64)},
		{"launcher pids from L3", full.Component("launcher").MaxPIDs, int64(32)},
		{"default agent syscall allow is empty", len(def.Component("agent").SyscallAllow), 0},
		{"default agent's edges are to bash, fs, llm and net", def.Component("agent").ConnectTo, []string{"bash", "fs", "llm", "net"}},
		{"default net accepts the agent, bash and llm", def.Component("net").AcceptFrom, []string{"agent", "bash", "llm"}},
		{"default bash reaches net alone", def.Component("bash").ConnectTo, []string{"net"}},
		{"default fs reaches nothing", len(def.Component("fs").ConnectTo), 0},
		{"default fs writes the workspace", def.Component("fs").Workspace, "rw"},
		{"default kms accepts llm alone", def.Component("kms").AcceptFrom, []string{"llm"}},
		{"Component of an unknown name", full.Component("nobody") == nil, true},
	}
	for _, c := range checks {
		if !cmp.Equal(c.got, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
		}
	}
}

func names(m *Manifest) []string {
	var out []string
	for _, c := range m.Components {
		out = append(out, c.Name)
	}
	return out
}

// TestLoadErrorIsDeterministic: a manifest with two faults must be refused with the same error
// every time, or want.txt files and users' bug reports cannot name it.
func TestLoadErrorIsDeterministic(t *testing.T) {
	fsys := mapFS(t, fullDir)
	m := string(fsys["manifest.yaml"].Data)
	m = strings.Replace(m, "kms: {kind: kms,", "kms: {kind: vault,", 1)
	m = strings.Replace(m, "fs: {kind: fs,", "fs: {kind: disk,", 1)
	first := ""
	for i := 0; i < 200; i++ {
		_, err := LoadBytes(fsys, "manifest.yaml", []byte(m))
		if err == nil {
			t.Fatal("Load accepted two unknown kinds")
		}
		if i == 0 {
			first = err.Error()
		} else if err.Error() != first {
			t.Fatalf("the same manifest gave two different errors:\n%s\n%s", first, err)
		}
	}
}

// variant loads the full fixture after edits, locking the manifest to the edited layers.
func variant(t *testing.T, base fstest.MapFS, edit func(fstest.MapFS)) (string, error) {
	t.Helper()
	fsys := clone(base)
	edit(fsys)
	locked, err := Lock(fsys, "manifest.yaml", fsys["manifest.yaml"].Data)
	if err != nil {
		return "", err
	}
	m, err := LoadBytes(fsys, "manifest.yaml", locked)
	if err != nil {
		return "", err
	}
	return m.Hash, nil
}

func replace(file, old, new string) func(fstest.MapFS) {
	return func(fsys fstest.MapFS) {
		s := string(fsys[file].Data)
		if !strings.Contains(s, old) {
			panic(fmt.Sprintf("%s does not contain %q", file, old))
		}
		fsys[file].Data = []byte(strings.Replace(s, old, new, 1))
	}
}

// reformattedFull is the full fixture's manifest with every key order, quoting, collection style
// and comment changed, but not one value.
const reformattedFull = `# Reformatted: same values, other spelling.
components:
  agent:
    layers:
      - "L0-os"
      - L1-static-go
      - L2-sharness
      - L3-agent
      - L5-session  # the session layer
    kind: "app"
  bash: {layers: [L0-os, L1-static-go, L2-sharness, L3-bash], kind: bash}
  fs: {layers: [L0-os, L1-static-go, L2-sharness, L3-fs], kind: fs}
  kms: {layers: [L0-os, L1-static-go, L2-sharness, L3-kms], kind: kms}
  launcher: {layers: [L0-os, L1-static-go, L2-sharness, L3-launcher], kind: launcher}
  llm: {layers: [L0-os, L1-static-go, L2-sharness, L3-llm], kind: llm}
  net: {layers: [L0-os, L1-static-go, L2-sharness, L3-net, L4-net-narrow], kind: net}
edges: [{to: net, from: agent}, {to: llm, from: agent}, {to: bash, from: agent}, {from: agent, to: fs},
  {from: llm, to: kms}, {from: llm, to: net}, {from: bash, to: net}]
trust_domain: 'sharness.test'
name: "sharness-full"
layers:
%s
kind: manifest
pbp: 0x1
`

func TestHashStability(t *testing.T) {
	base := mapFS(t, fullDir)
	want := mustLoad(t, base).Hash

	var md ManifestDoc
	if _, err := strictyaml.Decode("manifest.yaml", base["manifest.yaml"].Data, &md); err != nil {
		t.Fatal(err)
	}
	var refs []string
	for _, l := range md.Layers {
		refs = append(refs, fmt.Sprintf("  - {sha256: %q, file: %s, id: %s}", l.SHA256, l.File, l.ID))
	}
	reformatted := fmt.Sprintf(reformattedFull, strings.Join(refs, "\n"))

	same := []struct {
		name string
		edit func(fstest.MapFS)
	}{
		{"unchanged", func(fstest.MapFS) {}},
		{"manifest reformatted", func(fsys fstest.MapFS) { fsys["manifest.yaml"].Data = []byte(reformatted) }},
		{"manifest comment", replace("manifest.yaml", "# Every component kind", "# Not a value: every component kind")},
		{"manifest CRLF line ends", func(fsys fstest.MapFS) {
			fsys["manifest.yaml"].Data = bytes.ReplaceAll(fsys["manifest.yaml"].Data, []byte("\n"), []byte("\r\n"))
		}},
		{"layer comment", replace("layers/L5-session.yaml", "tighter memory", "a tighter memory limit")},
		{"layer reformatted", func(fsys fstest.MapFS) {
			fsys["layers/L5-session.yaml"].Data = []byte("policy:\n  files: {tmpfs: [{size: \"32Mi\", path: /tmp}]}\n  process:\n    max_memory: 128Mi\nname: session\nlevel: L5\nkind: layer\npbp: 1\n")
		}},
	}
	for _, tc := range same {
		t.Run("same/"+tc.name, func(t *testing.T) {
			got, err := variant(t, base, tc.edit)
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Errorf("M = %s, want the unchanged %s", got, want)
			}
		})
	}

	differ := []struct {
		name string
		edit func(fstest.MapFS)
	}{
		{"manifest name", replace("manifest.yaml", "name: sharness-full", "name: sharness-full2")},
		{"trust domain", replace("manifest.yaml", "trust_domain: sharness.test", "trust_domain: sharness.test2")},
		{"component's layers", replace("manifest.yaml", "L3-agent, L5-session]", "L3-agent]")},
		{"an edge removed", replace("manifest.yaml", "  - {from: agent, to: fs}\n", "")},
		{"L5 memory", replace("layers/L5-session.yaml", "max_memory: 128Mi", "max_memory: 96Mi")},
		{"L5 tmpfs size", replace("layers/L5-session.yaml", "size: 32Mi", "size: 16Mi")},
		{"L0 pids", replace("layers/L0-os.yaml", "max_pids: 1024", "max_pids: 1000")},
		{"L3 net deny host", replace("layers/L3-net.yaml", "deny_hosts: [metadata.google.internal]", "deny_hosts: [metadata.google.internal, example.com]")},
		{"L3 llm model order is a set, but a dropped model is not", replace("layers/L3-llm.yaml", "[claude-sonnet-4-5, claude-haiku-4-5]", "[claude-haiku-4-5]")},
		{"layer name", replace("layers/L5-session.yaml", "name: session", "name: session2")},
		{"bool spelled as bool vs string", replace("layers/L3-fs.yaml", "exec_bits: false", "exec_bits: \"false\"")},
	}
	seen := map[string]string{want: "unchanged"}
	for _, tc := range differ {
		t.Run("differ/"+tc.name, func(t *testing.T) {
			got, err := variant(t, base, tc.edit)
			if tc.name == "bool spelled as bool vs string" {
				if err == nil {
					t.Errorf("a string where a bool belongs was accepted (M %s)", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if prev, dup := seen[got]; dup {
				t.Errorf("M = %s, the same as for %q", got, prev)
			}
			seen[got] = tc.name
		})
	}

	// A layer's value changes M only through the manifest's recorded hash: without Lock the
	// manifest refuses the edited layer; after Lock, M differs.
	t.Run("layer edit without lock is refused", func(t *testing.T) {
		fsys := clone(base)
		replace("layers/L5-session.yaml", "max_memory: 128Mi", "max_memory: 96Mi")(fsys)
		_, err := Load(fsys, "manifest.yaml")
		if err == nil || !strings.Contains(err.Error(), "not the recorded one") {
			t.Fatalf("Load = %v, want a hash mismatch", err)
		}
	})
}

// TestHashDistinguishesValues: two spellings that decode to different values must not share a
// hash. yaml.v3 decodes a plain scalar such as 0x10 into a string field as the text "0x10", but
// the hashed value is the integer 16, so "image: 0x10" and "image: 16" (and 020, 0o20, 1_6, +16)
// hash alike while the component runs different images.
func TestHashDistinguishesValues(t *testing.T) {
	base := mapFS(t, fullDir)
	pairs := [][2]string{
		{"16", "0x10"},
		{"16", "020"},
		{"16", "1_6"},
		{"true", "True"},
	}
	for _, p := range pairs {
		t.Run(p[0]+"/"+p[1], func(t *testing.T) {
			var hashes, images [2]string
			for i, v := range p {
				fsys := clone(base)
				replace("layers/L3-agent.yaml", `image: "sharness/agent:dev"`, "image: "+v)(fsys)
				locked, err := Lock(fsys, "manifest.yaml", fsys["manifest.yaml"].Data)
				if err != nil {
					// The decoder refuses a non-string scalar in a string field: the fix.
					if !strings.Contains(err.Error(), "must be a string") {
						t.Fatalf("Lock: %v, want a must-be-a-string refusal", err)
					}
					return
				}
				m, err := LoadBytes(fsys, "manifest.yaml", locked)
				if err != nil {
					t.Fatal(err)
				}
				hashes[i], images[i] = m.Hash, m.Component("agent").Image
			}
			if images[0] != images[1] && hashes[0] == hashes[1] {
				t.Errorf("images %q and %q have the same policy hash %s", images[0], images[1], hashes[0])
			}
		})
	}
}

// TestHashDistinguishesTrustDomains: the same flaw in the manifest itself. trust_domain 16 and
// 0x10 both match the trust-domain pattern and hash alike, but give every component another
// SPIFFE ID.
func TestHashDistinguishesTrustDomains(t *testing.T) {
	base := mapFS(t, fullDir)
	var ms [2]*Manifest
	for i, td := range []string{"16", "0x10"} {
		fsys := clone(base)
		replace("manifest.yaml", "trust_domain: sharness.test", "trust_domain: "+td)(fsys)
		m, err := Load(fsys, "manifest.yaml")
		if err != nil {
			if !strings.Contains(err.Error(), "must be a string") {
				t.Fatalf("Load: %v, want a must-be-a-string refusal", err)
			}
			return // the decoder refuses a non-string trust domain: the fix
		}
		ms[i] = m
	}
	if ms[0].Hash == ms[1].Hash && ms[0].Component("agent").SPIFFEID != ms[1].Component("agent").SPIFFEID {
		t.Errorf("SPIFFE IDs %s and %s under the same policy hash %s",
			ms[0].Component("agent").SPIFFEID, ms[1].Component("agent").SPIFFEID, ms[0].Hash)
	}
}

// TestReservedVolumeNames: compose names each component's identity volume identity-<name> and
// mounts a policy volume by its bare name, so a policy volume called identity-kms would hand the
// agent kms's SPIFFE socket. The policy model must refuse such a name (or compose must).
func TestReservedVolumeNames(t *testing.T) {
	base := mapFS(t, fullDir)
	for _, v := range []string{"{name: identity-kms, target: /x}", "{name: identity-agent, target: /y}"} {
		t.Run(v, func(t *testing.T) {
			fsys := clone(base)
			replace("layers/L3-agent.yaml", "      - {name: workspace, target: /workspace, read_only: false}\n",
				"      - {name: workspace, target: /workspace, read_only: false}\n      - "+v+"\n")(fsys)
			locked, err := Lock(fsys, "manifest.yaml", fsys["manifest.yaml"].Data)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := LoadBytes(fsys, "manifest.yaml", locked); err == nil {
				t.Errorf("agent volume %s was accepted", v)
			}
		})
	}
}

// TestLock: Lock rewrites only the recorded hash lines and keeps everything else byte for byte.
func TestLock(t *testing.T) {
	base := mapFS(t, fullDir)
	orig := base["manifest.yaml"].Data

	t.Run("idempotent", func(t *testing.T) {
		got, err := Lock(base, "manifest.yaml", orig)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(string(orig), string(got)); d != "" {
			t.Errorf("Lock of a locked manifest changed it (-want +got):\n%s", d)
		}
	})

	t.Run("updates only the changed layer's line", func(t *testing.T) {
		fsys := clone(base)
		replace("layers/L5-session.yaml", "max_memory: 128Mi", "max_memory: 96Mi")(fsys)
		replace("layers/L0-os.yaml", "# L0, the OS base", "# L0 (comment only), the OS base")(fsys)
		newHash, err := LayerHash(fsys, "layers/L5-session.yaml")
		if err != nil {
			t.Fatal(err)
		}
		got, err := Lock(fsys, "manifest.yaml", orig)
		if err != nil {
			t.Fatal(err)
		}
		ol, gl := strings.Split(string(orig), "\n"), strings.Split(string(got), "\n")
		if len(ol) != len(gl) {
			t.Fatalf("Lock changed the number of lines: %d → %d", len(ol), len(gl))
		}
		var changed []int
		for i := range ol {
			if ol[i] != gl[i] {
				changed = append(changed, i+1)
			}
		}
		if len(changed) != 1 {
			t.Fatalf("lines changed: %v, want exactly the L5-session hash line", changed)
		}
		if want := "    sha256: " + newHash; gl[changed[0]-1] != want {
			t.Errorf("line %d = %q, want %q", changed[0], gl[changed[0]-1], want)
		}
		if !strings.HasPrefix(string(got), "# Every component kind") {
			t.Error("Lock dropped the leading comment")
		}
		m, err := LoadBytes(fsys, "manifest.yaml", got)
		if err != nil {
			t.Fatal(err)
		}
		if m.Hash == mustLoad(t, base).Hash {
			t.Error("M did not change after a layer's value changed")
		}
		if got := m.Component("agent").MaxMemory; got != 96*mi {
			t.Errorf("agent memory = %d, want 96Mi", got)
		}
	})

	t.Run("keeps comments and flow style on the hash line", func(t *testing.T) {
		fsys := clone(base)
		old := "sha256:b3898003833c08a930b9f633aebb662718eee9e3d74355c2b2757fc7a16620fd"
		m := strings.Replace(string(orig), "    sha256: "+old, "    sha256: "+old+"  # session layer", 1)
		replace("layers/L5-session.yaml", "max_memory: 128Mi", "max_memory: 96Mi")(fsys)
		got, err := Lock(fsys, "manifest.yaml", []byte(m))
		if err != nil {
			t.Fatal(err)
		}
		h, _ := LayerHash(fsys, "layers/L5-session.yaml")
		if !strings.Contains(string(got), "    sha256: "+h+"  # session layer\n") {
			t.Errorf("the comment on the hash line was not kept:\n%s", got)
		}
	})

	t.Run("missing layer file", func(t *testing.T) {
		fsys := clone(base)
		delete(fsys, "layers/L5-session.yaml")
		if _, err := Lock(fsys, "manifest.yaml", orig); err == nil {
			t.Error("Lock succeeded without the layer file")
		}
	})

	// yaml.v3 counts a lone CR as a line break; strings.SplitAfter(data, "\n") does not, so the
	// hash's line number indexes past the end of the slice.
	t.Run("CR line ends do not panic", func(t *testing.T) {
		cr := bytes.ReplaceAll(orig, []byte("\n"), []byte("\r"))
		defer func() {
			if r := recover(); r != nil {
				t.Errorf("Lock panicked on a manifest with CR line ends: %v", r)
			}
		}()
		got, err := Lock(base, "manifest.yaml", cr)
		if err == nil && !bytes.Equal(got, cr) {
			t.Errorf("Lock of a locked CR manifest changed it")
		}
	})
}

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"1", 1, true},
		{"64", 64, true},
		{"1Ki", ki, true},
		{"64Mi", 64 * mi, true},
		{"2Gi", 2 * gi, true},
		{"1024Mi", gi, true},
		{"9999999999999", 9999999999999, true},
		{"8191Gi", 8191 * gi, true},
		{"", 0, false},
		{"0", 0, false},
		{"0Mi", 0, false},
		{"064Mi", 0, false},
		{"-1Mi", 0, false},
		{"+1Mi", 0, false},
		{"1.5Gi", 0, false},
		{"64MB", 0, false},
		{"64M", 0, false},
		{"64mi", 0, false},
		{"64 Mi", 0, false},
		{" 64Mi", 0, false},
		{"64Mi\n", 0, false},
		{"1Ti", 0, false},
		{"Mi", 0, false},
		{"10000000000000", 0, false},
		// Sizes whose byte count does not fit in int64 must be refused, not wrapped:
		// 2^33 Gi = 2^63 wraps to MinInt64, 2^34 Gi to 0 (no limit), 2^34+1 Gi to 1Gi.
		{"8589934592Gi", 0, false},
		{"17179869184Gi", 0, false},
		{"17179869185Gi", 0, false},
		{"9999999999999Gi", 0, false},
		{"9999999999999Mi", 0, false},
	}
	for _, tc := range tests {
		got, err := ParseSize(tc.in)
		switch {
		case tc.ok && (err != nil || got != tc.want):
			t.Errorf("ParseSize(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		case !tc.ok && err == nil:
			t.Errorf("ParseSize(%q) = %d, want an error", tc.in, got)
		}
	}
}

func TestParseDuration(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"1s", 1, true},
		{"90s", 90, true},
		{"30m", 1800, true},
		{"2h", 7200, true},
		{"999999999h", 999999999 * 3600, true},
		{"", 0, false},
		{"0s", 0, false},
		{"30", 0, false},
		{"1d", 0, false},
		{"1.5h", 0, false},
		{"1h30m", 0, false},
		{"-1s", 0, false},
		{"30M", 0, false},
		{"90min", 0, false},
		{"1000000000h", 0, false},
		{"030m", 0, false},
	}
	for _, tc := range tests {
		got, err := ParseDuration(tc.in)
		switch {
		case tc.ok && (err != nil || got != tc.want):
			t.Errorf("ParseDuration(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		case !tc.ok && err == nil:
			t.Errorf("ParseDuration(%q) = %d, want an error", tc.in, got)
		}
	}
}

// TestSizeOverflowIsNotANarrowing: a size that wraps in int64 must not pass the widening check
// and reach the compiler as 0 (no limit) or a negative number.
func TestSizeOverflowIsNotANarrowing(t *testing.T) {
	base := mapFS(t, fullDir)
	for _, size := range []string{"17179869184Gi", "8589934592Gi", "17179869185Gi"} {
		t.Run(size, func(t *testing.T) {
			fsys := clone(base)
			replace("layers/L5-session.yaml", "max_memory: 128Mi", "max_memory: "+size)(fsys)
			locked, err := Lock(fsys, "manifest.yaml", fsys["manifest.yaml"].Data)
			if err != nil {
				t.Fatal(err)
			}
			m, err := LoadBytes(fsys, "manifest.yaml", locked)
			if err == nil {
				t.Errorf("max_memory %s under a 256Mi parent was accepted; effective MaxMemory = %d", size, m.Component("agent").MaxMemory)
			}
		})
	}
}

func TestHostWithin(t *testing.T) {
	tests := []struct {
		patterns []string
		host     string
		want     bool
	}{
		{[]string{"github.com"}, "github.com", true},
		{[]string{"github.com"}, "api.github.com", false},
		{[]string{"github.com"}, "*.github.com", false},
		{[]string{"*.github.com"}, "api.github.com", true},
		{[]string{"*.github.com"}, "a.b.github.com", true},
		{[]string{"*.github.com"}, "*.github.com", true},
		{[]string{"*.github.com"}, "*.api.github.com", true},
		{[]string{"*.github.com"}, "github.com", false},
		{[]string{"*.github.com"}, "evilgithub.com", false},
		{[]string{"*.github.com"}, "*.evilgithub.com", false},
		{[]string{"*.github.com"}, "github.com.evil.com", false},
		{[]string{"*.github.com"}, "*.com", false},
		{[]string{"*.github.com"}, "githubXcom", false},
		{[]string{"*.com"}, "*.github.com", true},
		{[]string{"*.com"}, "github.com", true},
		{[]string{"*.api.github.com"}, "*.github.com", false},
		{[]string{"*.api.github.com"}, "x.github.com", false},
		{[]string{"proxy.golang.org", "*.github.com"}, "codeload.github.com", true},
		{[]string{"proxy.golang.org", "*.github.com"}, "golang.org", false},
		{nil, "github.com", false},
		{[]string{}, "github.com", false},
	}
	for _, tc := range tests {
		if got := hostWithin(tc.patterns, tc.host); got != tc.want {
			t.Errorf("hostWithin(%q, %q) = %v, want %v", tc.patterns, tc.host, got, tc.want)
		}
	}
}

func TestHostPattern(t *testing.T) {
	for h, want := range map[string]bool{
		"github.com": true, "*.github.com": true, "localhost": true, "a-b.example": true,
		"10.0.0.1": false, "2130706433": false, "0x7f000001": false, "::1": false, "[::1]": false,
		"GitHub.com": false, "github.com.": false, "*github.com": false, "*.*.github.com": false,
		"github.com:443": false, "": false, "-a.com": false, "a..com": false,
	} {
		if got := hostPattern.MatchString(h); got != want {
			t.Errorf("hostPattern(%q) = %v, want %v", h, got, want)
		}
	}
}

// TestLoadErrorIsAnError: Load's refusals are *Error (the strict decoder's type, whose rendering
// strictyaml's TestErrorFormat pins), naming the file, so a caller can rewrite its path.
func TestLoadErrorIsAnError(t *testing.T) {
	var pe *Error
	_, err := Load(fstest.MapFS{}, "manifest.yaml")
	if !errors.As(err, &pe) || pe.File != "manifest.yaml" {
		t.Errorf("Load of a missing manifest = %v, want a *Error naming manifest.yaml", err)
	}
}

func TestDigest(t *testing.T) {
	a, err := Digest(map[string]any{"b": int64(1), "a": []any{"x", true, nil}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Digest(map[string]any{"a": []any{"x", true, nil}, "b": int64(1)})
	if a != b {
		t.Errorf("key order changed the digest: %s vs %s", a, b)
	}
	// JCS of {"a":["x",true,null],"b":1}
	if want := "sha256:" + fmt.Sprintf("%x", sha256Sum(`{"a":["x",true,null],"b":1}`)); a != want {
		t.Errorf("Digest = %s, want %s", a, want)
	}
	for _, v := range []any{int64(1), "1", true, nil, []any{}, map[string]any{}} {
		if d, _ := Digest(v); d == a {
			t.Errorf("Digest(%v) collides", v)
		}
	}
	if err := keys.CheckHash(a); err != nil {
		t.Error(err)
	}
}

func sha256Sum(s string) [32]byte { return sha256.Sum256([]byte(s)) }

// TestBoolsAreBools: a strict decoder refuses a string where a boolean belongs. yaml.v3 turns
// the YAML 1.1 spellings y/yes/on/n/no/off (quoted or not) into booleans when the Go field is a
// bool, while "false" as a string is refused, and the hash records the string, not the boolean.
func TestBoolsAreBools(t *testing.T) {
	base := mapFS(t, fullDir)
	for _, v := range []string{`"false"`, "no", "off", "n", `"no"`} {
		t.Run(v, func(t *testing.T) {
			fsys := clone(base)
			replace("layers/L3-fs.yaml", "exec_bits: false", "exec_bits: "+v)(fsys)
			locked, err := Lock(fsys, "manifest.yaml", fsys["manifest.yaml"].Data)
			if err != nil {
				return // the layer does not even decode: refused
			}
			if m, err := LoadBytes(fsys, "manifest.yaml", locked); err == nil {
				t.Errorf("exec_bits: %s was accepted as %v", v, *m.Component("fs").Business.FS.ExecBits)
			}
		})
	}
}

func TestWorkspaceMounts(t *testing.T) {
	prot := []string{".bashrc", ".claude/", ".git/config", ".git/hooks/", "a/b/c/"}
	tests := []struct {
		name string
		c    Component
		want []WorkspaceMount
	}{
		{"no workspace", Component{Kind: KindApp, Protected: prot}, nil},
		{"fs writes them", Component{Kind: KindFS, Workspace: "rw", Protected: prot}, []WorkspaceMount{{"", false}}},
		{"agent", Component{Kind: KindApp, Workspace: "rw", Protected: prot}, []WorkspaceMount{
			{"", false}, {".git", false}, {"a", false}, {"a/b", false},
			{".bashrc", true}, {".claude", true}, {".git/config", true}, {".git/hooks", true}, {"a/b/c", true},
		}},
		{"read-only workspace keeps its ancestors read-only", Component{Kind: KindBash, Workspace: "ro", Protected: []string{".git/hooks/"}},
			[]WorkspaceMount{{"", true}, {".git", true}, {".git/hooks", true}}},
		{"an ancestor that is itself protected is not bound twice", Component{Kind: KindApp, Workspace: "rw", Protected: []string{".claude/", ".claude/x"}},
			[]WorkspaceMount{{"", false}, {".claude", true}, {".claude/x", true}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, WorkspaceMounts(&tc.c)); diff != "" {
				t.Errorf("WorkspaceMounts (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLauncherAndPeers(t *testing.T) {
	m, err := Load(os.DirFS("../default"), "manifest.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if l := m.Launcher(); l == nil || l.Name != "launcher" {
		t.Errorf("Launcher() = %v, want the launcher", l)
	}
	for _, tc := range []struct {
		from string
		kind Kind
		want []string
	}{
		{"llm", KindNet, []string{"net"}}, {"llm", KindKMS, []string{"kms"}}, {"bash", KindNet, []string{"net"}},
		{"agent", KindKMS, nil}, {"fs", KindNet, nil}, {"nobody", KindNet, nil},
	} {
		if got := m.Peers(tc.from, tc.kind); !cmp.Equal(got, tc.want) {
			t.Errorf("Peers(%s, %s) = %v, want %v", tc.from, tc.kind, got, tc.want)
		}
	}
	if (&Manifest{}).Launcher() != nil {
		t.Error("a manifest without a launcher has one")
	}
}

// TestNetAskComposes: a layer may move a host its parent allows to ask, keeps every ask host of
// its parent even when it leaves it out (union), and may not ask about a host its parent never
// named (widening-net-ask holds that refusal).
func TestNetAskComposes(t *testing.T) {
	fsys := mapFS(t, fullDir)
	replace("layers/L3-net.yaml", `hosts: [proxy.golang.org, "*.github.com", github.com]`,
		`hosts: [proxy.golang.org, "*.github.com", github.com]
          ask: [gist.github.com, pkg.example.com]`)(fsys)
	replace("layers/L4-net-narrow.yaml", "hosts: [proxy.golang.org]", "hosts: [proxy.golang.org, gist.github.com]\n          ask: [api.github.com]")(fsys)
	locked, err := Lock(fsys, "manifest.yaml", fsys["manifest.yaml"].Data)
	if err != nil {
		t.Fatal(err)
	}
	m, err := LoadBytes(fsys, "manifest.yaml", locked)
	if err != nil {
		t.Fatal(err)
	}
	var agent CallerRule
	for _, c := range *m.Component("net").Business.Net.Callers {
		if c.Caller == "agent" {
			agent = c
		}
	}
	if want := []string{"api.github.com", "gist.github.com", "pkg.example.com"}; !cmp.Equal(agent.Ask, want) {
		t.Errorf("agent's ask hosts %q, want %q: the parent's stay, the layer's own are added", agent.Ask, want)
	}
	if want := []string{"proxy.golang.org", "gist.github.com"}; !cmp.Equal(agent.Hosts, want) {
		t.Errorf("agent's hosts %q, want %q", agent.Hosts, want)
	}
}
