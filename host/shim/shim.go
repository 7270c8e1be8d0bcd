// Package shim is sharness-runtime, the OCI runtime that turns a compiled policy from a Setting
// into a Boundary (docs/architecture.md, "The runtime shim"; issues 6 and 16). Run reads runc's
// command line (host/shim/runc), decides it, and either refuses it, writing a Refusal to runc's
// --log in runc's format, or hands it over to runc with the same argv.
//
// Deciding: create, run and restore read the bundle's config.json; exec and update find the
// container's through `runc state`. The container's marker (Identify) names its component and
// policy, and the spec is compared with the component's compiled config.json under PolicyPath
// ($SHARNESS_RUNTIME_POLICIES or DefaultRoot); a missing or unreadable compiled policy is a
// refusal. An unmarked container passes through unchanged unless /etc/sharness-ai/strict exists
// (strict mode), where it is refused. The comparison is an allowlist of the whole runtime spec
// (allow.go): every field of runtime-spec v1.3.0 has one rule (the compiled value, narrower by a
// named rule, or the engine's, recognised exactly), a field without one is refused when set, and
// TestRulesCoverTheSpec holds the table complete by reflection. Check, CheckProcess (exec) and
// CheckResources (update) apply it and are pure: what they need from the host (each bind source
// opened and described, each hook's program) comes in as Facts, gathered first (host.Resolve).
// An empty result is the only "allowed". Narrow adds the policy's masked and read-only paths and
// its mounts' nosuid, nodev and noexec, Confine and ConfineProcess put the process under the
// policy's Landlock domain (through the helper, host/shim/restrict), and the bind sources are
// handed to runc resolved; every error on the way is a refusal.
//
// A component's container is also held to what the engine and the session say of it
// (checkBelonging, identity.go, session.go): the code recorded for it at install, the networks its
// compiled edges name, its own project's volumes, its compiled health check, and its project's
// session record (the policy, host folders and inputs the person gave at `up`). An unmarked
// container is refused when it is a component (its image or code), sits on a SHarness network or
// volume (by name or host path), binds the engine's state, or joins a SHarness container's
// namespaces; a test fixture its policy lists is held to that and to no host path.
//
// What it does not guarantee:
//   - The agent's code is the caller's: a container that claims to be the agent runs under the
//     agent's (narrowest) policy whatever its image. Anyone with the Docker API can name runc
//     instead, even where this runtime is the default; nothing but the engine's own access control
//     (who may reach its socket, or an authorisation plugin) stops that.
//   - A network connected to a running component is seen at its next exec, which is refused and
//     the container killed: every component's compiled health check execs every second
//     (CheckHealth), so it stays attached for up to about a second. A container that claims no
//     component, connected to a SHarness network after it started, is not seen at all.
//   - Any image may claim a listed fixture's name (fixtures' images are not recorded).
//   - The config.json it checks is read again by runc (an exec's process is not: runc gets the
//     checked bytes in a memfd): it must live where only root writes (containerd's bundles do).
//     runc mounts bind sources by the names the shim resolved, later: a folder on such a name
//     renamed in between (by whoever may write its parent) is not seen (see osHost.Resolve).
//   - A host-folder bind (the workspace, the manifest, kms's secrets) must be the session's folder
//     as the host resolves it; what that folder holds (a socket, a mount the host made below it)
//     is not looked into.
//   - Docker's /etc files hold only what the compiled stack makes Docker write (etcfiles.go), but
//     a hosts line may give the container's own hostname any address, and on a host whose
//     resolver Docker reads from elsewhere (systemd-resolved's) net's and the launcher's
//     resolv.conf, the host's copy, is compared with /etc/resolv.conf and refused (fails closed).
//   - Environment: the switches it compares are SHARNESS_AI_* and the Go runtime's (goSwitches).
//     envExceptions lets through, within bounds, what no compiled spec can carry yet: the policy
//     hash or key the person supplies (so an edited compose file can mount another manifest and
//     name its hash), the operator's approval key, the gate's timeout, and, outside strict mode,
//     the offline world's three test switches. Every other variable is the image's and the
//     caller's.
//   - Code is compared by the entrypoint's file alone (the code record, and subject.code_sha256
//     where a policy pins it): nothing the entrypoint loads or executes, and no other file of the
//     image. An unmarked container is compared by its image id, its entrypoint and the files at
//     the components' entrypoint paths: a component's binary copied elsewhere in an image of one's
//     own and run by another name is not recognised (it has no policy volume, network or key). The
//     agent's command and its execs, and every working folder, are the caller's; an exec into
//     another component may run only its compiled health check.
//   - runc's own flags are read only for what they change in the process or the resources: the
//     other flags runc accepts on a create, run or restore (--no-pivot, --no-new-keyring,
//     --preserve-fds, restore's --lsm-profile) pass unexamined, and a restore's checkpoint image
//     is not read.
package shim

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/sharness-ai/sharness/internal/strictjson"
	"github.com/sharness-ai/sharness/policies/compile"
	"github.com/sharness-ai/sharness/policies/keys"
	"github.com/sharness-ai/sharness/policies/pbp"
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

// PolicyPath names a component's compiled config.json under root:
// <root>/<64 hex digits of the hash, without "sha256:">/<component>/config.json. The prefix is
// dropped because a colon in a path breaks `docker -v src:dst` and is the only non-hex byte.
//
// Both values come from the container, so PolicyPath returns "" unless hash is
// "sha256:<64 lower-case hex>" and component is a manifest component name: reading "" fails,
// which refuses the container. Call PolicyDir for the folder.
func PolicyPath(root, hash, component string) string {
	dir := PolicyDir(root, hash)
	if dir == "" || !pbp.ValidComponentName(component) {
		return ""
	}
	return filepath.Join(dir, component, "config.json")
}

// PolicyDir is the folder of one installed policy, or "" when hash is not "sha256:<64 hex>".
func PolicyDir(root, hash string) string {
	if keys.CheckHash(hash) != nil {
		return ""
	}
	return filepath.Join(root, strings.TrimPrefix(hash, "sha256:"))
}

// LoadSpec decodes an OCI config.json. It refuses more than MaxSpecSize bytes, invalid UTF-8,
// trailing data and any object that repeats a key, even in a spelling encoding/json folds to the
// same field (internal/strictjson): runc decodes the same bytes with encoding/json, which takes
// the last of a repeated key and matches keys case-insensitively, and the shim must not read a
// spec runc reads differently. Unknown fields are allowed here, so that an unmarked container
// passes through as under runc; a SHarness container's spec must have none (KnownFields).
func LoadSpec(data []byte) (*specs.Spec, error) {
	if len(data) > MaxSpecSize {
		return nil, fmt.Errorf("load spec: %d bytes, more than %d", len(data), MaxSpecSize)
	}
	if err := strictjson.Check(data, maxSpecDepth); err != nil {
		return nil, fmt.Errorf("load spec: %w", err)
	}
	var s specs.Spec
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("load spec: %w", err)
	}
	return &s, nil
}

// KnownFields refuses a spec with a field runtime-spec v1.3.0 does not have: the allowlist has no
// rule for it, and a newer runc could act on it. Docker 20.10 writes none (testdata/docker-20.10).
func KnownFields(data []byte) error {
	var s specs.Spec
	if err := strictjson.Decode(data, maxSpecDepth, &s); err != nil {
		return fmt.Errorf("load spec: %w", err)
	}
	return nil
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
