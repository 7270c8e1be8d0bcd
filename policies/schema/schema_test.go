package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/sharness-ai/sharness/policies/pbp"
)

// policiesDir is policies/, relative to this package.
const policiesDir = ".."

// yamlFiles lists every .yaml/.yml file under dir, sorted.
func yamlFiles(t testing.TB, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !e.IsDir() && (strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yml")) {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// corpus is every policy file the agreement is checked on: the default policy and all test data,
// valid and invalid, whatever exists when the test runs.
func corpus(t testing.TB) []string {
	return slices.Concat(yamlFiles(t, filepath.Join(policiesDir, "default")), yamlFiles(t, filepath.Join(policiesDir, "world")), yamlFiles(t, filepath.Join(policiesDir, "testdata")))
}

func TestSchemaCompiles(t *testing.T) {
	if _, err := compiled(); err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal(document, &v); err != nil {
		t.Fatalf("pbp.schema.json is not JSON: %v", err)
	}
	if v["$id"] != ID {
		t.Errorf("$id is %v, want %s", v["$id"], ID)
	}
	// Editors read pbp.schema.json itself: the validator must hold exactly that file, and
	// validating must not change it.
	if err := Validate("m.yaml", []byte("pbp: 1\nkind: layer\n")); err == nil {
		t.Error("an incomplete layer validated")
	}
	onDisk, err := os.ReadFile("pbp.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(document, onDisk) {
		t.Error("the embedded schema differs from pbp.schema.json")
	}
}

// TestComponentNamePattern: the schema spells component names as the policy model does.
func TestComponentNamePattern(t *testing.T) {
	var v struct {
		Defs map[string]struct {
			Pattern string `json:"pattern"`
		} `json:"$defs"`
	}
	if err := json.Unmarshal(document, &v); err != nil {
		t.Fatal(err)
	}
	if got := v.Defs["componentName"].Pattern; got != pbp.ComponentNamePattern {
		t.Errorf("$defs.componentName.pattern = %q, want pbp.ComponentNamePattern %q", got, pbp.ComponentNamePattern)
	}
}

func TestValidPoliciesValidate(t *testing.T) {
	files := slices.Concat(yamlFiles(t, filepath.Join(policiesDir, "default")), yamlFiles(t, filepath.Join(policiesDir, "world")), yamlFiles(t, filepath.Join(policiesDir, "testdata", "full")))
	if len(files) < 4 {
		t.Fatalf("found only %v", files)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := Validate(f, data); err != nil {
			t.Errorf("valid policy rejected: %v", err)
		}
	}
	// They are valid for the loader too, so this test is about the schema, not the fixtures.
	for _, dir := range []string{"default", "world", "testdata/full"} {
		if _, err := pbp.Load(os.DirFS(filepath.Join(policiesDir, dir)), "manifest.yaml"); err != nil {
			t.Errorf("%s: %v", dir, err)
		}
	}
}

// TestAgreementOnFixtures: on every policy file in the tree, the schema and the Go decoder (at
// the shape stage, pbp.CheckShape) give the same verdict. Fixtures that fail only at later
// stages (hashes, widening, references, the design's rules) are accepted by both.
func TestAgreementOnFixtures(t *testing.T) {
	files := corpus(t)
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(strings.TrimPrefix(filepath.ToSlash(f), "../"), func(t *testing.T) {
			checkAgreement(t, data)
		})
	}
}

func TestValidateErrors(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{"pbp: 1\nkind: manifest\ntrust_domain: x\nlayers: [{id: L0-os, file: a.yaml, sha256: " + zeroHash + "}]\ncomponents:\n  agent: {kind: robot, layers: [L0-os]}\n",
			"m.yaml: /components/agent/kind: value must be one of 'app', 'net', 'llm', 'kms', 'bash', 'fs', 'launcher'"},
		{"pbp: 1\nkind: layer\nlevel: L3\npolicy:\n  process:\n    max_memory: 64MB\n",
			"m.yaml: /policy/process/max_memory: '64MB' does not match pattern"},
		{"pbp: 1\nkind: layer\nlevel: L3\npolicy:\n  procss: {}\n", "m.yaml: /policy/procss: unknown field"},
		{"pbp: 1\nkind: layer\nlevel: L3\npolicy: {process: {max_pids: 1.5}}\n", "m.yaml:4: policy.process.max_pids: floats are not allowed"},
		{"pbp: 1\nkind: layer\nlevel: L3\npolicy: {process: {max_pids: &a 1}}\n", "m.yaml:4: policy.process.max_pids: anchors and aliases are not allowed"},
		{"pbp: 1\nkind: layer\nkind: layer\n", "m.yaml:3: kind: duplicate key (first at line 2)"},
		{"kind: layer\nlevel: L3\n", "m.yaml:1: missing property 'pbp'"},
		{"pbp: 1\nkind: manifest\ntrust_domain: x\nlayers: [{id: L0-os, file: a.yaml, sha256: " + zeroHash + "}]\ncomponents:\n  Agent: {kind: app, layers: [L0-os]}\n",
			"m.yaml: /components/Agent: invalid name \"Agent\": 'Agent' does not match pattern"},
		{"", "m.yaml: empty document"},
		{"a: [", "m.yaml:1: did not find expected node content"},
		{"pbp: 1\n---\npbp: 1\n", "m.yaml:2: more than one YAML document"},
	} {
		err := Validate("m.yaml", []byte(tc.doc))
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q:\n got %v\nwant %s…", tc.doc, err, tc.want)
		}
	}
}

