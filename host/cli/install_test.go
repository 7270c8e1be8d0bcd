package cli

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sharness-ai/sharness/host/shim"
	"github.com/sharness-ai/sharness/testkit/enginetest"
)

// TestInstallWithoutImages: a component whose image is not on the engine is named, and the
// person is told the shim refuses every component until the code is recorded.
func TestInstallWithoutImages(t *testing.T) {
	root := filepath.Join(t.TempDir(), "policies")
	code, _, errOut := run(t, "install", "-f", filepath.Join(repoRoot, DefaultManifest), "--root", root)
	if code == ExitOK || !strings.Contains(errOut, "record code: agent (image sharness/agent:dev)") || !strings.Contains(errOut, "refuses every component") {
		t.Fatalf("install without images: exit %d: %s", code, errOut)
	}
}

// componentImages makes the fake engine hold an image per component of the manifests the tests
// install, each with its entrypoint's file ("code of <name>").
func componentImages(t *testing.T) {
	t.Helper()
	e := &enginetest.Engine{}
	for _, name := range []string{"agent", "launcher", "net", "llm", "kms", "bash", "fs"} {
		sum := sha256.Sum256([]byte(name))
		e.Images = append(e.Images, enginetest.Image{Refs: []string{"sharness/" + name + ":dev"}, ID: "sha256:" + hex.EncodeToString(sum[:]),
			Files: map[string][]byte{"/sharness-" + name: []byte("code of " + name)}})
	}
	old := testAPI
	testAPI = e
	t.Cleanup(func() { testAPI = old })
}

func TestInstall(t *testing.T) {
	componentImages(t)
	root := filepath.Join(t.TempDir(), "policies")
	manifest := filepath.Join(repoRoot, DefaultManifest)
	code, out, errOut := run(t, "install", "-f", manifest, "--root", root, "--json")
	if code != ExitOK {
		t.Fatalf("install: exit %d: %s", code, errOut)
	}
	var res struct {
		Policy     string   `json:"policy"`
		Dir        string   `json:"dir"`
		Components []string `json:"components"`
		Already    bool     `json:"already"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("install --json: %v: %s", err, out)
	}
	if res.Already || len(res.Components) == 0 || res.Dir != shim.PolicyDir(root, res.Policy) {
		t.Fatalf("install --json = %+v", res)
	}
	// The code record: each component's image id and its entrypoint's SHA-256, read from the image.
	data, err := os.ReadFile(filepath.Join(res.Dir, shim.CodeFile))
	if err != nil {
		t.Fatal(err)
	}
	rec, err := shim.ParseCodeRecord(data)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range res.Components {
		sum := sha256.Sum256([]byte("code of " + c))
		id := sha256.Sum256([]byte(c))
		want := shim.Code{Image: "sha256:" + hex.EncodeToString(id[:]), Path: "/sharness-" + c, SHA256: "sha256:" + hex.EncodeToString(sum[:])}
		if rec.Components[c] != want {
			t.Errorf("code of %s: %+v, want %+v", c, rec.Components[c], want)
		}
	}
	for _, c := range res.Components {
		for _, f := range []string{"config.json", "seccomp.json"} {
			want, err := os.ReadFile(filepath.Join(repoRoot, "compiled", c, f))
			if err != nil {
				t.Fatal(err)
			}
			name := filepath.Join(res.Dir, c, f)
			if f == "config.json" && name != shim.PolicyPath(root, res.Policy, c) {
				t.Errorf("installed at %s, the shim reads %s", name, shim.PolicyPath(root, res.Policy, c))
			}
			got, err := os.ReadFile(name)
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("%s differs from compiled/%s/%s (err %v)", name, c, f, err)
			}
			if fi, err := os.Stat(name); err != nil || fi.Mode().Perm() != 0o644 {
				t.Errorf("%s: mode %v, want 0644 (err %v)", name, fi.Mode(), err)
			}
		}
		if fi, err := os.Stat(filepath.Join(res.Dir, c)); err != nil || fi.Mode().Perm() != 0o755 {
			t.Errorf("%s: mode %v, want 0755 (err %v)", c, fi.Mode(), err)
		}
	}
	if fi, err := os.Stat(res.Dir); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("%s: mode %v, want 0755 (err %v)", res.Dir, fi.Mode(), err)
	}

	code, out, errOut = run(t, "install", "-f", manifest, "--root", root)
	if code != ExitOK || !strings.Contains(out, "already installed") {
		t.Errorf("second install: exit %d, %q %q; want it left as it is", code, out, errOut)
	}

	config := filepath.Join(res.Dir, res.Components[0], "config.json")
	if err := os.WriteFile(config, []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = run(t, "install", "-f", manifest, "--root", root)
	if code == ExitOK || !strings.Contains(errOut, "different policy") {
		t.Errorf("install over a different policy: exit %d, %q; want an error", code, errOut)
	}
	if got, _ := os.ReadFile(config); string(got) != "{}\n" {
		t.Error("install rewrote an existing policy")
	}
	code, out, errOut = run(t, "install", "-f", manifest, "--root", root, "--replace")
	if code != ExitOK || !strings.Contains(out, "installed policy") {
		t.Errorf("install --replace: exit %d, %q %q", code, out, errOut)
	}
	if got, _ := os.ReadFile(config); string(got) == "{}\n" || len(got) < 100 {
		t.Errorf("install --replace left the other policy: %q", got)
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("%s holds %d entries, want the policy folder alone (no temporary folder left)", root, len(entries))
	}
}

// TestInstallTestWorld: the world's policy installs its fixtures.json beside its components, as
// compiled, and says it is a test world; the default policy's folder holds none.
func TestInstallTestWorld(t *testing.T) {
	componentImages(t)
	root := filepath.Join(t.TempDir(), "policies")
	code, out, errOut := run(t, "install", "-f", filepath.Join(repoRoot, "policies", "world", "manifest.yaml"), "--root", root, "--json")
	if code != ExitOK {
		t.Fatalf("install: exit %d: %s", code, errOut)
	}
	var res struct {
		Policy   string   `json:"policy"`
		Dir      string   `json:"dir"`
		Fixtures []string `json:"fixtures"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if strings.Join(res.Fixtures, ",") != "model,world" {
		t.Errorf("fixtures %v, want model and world", res.Fixtures)
	}
	want, err := os.ReadFile(filepath.Join(repoRoot, "compose", "world", "compiled", "fixtures.json"))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(res.Dir, "fixtures.json")); err != nil || !bytes.Equal(got, want) {
		t.Errorf("%s/fixtures.json differs from compose/world/compiled/fixtures.json (err %v):\n%s", res.Dir, err, got)
	}
	code, out, errOut = run(t, "install", "-f", filepath.Join(repoRoot, DefaultManifest), "--root", root, "--json")
	if code != ExitOK {
		t.Fatalf("install: exit %d: %s", code, errOut)
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(res.Dir, "fixtures.json")); err == nil || len(res.Fixtures) != 0 {
		t.Errorf("the default policy installs fixtures %v (stat err %v)", res.Fixtures, err)
	}
}
