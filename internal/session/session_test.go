package session

import (
	"crypto/ed25519"
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sharness-ai/sharness/policies/keys"
	"github.com/sharness-ai/sharness/policies/pbp"
)

const fixture = "../../policies/testdata/full"

func env(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }

func TestLoad(t *testing.T) {
	m, err := pbp.Load(os.DirFS(fixture), "manifest.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		env  map[string]string
		want string // "" means success
	}{
		{"no hash supplied", map[string]string{EnvComponent: "net"}, "no policy hash supplied"},
		{"wrong hash", map[string]string{EnvComponent: "net", EnvPolicyHash: "sha256:" + strings.Repeat("0", 64)}, "the supplied hash is"},
		{"unknown component", map[string]string{EnvComponent: "ghost", EnvPolicyHash: m.Hash}, "names no component"},
		{"right hash", map[string]string{EnvComponent: "net", EnvPolicyHash: m.Hash}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, c, err := Load(fixture, env(tc.env))
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Load: %v", err)
			case tc.want == "" && c.Name != "net":
				t.Fatalf("component %q, want net", c.Name)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "refusing to start")):
				t.Fatalf("Load error %v, want a refusal containing %q", err, tc.want)
			}
		})
	}
}

func TestLoadWithPinnedKey(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"manifest.yaml"} {
		data, _ := os.ReadFile(filepath.Join(fixture, f))
		os.WriteFile(filepath.Join(dir, f), data, 0o644)
	}
	os.CopyFS(filepath.Join(dir, "layers"), os.DirFS(filepath.Join(fixture, "layers")))
	m, err := pbp.Load(os.DirFS(dir), "manifest.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	e := env(map[string]string{EnvComponent: "agent", EnvPolicyKey: keys.Pin(priv.Public().(ed25519.PublicKey))})
	if _, _, err := Load(dir, e); err == nil || !strings.Contains(err.Error(), "no signature") {
		t.Fatalf("Load without a signature: %v, want a refusal", err)
	}
	sig, _ := keys.Sign(m.Hash, priv)
	os.WriteFile(filepath.Join(dir, "manifest.yaml.sig"), sig, 0o644)
	if _, c, err := Load(dir, e); err != nil || c.Name != "agent" {
		t.Fatalf("Load with a good signature: %v", err)
	}
	_, other, _ := ed25519.GenerateKey(rand.Reader)
	bad, _ := keys.Sign(m.Hash, other)
	os.WriteFile(filepath.Join(dir, "manifest.yaml.sig"), bad, 0o644)
	if _, _, err := Load(dir, e); err == nil || !strings.Contains(err.Error(), "not the pinned key") {
		t.Fatalf("Load with another key's signature: %v, want a refusal", err)
	}
	malformed := env(map[string]string{EnvComponent: "agent", EnvPolicyKey: "ed25519:nope"})
	if _, _, err := Load(dir, malformed); err == nil || !strings.Contains(err.Error(), "is not of the form") {
		t.Fatalf("Load with a malformed pin: %v, want a refusal", err)
	}
}
