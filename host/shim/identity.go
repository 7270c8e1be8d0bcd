package shim

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/sharness-ai/sharness/internal/strictjson"
	"github.com/sharness-ai/sharness/policies/compile"
	"github.com/sharness-ai/sharness/policies/pbp"
)

// The shim knows a container by what it runs and where it is attached, not only by what it
// claims (issue 16, parts 2 and 3; docs/architecture.md, "The runtime shim"):
//   - a component's container runs the code recorded for it on this machine (CodeRecord), and is
//     attached to exactly the networks its compiled edges name, each the policy's own, internal
//     but for net's egress network (CheckNetworks);
//   - a container that claims no component is refused when it runs a component's code or joins
//     a SHarness network, unless the installed policy lists it as a test fixture (CheckUnmarked).

// CodeFile names the record of each component's code next to a policy's compiled specs:
// <root>/<hash hex>/code.json, written by `sharness-ai install` from the images on this machine.
const CodeFile = "code.json"

// CodeRecord is what each component's image holds, as `sharness-ai install` read it from the
// engine's image: the image id, the entrypoint (process.args[0] of the compiled spec) and that
// file's SHA-256. It lives in the root-owned policy folder, beside the compiled specs the shim
// already trusts for the same reason: only root writes there.
type CodeRecord struct {
	Components map[string]Code `json:"components"`
}

// Code is one component's recorded code.
type Code struct {
	Image  string `json:"image"`  // "sha256:<hex>", the engine's image id
	Path   string `json:"path"`   // the entrypoint, absolute, inside the image
	SHA256 string `json:"sha256"` // "sha256:<hex>" of that file
}

// ParseCodeRecord decodes a code.json strictly (no unknown or repeated keys).
func ParseCodeRecord(data []byte) (CodeRecord, error) {
	var r CodeRecord
	if err := strictjson.Decode(data, 8, &r); err != nil {
		return CodeRecord{}, fmt.Errorf("code record: %w", err)
	}
	for name, c := range r.Components {
		if !pbp.ValidComponentName(name) || !strings.HasPrefix(c.Path, "/") || !validDigest(c.SHA256) || !validDigest(c.Image) {
			return CodeRecord{}, fmt.Errorf("code record: component %q: want a name, an absolute path and two sha256:<64 hex> digests", name)
		}
	}
	return r, nil
}

