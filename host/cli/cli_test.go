package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/sharness-ai/sharness/images/llm/messages"
)

// repoRoot is the repository, two folders up from this package, as an absolute path so it
// survives t.Chdir.
var repoRoot, _ = filepath.Abs("../..")

func run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := execute(args, &out, &errOut, testEngine(t))
	return code, out.String(), errOut.String()
}

// copyTree copies the named files and folders of the repository into a fresh folder and makes
// it the working directory, so tests can edit policies freely.
func copyTree(t *testing.T, names ...string) string {
	t.Helper()
	dst := t.TempDir()
	for _, n := range names {
		src := filepath.Join(repoRoot, n)
		err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(repoRoot, p)
			target := filepath.Join(dst, rel)
			if d.IsDir() {
				return os.MkdirAll(target, 0o755)
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			os.MkdirAll(filepath.Dir(target), 0o755)
			return os.WriteFile(target, data, 0o644)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(dst)
	return dst
}

// TestCommittedArtefactsMatch is the drift check CI relies on: the root docker-compose.yml and
// compiled/ are exactly what the default manifest compiles to.
func TestCommittedArtefactsMatch(t *testing.T) {
	t.Chdir(repoRoot)
	code, out, errOut := run(t, "compile", "--check")
	if code != ExitOK {
		t.Fatalf("compile --check on the committed artefacts: exit %d\n%s%s\nregenerate with: go run ./cmd/sharness-ai compile", code, out, errOut)
	}
}

func TestCheckReportsDriftAndWritesNothing(t *testing.T) {
	copyTree(t, "policies/default", "docker-compose.yml", "compiled")
	os.WriteFile("compiled/agent/seccomp.json", []byte("{}\n"), 0o644)
	os.WriteFile("compiled/stale.json", []byte("{}\n"), 0o644)
	os.Remove("docker-compose.yml")
	code, out, _ := run(t, "compile", "--check")
	if code != ExitRefused {
		t.Fatalf("exit %d, want %d", code, ExitRefused)
	}
	for _, want := range []string{"compiled/agent/seccomp.json: differs", "compiled/stale.json: unexpected", "docker-compose.yml: missing"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if _, err := os.Stat("docker-compose.yml"); err == nil {
		t.Error("--check wrote a file")
	}
}

func TestFailedCompileLeavesOutputUntouched(t *testing.T) {
	copyTree(t, "policies/default", "docker-compose.yml", "compiled")
	before, _ := os.ReadFile("docker-compose.yml")
	layer := "policies/default/layers/L3-agent.yaml"
	data, _ := os.ReadFile(layer)
	os.WriteFile(layer, bytes.Replace(data, []byte("max_pids: 256"), []byte("max_pids: 4096"), 1), 0o644)
	code, _, errOut := run(t, "compile")
	if code != ExitUsage || !strings.Contains(errOut, "not the recorded one") {
		t.Fatalf("exit %d, stderr %q: want a layer hash refusal", code, errOut)
	}
	code, _, errOut = run(t, "lock")
	if code != ExitUsage || !strings.Contains(errOut, "widens its parent: 4096 is not within 512") {
		t.Fatalf("lock: exit %d, stderr %q: want a widening refusal", code, errOut)
	}
	after, _ := os.ReadFile("docker-compose.yml")
	if !bytes.Equal(before, after) {
		t.Fatal("a failed compile changed docker-compose.yml")
	}
}

// TestEveryFieldIsCovered edits every scalar of the default manifest and its layers, one at a
// time, and requires that the result is refused or changes M and makes --check fail.
func TestEveryFieldIsCovered(t *testing.T) {
	dir := copyTree(t, "policies/default", "docker-compose.yml", "compiled")
	_, orig, _ := run(t, "hash")
	files, _ := filepath.Glob("policies/default/*.yaml")
	layers, _ := filepath.Glob("policies/default/layers/*.yaml")
	files = append(files, layers...)
	edits := 0
	for _, f := range files {
		data, _ := os.ReadFile(f)
		var root yaml.Node
		if err := yaml.Unmarshal(data, &root); err != nil {
			t.Fatal(err)
		}
		for _, n := range scalars(&root) {
			old := n.Value
			n.Value = mutate(n)
			mutated, _ := yaml.Marshal(&root)
			n.Value = old
			os.WriteFile(f, mutated, 0o644)
			if strings.Contains(f, "/layers/") {
				run(t, "lock") // a layer edit is re-recorded in the manifest, as a person would
			}
			code, hash, _ := run(t, "hash")
			if code == ExitOK {
				if hash == orig {
					t.Errorf("%s: changing %q (line %d) kept the hash %s", f, old, n.Line, strings.TrimSpace(hash))
				}
				if c, _, _ := run(t, "compile", "--check"); c != ExitRefused {
					t.Errorf("%s: changing %q (line %d): compile --check exit %d, want %d", f, old, n.Line, c, ExitRefused)
				}
			}
			edits++
			// Restore every file from the repository for the next edit.
			copyBack(t, dir)
		}
	}
	if edits < 20 {
		t.Fatalf("only %d edits: the walk is not reaching the fields", edits)
	}
}

func copyBack(t *testing.T, dir string) {
	t.Helper()
	src := filepath.Join(repoRoot, "policies", "default")
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(repoRoot, p)
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// scalars lists the value scalars of a YAML tree (not mapping keys).
func scalars(n *yaml.Node) []*yaml.Node {
	var out []*yaml.Node
	switch n.Kind {
	case yaml.DocumentNode, yaml.SequenceNode:
		for _, c := range n.Content {
			out = append(out, scalars(c)...)
		}
	case yaml.MappingNode:
		for i := 1; i < len(n.Content); i += 2 {
			out = append(out, scalars(n.Content[i])...)
		}
	case yaml.ScalarNode:
		out = append(out, n)
	}
	return out
}

func mutate(n *yaml.Node) string {
	switch n.Tag {
	case "!!int":
		if n.Value == "1" {
			return "2"
		}
		return "1" + n.Value
	case "!!bool":
		if n.Value == "true" {
			return "false"
		}
		return "true"
	}
	if strings.HasSuffix(n.Value, "Mi") || strings.HasSuffix(n.Value, "Gi") {
		return "1" + n.Value
	}
	return n.Value + "x"
}

// TestVerifyRefusals: verify exits 1 for a missing signature, another key's signature and a
// tampered signature file, and 2 when nothing says which policy is trusted.
func TestVerifyRefusals(t *testing.T) {
	t.Setenv("SHARNESS_AI_POLICY_HASH", "")
	copyTree(t, "policies/default")
	if code, _, _ := run(t, "keygen", "--dir", "a"); code != ExitOK {
		t.Fatal("keygen a")
	}
	if code, _, _ := run(t, "keygen", "--dir", "b"); code != ExitOK {
		t.Fatal("keygen b")
	}
	if code, _, errOut := run(t, "keygen", "--dir", "a"); code != ExitUsage || !strings.Contains(errOut, "refusing to overwrite") {
		t.Fatalf("keygen over an existing key: exit %d %q, want a refusal", code, errOut)
	}
	cases := []struct {
		name   string
		setup  func()
		args   []string
		code   int
		stderr string
	}{
		{"nothing trusted", func() {}, []string{"verify"}, ExitUsage, "verify needs --policy-hash"},
		{"missing signature", func() {}, []string{"verify", "--key", "a/signing.pub"}, ExitRefused, "no signature"},
		{"another key's signature", func() { run(t, "sign", "--key", "b/signing.key") }, []string{"verify", "--key", "a/signing.pub"}, ExitRefused, "not the pinned key"},
		{"tampered signature", func() {
			run(t, "sign", "--key", "a/signing.key")
			sig, _ := os.ReadFile(DefaultManifest + ".sig")
			os.WriteFile(DefaultManifest+".sig", bytes.Replace(sig, []byte(`"signature": "`), []byte(`"signature": "AAAA`), 1), 0o644)
		}, []string{"verify", "--key", "a/signing.pub"}, ExitRefused, "signature"},
		{"good signature", func() { run(t, "sign", "--key", "a/signing.key") }, []string{"verify", "--key", "a/signing.pub"}, ExitOK, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			os.Remove(DefaultManifest + ".sig")
			tc.setup()
			code, _, errOut := run(t, tc.args...)
			if code != tc.code || !strings.Contains(errOut, tc.stderr) {
				t.Fatalf("exit %d, stderr %q; want exit %d and %q", code, errOut, tc.code, tc.stderr)
			}
		})
	}
}

// TestHashTools: the pin printed for a tool list, alone or inside a request, is the one llm
// computes; a body with duplicate keys is refused before it is hashed.
func TestHashTools(t *testing.T) {
	dir := t.TempDir()
	list := `[{"name":"workspace_status","description":"Reports what the agent's sandbox allows, as JSON.","input_schema":{"type":"object","properties":{}}}]`
	want, err := messages.ToolsHash(json.RawMessage(list))
	if err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"list.json": list, "request.json": `{"model":"m","tools":` + list + `}`} {
		os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644)
		if code, out, errOut := run(t, "hash", "--tools", filepath.Join(dir, name)); code != ExitOK || out != want+"\n" {
			t.Errorf("%s: exit %d, %q %q; want %s", name, code, out, errOut, want)
		}
	}
	os.WriteFile(filepath.Join(dir, "dup.json"), []byte(`{"tools":[],"tools":`+list+`}`), 0o644)
	if code, _, errOut := run(t, "hash", "--tools", filepath.Join(dir, "dup.json")); code == ExitOK || !strings.Contains(errOut, "duplicate key") {
		t.Errorf("duplicate keys: exit %d, %q; want a refusal", code, errOut)
	}
}