// TestErrorPlaces: a schema failure is placed on the line of its value, or of its nearest parent
// when the value is missing, through pbp's dotted field paths.
func TestErrorPlaces(t *testing.T) {
	for _, tc := range []struct {
		doc, pointer string
		line         int
	}{
		{strings.Replace(minimalManifest, "kind: app", "kind: robot", 1), "/components/agent/kind", 8},
		{strings.Replace(minimalManifest, "id: L0-os", "id: L9-os", 1), "/layers/0/id", 6},
		{strings.Replace(minimalManifest, "agent:", "Agent:", 1), "/components/Agent", 8},
		{minimalLayer + "  files: {protected: [a, ../x]}\n", "/policy/files/protected/1", 7},
		{minimalLayer + "  business:\n    net:\n      callers:\n        - caller: a\n          ports: [1, 0]\n", "/policy/business/net/callers/0/ports/1", 11},
		{minimalLayer + "  a/b~c: 1\n", "/policy/a~1b~0c", 7},
		{"pbp: 1\nkind: layer\nlevel: L3\npolicy:\n  files:\n    tmpfs:\n      - path: /tmp\n", "/policy/files/tmpfs/0", 7},
		{"# c\nkind: layer\n", "", 2},
	} {
		err := Validate("m.yaml", []byte(tc.doc))
		var se *Error
		if !errors.As(err, &se) || se.Pointer != tc.pointer || se.Line != tc.line {
			t.Errorf("%q:\n got %#v (%v)\nwant %s at line %d", tc.doc, se, err, tc.pointer, tc.line)
		}
	}
	for ptr, want := range map[string]string{
		"": "", "/layers/0/id": "layers[0].id", "/components/agent/kind": "components.agent.kind",
		"/components/0": "components.0", "/a~1b~0c/x": "a/b~c.x", "/layers/7": "layers[7]", "/layers/x": "layers.x",
	} {
		v := map[string]any{"layers": []any{map[string]any{"id": "x"}}, "components": map[string]any{"0": "x"}}
		if got := field(v, ptr); got != want {
			t.Errorf("field(%q) = %q, want %q", ptr, got, want)
		}
	}
}

const zeroHash = "sha256:0000000000000000000000000000000000000000000000000000000000000000"

const (
	minimalManifest = "pbp: 1\nkind: manifest\nname: m\ntrust_domain: sharness.test\n" +
		"layers:\n  - {id: L0-os, file: layers/L0-os.yaml, sha256: " + zeroHash + "}\n" +
		"components:\n  agent: {kind: app, layers: [L0-os]}\nedges: []\n"
	minimalLayer = "pbp: 1\nkind: layer\nlevel: L3\nname: agent\npolicy:\n  process: {max_pids: 64, max_memory: 64Mi}\n"
)

