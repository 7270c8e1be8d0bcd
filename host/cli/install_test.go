package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sharness-ai/sharness/host/shim"
)

func TestInstall(t *testing.T) {
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
