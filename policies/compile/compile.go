package compile

import (
	"encoding/json"
	"fmt"
	"path"
	"sort"

	"github.com/sharness-ai/sharness/policies/pbp"
)

// Artefacts maps a slash-separated path, relative to the output folder, to its bytes.
type Artefacts map[string][]byte

// Paths returns the artefact paths in sorted order.
func (a Artefacts) Paths() []string {
	out := make([]string, 0, len(a))
	for p := range a {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// Dir is the folder, relative to the output folder, that holds the per-component artefacts.
const Dir = "compiled"

// SeccompPath and SpecPath name a component's artefacts.
func SeccompPath(component string) string { return path.Join(Dir, component, "seccomp.json") }

// SpecPath names a component's OCI runtime spec.
func SpecPath(component string) string { return path.Join(Dir, component, "config.json") }

// Compile makes every component's seccomp profile and OCI spec, and a test world's fixtures.json.
func Compile(m *pbp.Manifest) (Artefacts, error) {
	out := Artefacts{}
	for _, c := range m.Components {
		docker, oci, err := Seccomp(SeccompInput{Capabilities: c.Capabilities, Allow: c.SyscallAllow, Deny: c.SyscallDeny})
		if err != nil {
			return nil, fmt.Errorf("component %s: seccomp: %w", c.Name, err)
		}
		spec, err := Spec(m, c, oci)
		if err != nil {
			return nil, err
		}
		raw, err := json.MarshalIndent(spec, "", "  ")
		if err != nil {
			return nil, fmt.Errorf("component %s: encode spec: %w", c.Name, err)
		}
		out[SpecPath(c.Name)] = append(raw, '\n')
		out[SeccompPath(c.Name)] = docker
	}
	fx, err := fixtures(m)
	if err != nil {
		return nil, err
	}
	if fx != nil {
		out[FixturesPath] = fx
	}
	return out, nil
}