// shapeCases are small documents with the verdict both sides must give.
var shapeCases = []struct {
	name   string
	doc    string
	accept bool
}{
	{"minimal manifest", minimalManifest, true},
	{"minimal layer", minimalLayer, true},
	{"empty policy", "pbp: 1\nkind: layer\nlevel: L0\n", true},
	{"full layer", `pbp: 1
kind: layer
level: L3
name: everything
policy:
  subject: {image: "x:1", entrypoint: [/x, -v], code_sha256: ` + zeroHash + `}
  identity: {uid: 1, gid: 2147483647}
  process: {capabilities: [CAP_NET_BIND_SERVICE], no_new_privs: true, max_pids: 1, max_memory: 1Gi, max_runtime: 30m}
  files:
    tmpfs: [{path: /tmp, size: "1"}]
    volumes: [{name: data, target: /, read_only: true}]
    protected: [.git/hooks, ./, a/, ...x/..y]
  network: {egress: false}
  syscalls: {base: docker-default, allow: [], deny: [ptrace]}
  business:
    net:
      callers: [{caller: agent, hosts: ["*.example.com", a.b], ports: [1, 65535], presets: [go-proxy]}]
      deny_hosts: [metadata.google.internal]
    llm: {upstream: https://x, models: [m], max_tokens: 0, session_token_budget: 9007199254740991, on_secret: redact}
    kms: {ops: [unwrap], max_unwraps: 0}
    bash: {profiles: [build]}
    fs: {max_file_size: 1Mi, exec_bits: false}
  audit: {emit: [deny]}
`, true},
	// Later stages only: both accept.
	{"hash mismatch is later", strings.Replace(minimalManifest, zeroHash, "sha256:"+strings.Repeat("ab", 32), 1), true},
	{"edge to a missing component is later", strings.Replace(minimalManifest, "edges: []", "edges: [{from: agent, to: ghost}]", 1), true},
	{"edge outside the design is later", strings.Replace(minimalManifest, "edges: []", "edges: [{from: agent, to: agent}]", 1), true},
	{"unknown layer reference is later", strings.Replace(minimalManifest, "layers: [L0-os]", "layers: [L3-nope]", 1), true},
	{"forbidden capability is later", strings.Replace(minimalLayer, "max_pids: 64", "capabilities: [CAP_SYS_ADMIN]", 1), true},
	{"egress for any kind is later", minimalLayer + "  network: {egress: true}\n", true},
	{"a test world", minimalManifest + "test_world:\n  reason: r\n  resolver: 10.0.0.1:53\n  allow_addrs: [10.0.0.1]\n  llm_ca: environment\n  fixtures: {world: {networks: [egress]}}\n", true},
	{"a test world with a reason alone", minimalManifest + "test_world: {reason: r}\n", true},
	{"a test world's bad address is later", minimalManifest + "test_world: {reason: r, allow_addrs: [10.0.0.0/8]}\n", true},
	{"a test world's bad resolver is later", minimalManifest + "test_world: {reason: r, resolver: world}\n", true},
	{"a fixture named as a component is later", minimalManifest + "test_world: {reason: r, fixtures: {agent: {networks: [egress]}}}\n", true},
	{"a test world without a reason", minimalManifest + "test_world: {resolver: 10.0.0.1:53}\n", false},
	{"a test world with an empty reason", minimalManifest + "test_world: {reason: \"\"}\n", false},
	{"a test world with an unknown field", minimalManifest + "test_world: {reason: r, unsafe: true}\n", false},
	{"a test world with no addresses", minimalManifest + "test_world: {reason: r, allow_addrs: []}\n", false},
	{"a test world with an address twice", minimalManifest + "test_world: {reason: r, allow_addrs: [10.0.0.1, 10.0.0.1]}\n", false},
	{"a test world's CA from a file", minimalManifest + "test_world: {reason: r, llm_ca: /etc/ca.pem}\n", false},
	{"a test world with no fixtures", minimalManifest + "test_world: {reason: r, fixtures: {}}\n", false},
	{"a fixture on an edge network", minimalManifest + "test_world: {reason: r, fixtures: {world: {networks: [edge-agent-net]}}}\n", false},
	{"a fixture on no network", minimalManifest + "test_world: {reason: r, fixtures: {world: {networks: []}}}\n", false},
	{"a fixture on egress twice", minimalManifest + "test_world: {reason: r, fixtures: {world: {networks: [egress, egress]}}}\n", false},
	{"a fixture with a bad name", minimalManifest + "test_world: {reason: r, fixtures: {World: {networks: [egress]}}}\n", false},
	{"a fixture with an unknown field", minimalManifest + "test_world: {reason: r, fixtures: {world: {networks: [egress], ip: 10.0.0.1}}}\n", false},
	// Shape failures: both reject.
	{"unknown field", minimalLayer + "  procss: {}\n", false},
	{"unknown top-level field", minimalManifest + "extra: 1\n", false},
	{"wrong type", strings.Replace(minimalLayer, "max_pids: 64", "max_pids: \"64\"", 1), false},
	{"wrong type, list for map", strings.Replace(minimalManifest, "edges: []", "edges: {}", 1), false},
	{"float", strings.Replace(minimalLayer, "max_pids: 64", "max_pids: 64.0", 1), false},
	{"2^53", strings.Replace(minimalLayer, "max_pids: 64", "max_pids: 9007199254740992", 1), false},
	{"-2^53", strings.Replace(minimalLayer, "max_pids: 64", "max_pids: -9007199254740992", 1), false},
	{"missing pbp", strings.Replace(minimalManifest, "pbp: 1\n", "", 1), false},
	{"pbp: 2", strings.Replace(minimalManifest, "pbp: 1", "pbp: 2", 1), false},
	{"pbp as a string", strings.Replace(minimalManifest, "pbp: 1", "pbp: \"1\"", 1), false},
	{"unknown kind", strings.Replace(minimalManifest, "kind: manifest", "kind: policy", 1), false},
	{"missing kind", strings.Replace(minimalManifest, "kind: manifest\n", "", 1), false},
	{"bad size string", strings.Replace(minimalLayer, "64Mi", "64MB", 1), false},
	{"size with a fraction", strings.Replace(minimalLayer, "64Mi", "1.5Gi", 1), false},
	{"empty size", strings.Replace(minimalLayer, "64Mi", `""`, 1), false},
	{"largest Gi", strings.Replace(minimalLayer, "64Mi", "8388607Gi", 1), true},
	{"largest Mi", strings.Replace(minimalLayer, "64Mi", "8589934591Mi", 1), true},
	{"largest Ki", strings.Replace(minimalLayer, "64Mi", "8796093022207Ki", 1), true},
	{"largest bytes", strings.Replace(minimalLayer, "64Mi", `"9999999999999"`, 1), true},
	{"2^53 bytes in Gi", strings.Replace(minimalLayer, "64Mi", "8388608Gi", 1), false},
	{"2^53 bytes in Mi", strings.Replace(minimalLayer, "64Mi", "8589934592Mi", 1), false},
	{"2^53 bytes in Ki", strings.Replace(minimalLayer, "64Mi", "8796093022208Ki", 1), false},
	{"Gi wrapping int64 to 0", strings.Replace(minimalLayer, "64Mi", "17179869184Gi", 1), false},
	{"tmpfs of 2^53 bytes or more", minimalLayer + "  files: {tmpfs: [{path: /tmp, size: 9999999999999Gi}]}\n", false},
	{"14 digits", strings.Replace(minimalLayer, "64Mi", `"10000000000000"`, 1), false},
	{"duplicate nested key", minimalLayer + "  subject: {}\n  process: {}\n", false},
	{"bad duration text", strings.Replace(minimalLayer, "max_memory: 64Mi", "max_runtime: 1d", 1), false},
	{"tmpfs without size", minimalLayer + "  files: {tmpfs: [{path: /tmp}]}\n", false},
	{"tmpfs at /", minimalLayer + "  files: {tmpfs: [{path: /, size: 1Mi}]}\n", false},
	{"protected escapes", minimalLayer + "  files: {protected: [../x]}\n", false},
	{"port 0", minimalLayer + "  business: {net: {callers: [{caller: agent, ports: [0]}]}}\n", false},
	{"port 65536", minimalLayer + "  business: {net: {callers: [{caller: agent, ports: [65536]}]}}\n", false},
	{"root uid", minimalLayer + "  identity: {uid: 0}\n", false},
	{"no_new_privs false", strings.Replace(minimalLayer, "max_pids: 64", "no_new_privs: false", 1), false},
	{"bad hash", strings.Replace(minimalManifest, zeroHash, "sha256:ABC", 1), false},
	{"bad layer id", strings.Replace(minimalManifest, "id: L0-os", "id: L9-os", 1), false},
	{"absolute layer file", strings.Replace(minimalManifest, "layers/L0-os.yaml", "/etc/passwd", 1), false},
	{"layer file escapes", strings.Replace(minimalManifest, "layers/L0-os.yaml", "../x.yaml", 1), false},
	{"bad component name", strings.Replace(minimalManifest, "agent:", "Agent:", 1), false},
	{"bad component kind", strings.Replace(minimalManifest, "kind: app", "kind: robot", 1), false},
	{"no components", strings.Replace(minimalManifest, "  agent: {kind: app, layers: [L0-os]}\n", "  {}\n", 1), false},
	{"component without layers", strings.Replace(minimalManifest, "[L0-os]}", "[]}", 1), false},
	{"bad trust domain", strings.Replace(minimalManifest, "sharness.test", "Sharness", 1), false},
	{"bad level", strings.Replace(minimalLayer, "level: L3", "level: L6", 1), false},
	{"bad host", minimalLayer + "  business: {net: {deny_hosts: [10.0.0.1]}}\n", false},
	{"anchor", strings.Replace(minimalLayer, "max_pids: 64", "max_pids: &n 64", 1), false},
	{"explicit tag", strings.Replace(minimalLayer, "max_pids: 64", "max_pids: !!int 64", 1), false},
	{"duplicate key", minimalLayer + "name: again\n", false},
	{"non-string key", minimalLayer + "1: x\n", false},
	{"two documents", minimalLayer + "---\n" + minimalLayer, false},
	{"empty", "", false},
	{"comment only", "# nothing\n", false},
	{"scalar document", "manifest\n", false},
	{"list document", "- pbp: 1\n", false},
	{"timestamp", strings.Replace(minimalManifest, "name: m", "name: 2024-01-01", 1), false},
	{"null field", strings.Replace(minimalManifest, "name: m", "name: ~", 1), false},
	{"null object", minimalLayer + "  subject: ~\n", false},
	{"null limit", strings.Replace(minimalLayer, "max_memory: 64Mi", "max_memory: null", 1), false},
	{"null enum", minimalLayer + "  business: {llm: {on_secret: ~}}\n", false},
	{"null list item", minimalLayer + "  audit: {emit: [~]}\n", false},
	{"integer for a string", strings.Replace(minimalManifest, "name: m", "name: 123", 1), false},
	{"integer for a size", strings.Replace(minimalLayer, "64Mi", "65536", 1), false},
	{"bool for a string", strings.Replace(minimalManifest, "name: m", "name: true", 1), false},
	{"yes for a bool", minimalLayer + "  network: {egress: yes}\n", false},
	{"quoted on for a bool", minimalLayer + "  network: {egress: \"on\"}\n", false},
	{"YES for no_new_privs", strings.Replace(minimalLayer, "max_pids: 64", "no_new_privs: YES", 1), false},
	{"lone CR", strings.Replace(minimalManifest, "name: m\n", "name: m\r", 1), false},
	{"anchor on a key", strings.Replace(minimalManifest, "name: m", "&k name: m", 1), false},
	{"tag on a key", strings.Replace(minimalManifest, "name: m", "!!str name: m", 1), false},
	{"anchor on a nested key", minimalLayer + "  &k network: {egress: false}\n", false},
	{"CRLF", strings.ReplaceAll(minimalManifest, "\n", "\r\n"), true},
}

