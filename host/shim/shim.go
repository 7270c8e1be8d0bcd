// Package shim holds the decisions of sharness-runtime, the OCI runtime that turns a compiled
// policy from a Setting into a Boundary (DESIGN.md §5, issue 6): it reads the config.json the
// engine wrote into a bundle, finds which SHarness component and policy the container claims to
// be, and compares that spec with the component's compiled one. Check, CheckProcess and
// CheckResources are pure: they return every way the engine's spec is wider than the policy, and
// an empty result is the only "allowed".
//
// What it does not guarantee:
//   - The identity is the container's own claim (annotations, else its environment). A container
//     that claims another component gets that component's policy, so it is bounded by the widest
//     component of the installed manifest, not by its own; a container that claims nothing is not
//     checked at all unless the caller runs in strict mode.
//   - Mount sources are compared lexically (no symlink resolution, no stat): a symlink on the host
//     that points at the Docker socket and is bound at a listed destination is not seen here.
//   - Seccomp is compared by syscall name: argument filters are not compared (see checkSeccomp).
//   - Hooks, rlimits, sysctls the policy does not name, the OOM score, the CPU and I/O limits and
//     the process's arguments and environment are not compared: the image and the engine decide
//     them.
//   - The compiler records no code hash in config.json (pbp.Component.CodeSHA256 stops at the
//     manifest), so no image digest is compared.
package shim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/sharness-ai/sharness/internal/strictjson"
	"github.com/sharness-ai/sharness/policies/compile"
)

// DefaultRoot is the root-owned folder `sharness-ai install` writes compiled policies into.
const DefaultRoot = "/etc/sharness-ai/policies"

// Environment variables the compose file gives every SHarness container (compose/render.go):
// Docker 20.10 does not copy container labels into the OCI annotations, so the environment is
// where the shim finds them.
const (
	EnvComponent = "SHARNESS_AI_COMPONENT"
	EnvPolicy    = "SHARNESS_AI_POLICY"
)

// MaxSpecSize caps a config.json. Docker's are a few KiB, ours about 20 KiB (the seccomp rules).
const MaxSpecSize = 4 << 20

// maxSpecDepth is deeper than any OCI spec nests (about 6).
const maxSpecDepth = 32

var (
	hashPattern      = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
	componentPattern = regexp.MustCompile(`^[a-z][a-z0-9-]{0,30}$`) // pbp's component names
)

// PolicyPath names a component's compiled config.json under root:
// <root>/<64 hex digits of the hash, without "sha256:">/<component>/config.json. The prefix is
// dropped because a colon in a path breaks `docker -v src:dst` and is the only non-hex byte.
//
// Both values come from the container, so PolicyPath returns "" unless hash is
// "sha256:<64 lower-case hex>" and component is a manifest component name: reading "" fails,
// which refuses the container. Call PolicyDir for the folder.
func PolicyPath(root, hash, component string) string {
	dir := PolicyDir(root, hash)
	if dir == "" || !componentPattern.MatchString(component) {
		return ""
	}
	return filepath.Join(dir, component, "config.json")
}

// PolicyDir is the folder of one installed policy, or "" when hash is not "sha256:<64 hex>".
func PolicyDir(root, hash string) string {
	if !hashPattern.MatchString(hash) {
		return ""
	}
	return filepath.Join(root, strings.TrimPrefix(hash, "sha256:"))
}

// LoadSpec decodes an OCI config.json. It refuses more than MaxSpecSize bytes, invalid UTF-8,
// trailing data and any object that repeats a key, even in a spelling encoding/json folds to the
// same field (strictjson; DESIGN.md §10): runc decodes the same bytes with encoding/json, and the
// shim must not read a spec runc reads differently. Unknown fields are allowed: engines and newer
// spec versions add them.
func LoadSpec(data []byte) (*specs.Spec, error) {
	if len(data) > MaxSpecSize {
		return nil, fmt.Errorf("load spec: %d bytes, more than %d", len(data), MaxSpecSize)
	}
	if err := strictjson.Check(data, maxSpecDepth); err != nil {
		return nil, fmt.Errorf("load spec: %w", err)
	}
	var s specs.Spec
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("load spec: %w", err)
	}
	if dec.More() {
		return nil, errors.New("load spec: trailing data")
	}
	return &s, nil
}

// Identify reads which component and policy a spec claims to be. Annotations
// (compile.AnnotationComponent and compile.AnnotationPolicy) and the process environment
// (EnvComponent, EnvPolicy) are both read; marked is true when any of the four is present.
// A value is "" (which the caller refuses) when it is missing while the other is present, when
// the annotation and the environment disagree, or when the environment repeats the variable with
// different values: a container must not be one component to the shim and another to itself.
func Identify(s *specs.Spec) (component, policy string, marked bool) {
	if s == nil {
		return "", "", false
	}
	var env []string
	if s.Process != nil {
		env = s.Process.Env
	}
	component, cm := claim(s.Annotations, compile.AnnotationComponent, env, EnvComponent)
	policy, pm := claim(s.Annotations, compile.AnnotationPolicy, env, EnvPolicy)
	return component, policy, cm || pm
}

// claim returns the one value the annotation and the environment agree on.
func claim(annotations map[string]string, key string, env []string, name string) (string, bool) {
	var values []string
	if v, ok := annotations[key]; ok {
		values = append(values, v)
	}
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, name+"="); ok {
			values = append(values, v)
		}
	}
	if len(values) == 0 {
		return "", false
	}
	for _, v := range values[1:] {
		if v != values[0] {
			return "", true
		}
	}
	return values[0], true
}

// Refusal is one way a spec is wider than its policy. Field names the OCI field with a JSON path
// (root.readonly, mounts[/var/run/docker.sock], linux.namespaces.network); Want says what the
// policy allows and Got what the spec asks for.
type Refusal struct {
	Field, Want, Got string
}

func (r Refusal) Error() string {
	return fmt.Sprintf("%s: policy allows %s, spec has %s", r.Field, r.Want, r.Got)
}
