// Package session is how a component, inside its container, finds out who it is and under which
// policy it runs: it loads the manifest mounted read-only into every container, refuses to go on
// unless the manifest is the one the person supplied (its hash, or a signature by a pinned key),
// and returns the component's effective policy.
//
// It does not make the mount trustworthy: it only refuses a manifest other than the supplied one.
package session

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/sharness-ai/sharness/policies/keys"
	"github.com/sharness-ai/sharness/policies/pbp"
)

// PolicyDir is where the compose file mounts the manifest's folder, read-only, in every container.
const PolicyDir = "/etc/sharness/policy"

// Environment variables a component reads.
const (
	EnvComponent  = "SHARNESS_AI_COMPONENT"   // the component's name in the manifest
	EnvPolicyHash = "SHARNESS_AI_POLICY_HASH" // the hash the person supplied
	EnvPolicyKey  = "SHARNESS_AI_POLICY_KEY"  // or: a pinned Ed25519 key, ed25519:<base64> (sharness-ai keygen prints it)
)

// Load reads the manifest in dir and returns it with the component named by the environment.
func Load(dir string, getenv func(string) string) (*pbp.Manifest, *pbp.Component, error) {
	want, pin, name := getenv(EnvPolicyHash), getenv(EnvPolicyKey), getenv(EnvComponent)
	if want == "" && pin == "" {
		return nil, nil, errors.New("refusing to start: no policy hash supplied (set " + EnvPolicyHash + " to the hash you trust, from `sharness-ai hash`, or " + EnvPolicyKey + " to the key whose signature you trust)")
	}
	m, err := pbp.Load(os.DirFS(dir), "manifest.yaml")
	if err != nil {
		return nil, nil, fmt.Errorf("refusing to start: policy in %s: %w", dir, err)
	}
	if want != "" && m.Hash != want {
		return nil, nil, fmt.Errorf("refusing to start: the policy in %s has hash %s, the supplied hash is %s", dir, m.Hash, want)
	}
	if want == "" {
		pub, err := keys.ParsePin(pin)
		if err != nil {
			return nil, nil, fmt.Errorf("refusing to start: %w", err)
		}
		sig, err := os.ReadFile(filepath.Join(dir, "manifest.yaml.sig"))
		if err != nil {
			return nil, nil, fmt.Errorf("refusing to start: no signature of policy %s: %w", m.Hash, err)
		}
		if err := keys.Verify(m.Hash, sig, pub); err != nil {
			return nil, nil, fmt.Errorf("refusing to start: %w", err)
		}
	}
	c := m.Component(name)
	if c == nil {
		return nil, nil, fmt.Errorf("refusing to start: %s=%q names no component of policy %s", EnvComponent, name, m.Hash)
	}
	return m, c, nil
}