func TestShapeCases(t *testing.T) {
	for _, tc := range shapeCases {
		t.Run(tc.name, func(t *testing.T) {
			serr := Validate("doc.yaml", []byte(tc.doc))
			gerr := pbp.CheckShape("doc.yaml", []byte(tc.doc))
			if (serr == nil) != tc.accept {
				t.Errorf("schema: got %v, want accept=%v", serr, tc.accept)
			}
			if (gerr == nil) != tc.accept {
				t.Errorf("Go: got %v, want accept=%v", gerr, tc.accept)
			}
			for _, err := range []error{serr, gerr} {
				if err != nil && (!strings.HasPrefix(err.Error(), "doc.yaml") || strings.Contains(err.Error(), "\n")) {
					t.Errorf("not one line naming the file: %q", err)
				}
			}
		})
	}
}

// checkAgreement fails t unless the schema and pbp.CheckShape give data the same verdict, each
// refusal being one line naming the file.
func checkAgreement(t *testing.T, data []byte) {
	t.Helper()
	serr := Validate("doc.yaml", data)
	gerr := pbp.CheckShape("doc.yaml", data)
	switch {
	case serr == nil && gerr != nil:
		t.Errorf("the schema accepts, the Go decoder refuses: %v\n%s", gerr, data)
	case serr != nil && gerr == nil:
		t.Errorf("the schema refuses, the Go decoder accepts: %v\n%s", serr, data)
	}
	for _, err := range []error{serr, gerr} {
		if err != nil && (!strings.HasPrefix(err.Error(), "doc.yaml") || strings.ContainsAny(err.Error(), "\n\r")) {
			t.Errorf("not one line naming the file: %q", err)
		}
	}
}