func validDigest(s string) bool {
	hex, ok := strings.CutPrefix(s, "sha256:")
	if !ok || len(hex) != 64 {
		return false
	}
	for _, c := range hex {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// FixturesFile names a test-world policy's list of its fixtures (compile writes it).
const FixturesFile = "fixtures.json"

// Fixtures are the offline world's containers a test-world policy admits, by name, with the
// networks (compose names) each may join.
type Fixtures struct {
	Fixtures map[string]struct {
		Networks []string `json:"networks"`
	} `json:"fixtures"`
}

// EnvFixture marks a test fixture's container: SHARNESS_AI_FIXTURE=<name> with
// SHARNESS_AI_POLICY=<the policy that lists it>.
const EnvFixture = "SHARNESS_AI_FIXTURE"

// CheckNetworks holds a component's container to its compiled networks: every network the
// engine attached it to must be one its spec names (compile.AnnotationNetworks), made by compose
// for this container's project under this policy (the policy label, the project's prefix and
// compose's own labels), a bridge, and internal with no address on the host's side unless it is
// the egress network and the component is net. "none" (no network at all) is always allowed.
// Missing networks are not refused: a container without one of its edges is narrower.
func CheckNetworks(want *specs.Spec, r EngineRecord) []Reason {
	allowed := splitList(want.Annotations[compile.AnnotationNetworks])
	policy := want.Annotations[compile.AnnotationPolicy]
	net := want.Annotations[compile.AnnotationKind] == string(pbp.KindNet)
	var out []Reason
	for _, n := range r.Networks {
		if n.Name == "none" && n.Driver == "null" {
			continue
		}
		field := "network[" + n.Name + "]"
		name := n.Labels[labelComposeNetwork]
		switch {
		case !slices.Contains(allowed, name):
			out = append(out, Reason{Field: field, Want: "one of " + noneIfEmpty(allowed) + " (the compiled edges)", Got: describeNetwork(n)})
		case r.Project == "" || n.Name != r.Project+"_"+name || n.Labels[labelProject] != r.Project:
			out = append(out, Reason{Field: field, Want: "network " + name + " of this container's compose project " + fmt.Sprintf("%q", r.Project), Got: describeNetwork(n)})
		case n.Labels[labelPolicy] != policy:
			out = append(out, Reason{Field: field, Want: "a network of policy " + policy, Got: describeNetwork(n)})
		case n.Driver != "bridge":
			out = append(out, Reason{Field: field, Want: "a bridge network", Got: describeNetwork(n)})
		case name == pbp.EgressNetwork && !net:
			out = append(out, Reason{Field: field, Want: "no egress network (net alone joins it)", Got: describeNetwork(n)})
		case name != pbp.EgressNetwork && (!n.Internal || n.Options[inhibitIPv4] != "true"):
			out = append(out, Reason{Field: field, Want: "an internal network with no address on the host (internal: true, " + inhibitIPv4 + ")", Got: describeNetwork(n)})
		}
	}
	return out
}

// CheckNetworkNames is CheckNetworks on the record alone: every network the container is on is
// "none" or <project>_<a compiled network>.
func CheckNetworkNames(want *specs.Spec, r EngineRecord) []Reason {
	allowed := splitList(want.Annotations[compile.AnnotationNetworks])
	var out []Reason
	for _, n := range r.Networks {
		name, ok := strings.CutPrefix(n.Name, r.Project+"_")
		if n.Name == "none" || r.Project != "" && ok && slices.Contains(allowed, name) {
			continue
		}
		out = append(out, Reason{Field: "network[" + n.Name + "]", Want: "one of " + noneIfEmpty(allowed) + " of project " + fmt.Sprintf("%q", r.Project) + " (the compiled edges)", Got: n.Name})
	}
	return out
}

// CheckVolumes holds a component's named volumes to its own project and policy: a policy volume
// (compile.VolumeRoot/<name>, compile.IdentityRoot/<role>) must be the volume compose made for
// this container's project, <project>_<name>, labelled with the container's policy, so that
// another stack's volume of the same name (its audit record, its identity socket) is not
// mounted in its place.
func CheckVolumes(want *specs.Spec, r EngineRecord) []Reason {
	compiled := map[string]string{}
	for _, m := range want.Mounts {
		compiled[m.Destination] = m.Source
	}
	policy := want.Annotations[compile.AnnotationPolicy]
	var out []Reason
	for _, v := range r.Volumes {
		name, ok := policyVolume(compiled[v.Destination])
		field := "mounts[" + v.Destination + "]"
		switch {
		case !ok:
			out = append(out, Reason{Field: field, Want: "no named volume (the policy lists none here)", Got: "volume " + v.Name})
		case r.Project == "" || v.Name != r.Project+"_"+name || v.Labels[labelProject] != r.Project:
			out = append(out, Reason{Field: field, Want: "volume " + r.Project + "_" + name + " of this container's compose project", Got: "volume " + v.Name})
		case v.Labels[labelPolicy] != policy:
			out = append(out, Reason{Field: field, Want: "a volume of policy " + policy, Got: "volume " + v.Name + " of policy " + fmt.Sprintf("%q", v.Labels[labelPolicy])})
		}
	}
	return out
}

// healthEvery is the longest interval a component's health check may have: each check is an exec,
// at which the shim sees a network connected since the start and cuts the container.
const healthEvery = time.Second

// CheckHealth holds a container to its compiled health check (compile.AnnotationHealth): the
// engine must run exactly it, by exec, at least every healthEvery. Without it a network connected
// to the running container would wait for an exec that may never come. A policy without a health
// command (bash's sandboxes aside, none) holds the container to none.
func CheckHealth(want *specs.Spec, r EngineRecord) []Reason {
	raw, ok := want.Annotations[compile.AnnotationHealth]
	if !ok {
		return nil
	}
	var cmd []string
	if err := strictjson.Decode([]byte(raw), 4, &cmd); err != nil || len(cmd) == 0 {
		return []Reason{{Field: "healthcheck", Want: "a compiled health command (" + compile.AnnotationHealth + ")", Got: fmt.Sprintf("%q (%v)", raw, err)}}
	}
	test := append([]string{"CMD"}, cmd...)
	every := r.HealthEvery
	if every == 0 {
		every = 30 * time.Second // the engine's default
	}
	if !slices.Equal(r.Health, test) || every > healthEvery {
		return []Reason{{Field: "healthcheck", Want: fmt.Sprintf("%q every %s at most (the shim's watch on the networks)", test, healthEvery),
			Got: fmt.Sprintf("%q every %s", r.Health, every)}}
	}
	return nil
}

// inhibitIPv4 keeps the host's side of a bridge without an address: an internal network otherwise
// still reaches the host's services through its gateway (compose/render.go).
const inhibitIPv4 = "com.docker.network.bridge.inhibit_ipv4"

// labelPolicy marks every network and volume compose makes for a policy (compose/render.go's
// LabelPolicy): the same key as the spec's annotation.
const labelPolicy = compile.AnnotationPolicy

// CheckCodeRecord holds a component's container to the code recorded for it: the entrypoint the
// compiled spec runs, read from the container's root file system, must hash to the record.
// The agent (kind app) runs the caller's code and is not compared: a container that claims to be
// the agent gets the narrowest policy, whatever it runs. hash reads a path inside the root.
func CheckCodeRecord(want *specs.Spec, rec CodeRecord, hash func(path string) (string, error)) []Reason {
	kind := want.Annotations[compile.AnnotationKind]
	if kind == string(pbp.KindApp) {
		return nil
	}
	component := want.Annotations[compile.AnnotationComponent]
	code, ok := rec.Components[component]
	if !ok {
		return []Reason{{Field: "code", Want: "the code recorded for " + component + " on this machine (sharness-ai install records it)", Got: "no record"}}
	}
	if want.Process == nil || len(want.Process.Args) == 0 || want.Process.Args[0] != code.Path {
		return []Reason{{Field: "code", Want: "the compiled entrypoint " + code.Path, Got: "a compiled spec with another"}}
	}
	sum, err := hash(code.Path)
	switch {
	case err != nil:
		return []Reason{{Field: "code[" + code.Path + "]", Want: code.SHA256, Got: err.Error()}}
	case sum != code.SHA256:
		return []Reason{{Field: "code[" + code.Path + "]", Want: code.SHA256 + " (" + component + " as installed; rebuilt? run sharness-ai install)", Got: sum}}
	}
	return nil
}

// CheckUnmarked decides a container that claims no component: refused when it is a component's
// image, runs a component's code (its entrypoint, or a file at a component's entrypoint path), or
// joins a network of any SHarness policy, unless it is a fixture the policy it names lists (and
// then only on that fixture's networks). records are every installed policy's code records;
// fixtures is the named policy's list (nil when it has none or names none).
func CheckUnmarked(s *specs.Spec, r EngineRecord, records []CodeRecord, fixture string, fixtures *Fixtures, policy string, hash func(path string) (string, error)) []Reason {
	var out []Reason
	codes := map[string]string{} // sha256 → component
	images := map[string]string{}
	paths := map[string]bool{}
	for _, rec := range records {
		for name, c := range rec.Components {
			codes[c.SHA256], images[c.Image], paths[c.Path] = name, name, true
		}
	}
	if name, ok := images[r.Image]; ok {
		out = append(out, Reason{Field: "image", Want: "no SHarness component's image outside its policy", Got: r.Image + " (" + name + "'s)"})
	}
	var args []string
	if s.Process != nil {
		args = afterInit(s.Process.Args)
	}
	if len(args) > 0 && strings.HasPrefix(args[0], "/") {
		paths[args[0]] = true
	}
	for _, p := range slices.Sorted(maps.Keys(paths)) {
		if sum, err := hash(p); err == nil && codes[sum] != "" {
			out = append(out, Reason{Field: "code[" + p + "]", Want: "no SHarness component's code outside its policy", Got: sum + " (" + codes[sum] + "'s)"})
		}
	}
	for _, v := range r.Volumes {
		if p, ok := v.Labels[labelPolicy]; ok {
			out = append(out, Reason{Field: "mounts[" + v.Destination + "]", Want: "no SHarness volume for a container that is no component", Got: "volume " + v.Name + " of policy " + p})
		}
	}
	var allowed []string
	if fixture != "" {
		f, ok := fixtures.lookup(fixture)
		if !ok {
			return append(out, Reason{Field: "env[" + EnvFixture + "]", Want: "a fixture the test-world policy " + policy + " lists", Got: fixture})
		}
		allowed = f
	}
	for _, n := range r.Networks {
		p, sharness := n.Labels[labelPolicy]
		if !sharness {
			continue
		}
		name := n.Labels[labelComposeNetwork]
		if fixture == "" || p != policy || !slices.Contains(allowed, name) || n.Name != r.Project+"_"+name {
			out = append(out, Reason{Field: "network[" + n.Name + "]", Want: "no SHarness network for a container that is no component" + fixtureWant(fixture, allowed), Got: describeNetwork(n)})
		}
	}
	return out
}

func (f *Fixtures) lookup(name string) ([]string, bool) {
	if f == nil {
		return nil, false
	}
	x, ok := f.Fixtures[name]
	return x.Networks, ok
}

func fixtureWant(fixture string, allowed []string) string {
	if fixture == "" {
		return ""
	}
	return " (fixture " + fixture + ": " + noneIfEmpty(allowed) + ")"
}

// ParseFixtures decodes a fixtures.json strictly.
func ParseFixtures(data []byte) (*Fixtures, error) {
	var f Fixtures
	if err := strictjson.Decode(data, 8, &f); err != nil {
		return nil, fmt.Errorf("fixtures: %w", err)
	}
	return &f, nil
}

func describeNetwork(n Network) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (driver %s", n.Name, n.Driver)
	if n.Internal {
		b.WriteString(", internal")
	}
	if name, ok := n.Labels[labelComposeNetwork]; ok {
		fmt.Fprintf(&b, ", compose network %s of %q", name, n.Labels[labelProject])
	}
	if p, ok := n.Labels[labelPolicy]; ok {
		fmt.Fprintf(&b, ", policy %s", p)
	}
	b.WriteString(")")
	return b.String()
}

func splitList(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

func noneIfEmpty(l []string) string {
	if len(l) == 0 {
		return "none"
	}
	return strings.Join(l, ", ")
}

// fixtureOf is the fixture a spec claims, "" for none.
func fixtureOf(s *specs.Spec) string {
	if s == nil || s.Process == nil {
		return ""
	}
	v, _ := claim(nil, "", s.Process.Env, EnvFixture)
	return v
}

// procNamespace is a namespace joined through a process: /proc/<pid>/ns/<type>.
var procNamespace = regexp.MustCompile(`^/proc/([1-9][0-9]*)/ns/[a-z_]+$`)

// containerID finds a 64-hex container id in a process's cgroup file (Docker's cgroup is named
// after the container, by either driver).
var containerID = regexp.MustCompile(`[0-9a-f]{64}`)

// unmarkedBinds refuses what a container that claims no component must not bind: a folder of a
// volume compose made for a SHarness policy reached by its host path (the identity volumes hold
// each role's SPIFFE socket), the engine's state or anything holding it (/, /var, the socket), and
// for a test fixture any host path at all but Docker's own /etc files.
func unmarkedBinds(h host, id string, got *specs.Spec, fixture bool) []Reason {
	f := gather(h, id, got)
	var out []Reason
	for _, m := range got.Mounts {
		if mountKind(m) != "bind" {
			continue
		}
		field := "mounts[" + m.Destination + "]"
		s, ok := f.Sources[m.Source]
		switch {
		case !ok || s.Err != "":
			out = append(out, Reason{Field: field, Want: "a source the shim can open", Got: "source " + m.Source + " " + s.Err})
			continue
		case fixture:
			if _, own := engineMounts[m.Destination]; !own {
				out = append(out, Reason{Field: field, Want: "no host path in a test fixture", Got: "source " + describe(m.Source, s)})
				continue
			}
		}
		if name, ok := volumeOf(s.Path); ok {
			labels, err := h.VolumeLabels(name)
			switch {
			case err != nil:
				out = append(out, Reason{Field: field, Want: "a volume the engine can describe", Got: "volume " + name + ": " + err.Error()})
			case labels[labelPolicy] != "":
				out = append(out, Reason{Field: field, Want: "no SHarness volume for a container that is no component", Got: "source " + describe(m.Source, s) + " (volume " + name + " of policy " + labels[labelPolicy] + ")"})
			}
			continue
		}
		if p, bad := touchesEngine(s.Path, true); bad || slices.Contains(engineState, s.Holds) {
			out = append(out, Reason{Field: field, Want: "no engine state, nor a folder holding it, for a container that is no component", Got: "source " + describe(m.Source, s) + " (" + p + s.Holds + ")"})
		}
	}
	return out
}

// volumeOf is the Docker volume whose folder p is in (<dockerRoot>/volumes/<name>/...).
func volumeOf(p string) (string, bool) {
	rest, ok := strings.CutPrefix(p, dockerRoot+"/volumes/")
	name, _, _ := strings.Cut(rest, "/")
	return name, ok && name != ""
}

// unmarkedNamespaces refuses a container that claims no component joining a namespace of one
// that is SHarness's (`--network container:llm`, `--pid container:llm`): llm's network is the way
// to kms, its pid namespace a view of its process. A namespace given by a process's path is that
// process's container's; a network namespace given by Docker's path is the container whose
// sandbox it is.
func unmarkedNamespaces(h host, got *specs.Spec) []Reason {
	if got.Linux == nil {
		return nil
	}
	var out []Reason
	for _, ns := range got.Linux.Namespaces {
		if ns.Path == "" {
			continue
		}
		field := "linux.namespaces." + string(ns.Type)
		owner, err := namespaceOwner(h, ns.Path)
		switch {
		case err != nil:
			out = append(out, Reason{Field: field, Want: "a namespace the shim can trace to its container", Got: ns.Path + ": " + err.Error()})
		case owner != "":
			out = append(out, Reason{Field: field, Want: "no namespace of a SHarness container for a container that is no component", Got: ns.Path + " (container " + clip(owner) + ")"})
		}
	}
	return out
}

// namespaceOwner is the id of the SHarness container whose namespace path is, "" when it is no
// SHarness container's.
func namespaceOwner(h host, path string) (string, error) {
	if m := procNamespace.FindStringSubmatch(path); m != nil {
		data, err := h.ReadFile("/proc/" + m[1] + "/cgroup")
		if err != nil {
			return "", err
		}
		id := containerID.FindString(string(data))
		if id == "" {
			return "", nil // no container's process (the host's)
		}
		rec, err := h.Record(id)
		if errors.Is(err, fs.ErrNotExist) {
			return "", nil
		}
		if err != nil {
			return "", err
		}
		if rec.Sharness {
			return id, nil
		}
		return "", nil
	}
	records, err := h.Glob(filepath.Join(dockerRoot, "containers", "*", "config.v2.json"))
	if err != nil {
		return "", err
	}
	for _, p := range records {
		id := filepath.Base(filepath.Dir(p))
		rec, err := h.Record(id)
		if err != nil {
			continue // removed meanwhile, or not a record
		}
		if rec.Sandbox == path && rec.Sharness {
			return id, nil
		}
	}
	return "", nil
}