// FuzzSchemaAgreement: on any bytes, the schema and the Go decoder agree.
func FuzzSchemaAgreement(f *testing.F) {
	for _, tc := range shapeCases {
		f.Add([]byte(tc.doc))
	}
	for _, file := range corpus(f) {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkAgreement(t, data)
	})
}

// replacements are the values TestAgreementOnMutations puts in place of each value, one at a time.
var replacements = []string{
	"~", `""`, "x", "0", "1", "-1", "65535", "65536", "2147483648", "9007199254740991", "9007199254740992",
	"true", "false", "yes", "off", `"1"`, "1.5", "[]", "[x]", "[1]", "[~]", "{}", "{x: 1}",
	"64Mi", "30m", "L3-x", "agent", "app", "/tmp", "a/b", "CAP_X_Y", "example.com", "docker-default", "refuse",
	"sha256:" + strings.Repeat("0", 64), "2024-01-01", "!!str x", "&a x", "*a",
}

var allMutations = flag.Bool("all-mutations", false, "TestAgreementOnMutations: check every mutation, not one in 20")

// TestAgreementOnMutations replaces each value of the valid documents, one at a time, with
// values of every type and spelling, adds an unknown key to every mapping and drops each key, and
// checks the schema and the Go decoder agree on every result.
func TestAgreementOnMutations(t *testing.T) {
	// Between them these reach every field of both kinds.
	var docs [][]byte
	for _, tc := range shapeCases {
		if tc.name == "minimal manifest" || tc.name == "full layer" {
			docs = append(docs, []byte(tc.doc))
		}
	}
	full, err := os.ReadFile(filepath.Join(policiesDir, "testdata", "full", "manifest.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	docs = append(docs, full)
	stride := 20 // the whole sweep (go test -all-mutations) takes a minute or more
	switch {
	case *allMutations:
		stride = 1
	case testing.Short():
		stride = 100
	}
	n := 0
	for _, data := range docs {
		for _, m := range mutations(t, data, stride) {
			n++
			checkAgreement(t, m)
			if t.Failed() {
				return
			}
		}
	}
	t.Logf("%d mutations agree", n)
}

// mutations returns every stride-th variant of one document.
func mutations(t *testing.T, data []byte, stride int) [][]byte {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		t.Fatal(err)
	}
	var nodes []*yaml.Node // every node under the document
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		for _, c := range n.Content {
			nodes = append(nodes, c)
			walk(c)
		}
	}
	walk(&root)
	var out [][]byte
	i := 0
	emit := func() {
		if i++; (i-1)%stride != 0 {
			return
		}
		b, err := yaml.Marshal(&root)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	for _, n := range nodes {
		saved := *n
		for _, r := range replacements {
			var rn yaml.Node
			if err := yaml.Unmarshal([]byte("v: "+r), &rn); err != nil {
				continue // "*a": an alias to nothing
			}
			*n = *rn.Content[0].Content[1]
			emit()
		}
		*n = saved
		if n.Kind == yaml.MappingNode {
			saved := n.Content
			n.Content = append(slices.Clone(saved), &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: "zz"}, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: "1"})
			emit()
			for i := 0; i+1 < len(saved); i += 2 {
				n.Content = slices.Delete(slices.Clone(saved), i, i+2)
				emit()
			}
			n.Content = saved
		}
	}
	return out
}

// valueTemplates hold one string value (@V@) in every string field of both kinds, and as a
// component name.
var valueTemplates = func() []string {
	m := func(s string) string {
		return "pbp: 1\nkind: manifest\nname: m\ntrust_domain: sharness.test\n" +
			"layers: [{id: L0-os, file: a.yaml, sha256: " + zeroHash + "}]\n" +
			"components: {agent: {kind: app, layers: [L0-os]}}\nedges: [{from: agent, to: agent}]\n" + s
	}
	l := func(s string) string { return "pbp: 1\nkind: layer\nlevel: L3\nname: x\npolicy:\n  " + s + "\n" }
	return []string{
		strings.Replace(m(""), "name: m", "name: @V@", 1),
		strings.Replace(m(""), "sharness.test", "@V@", 1),
		strings.Replace(m(""), "id: L0-os", "id: @V@", 1),
		strings.Replace(m(""), "a.yaml", "@V@", 1),
		strings.Replace(m(""), zeroHash, "@V@", 1),
		strings.Replace(m(""), "{agent:", "{@V@:", 1),
		strings.Replace(m(""), "kind: app", "kind: @V@", 1),
		strings.Replace(m(""), "layers: [L0-os]", "layers: [@V@]", 1),
		strings.Replace(m(""), "from: agent", "from: @V@", 1),
		strings.Replace(m(""), "to: agent", "to: @V@", 1),
		strings.Replace(l("{}"), "level: L3", "level: @V@", 1),
		strings.Replace(l("{}"), "name: x", "name: @V@", 1),
		l("subject: {image: @V@, entrypoint: [@V@]}"),
		l("subject: {code_sha256: @V@}"),
		l("process: {capabilities: [@V@]}"),
		l("process: {max_memory: @V@}"),
		l("process: {max_runtime: @V@}"),
		l("files: {protected: [@V@]}"),
		l("files: {tmpfs: [{path: @V@, size: 1Mi}]}"),
		l("files: {tmpfs: [{path: /tmp, size: @V@}]}"),
		l("files: {volumes: [{name: @V@, target: /w}]}"),
		l("files: {volumes: [{name: w, target: @V@}]}"),
		l("syscalls: {base: @V@, allow: [@V@], deny: [@V@]}"),
		l("business: {net: {callers: [{caller: @V@}]}}"),
		l("business: {net: {callers: [{caller: agent, hosts: [@V@], presets: [@V@]}]}}"),
		l("business: {net: {deny_hosts: [@V@]}}"),
		l("business: {llm: {upstream: @V@, models: [@V@]}}"),
		l("business: {llm: {on_secret: @V@}}"),
		l("business: {kms: {ops: [@V@]}, bash: {profiles: [@V@]}}"),
		l("business: {fs: {max_file_size: @V@}}"),
		l("audit: {emit: [@V@]}"),
	}
}()

// FuzzValueAgreement puts one string, quoted, in each string field and checks the schema's
// patterns and the Go checks (regular expressions, path.Clean, fs.ValidPath) agree on it.
func FuzzValueAgreement(f *testing.F) {
	for _, s := range []string{"", "x", "a/b", "./", "../a", "a/../b", "...", ".a/", "/", "/tmp", "/tmp/", "//x", "/a/./b",
		"64Mi", "0", "1Gi", "10000000000000Ki", "8388607Gi", "8388608Gi", "8589934592Mi", "8796093022208Ki", "9999999999999", "30m", "1000000000s", "L3-x", "L6-x", "agent", "Agent", "app",
		"CAP_NET_RAW", "CAP_", "*.example.com", "example.com.", "1.2.3.4", "docker-default", "refuse", "redact",
		"sha256:" + strings.Repeat("a", 64), "a\nb", "a\u00e9", "L0-os\n", "x\x00y"} {
		for i := range valueTemplates {
			f.Add(uint8(i), s)
		}
	}
	f.Fuzz(func(t *testing.T, i uint8, s string) {
		tmpl := valueTemplates[int(i)%len(valueTemplates)]
		checkAgreement(t, []byte(strings.ReplaceAll(tmpl, "@V@", strconv.Quote(s))))
	})
}
