package shim

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/sharness-ai/sharness/host/shim/runc"
	"github.com/sharness-ai/sharness/policies/compile"
	"github.com/sharness-ai/sharness/policies/landlock"
	"github.com/sharness-ai/sharness/policies/pbp"
)

const (
	// EnvPolicies overrides DefaultRoot, the root-owned directory of compiled policies.
	EnvPolicies = "SHARNESS_RUNTIME_POLICIES"
	// EnvHelper overrides DefaultHelper, the Landlock helper bound into confined containers.
	EnvHelper = "SHARNESS_RUNTIME_LANDLOCK"
	// strictFile, when present, makes the shim refuse containers without SHarness's marker.
	// A root-owned file rather than an environment variable: whether dockerd's environment
	// reaches the runtime through containerd and its shim depends on how each was started, and
	// strict mode must not silently depend on that.
	strictFile = "/etc/sharness-ai/strict"
)

// host is everything a decision reads from the machine; the fake in the tests is a map.
type host interface {
	runc.Files // size-capped
	Exists(path string) (bool, error)
	Bundle(root, id string) (string, error) // the bundle directory of a created container
	LandlockABI() int                       // the kernel's Landlock ABI, 0 without one
	// HashInRoot is "sha256:<hex>" of the file at path inside the root file system root, never
	// leaving it (symlinks resolve inside root).
	HashInRoot(root, path string) (string, error)
	// Resolve opens each bind source and describes what it opened (Source), and reads which
	// program each hook path runs. A source below another of the list is opened from that one's
	// folder without following any symbolic link.
	Resolve(sources, hooks []string) (map[string]Source, map[string]string)
	// Engine is the engine's record of container id and its networks (EngineRecord); an error
	// is a refusal. Record is the record alone, the engine not asked: networks by name.
	Engine(id string) (EngineRecord, error)
	Record(id string) (EngineRecord, error)
	// Glob lists the paths matching pattern (filepath.Glob's syntax).
	Glob(pattern string) ([]string, error)
	// VolumeLabels are the labels of the engine's volume name.
	VolumeLabels(name string) (map[string]string, error)
}

// decide reads runc's argv and returns either the handover or the reason it refuses. Every error
// on the way is a refusal (fail closed); commands that create nothing and widen nothing (start,
// state, kill, delete, events, checkpoint, ...) pass through unread.
func decide(args []string, getenv func(string) string, h host) (runc.Handover, *Refusal) {
	cmd, err := runc.Parse(args)
	if err != nil {
		return runc.Handover{}, plain(cmd, "argv", "a runc command line", err.Error())
	}
	switch cmd.Name {
	case "create", "run", "restore":
		return checkCreate(cmd, getenv, h)
	case "exec":
		return checkExec(cmd, getenv, h)
	case "update":
		return checkUpdate(cmd, getenv, h)
	}
	return runc.Handover{}, nil
}

// checkCreate decides create, run and restore: the bundle's config.json against the compiled
// policy (Check, after Narrow added what the engine left out), the pinned code (CheckCode) and
// the Landlock domain (confine). The handover rewrites config.json when it narrowed, granted the
// compiled ambient capabilities (Grant) or confined.
func checkCreate(cmd runc.Command, getenv func(string) string, h host) (runc.Handover, *Refusal) {
	bundle, _ := cmd.Flag("bundle") // runc's default is the current directory
	specPath := filepath.Join(bundle, "config.json")
	got, raw, r := readSpec(cmd, h, specPath)
	if r != nil {
		return runc.Handover{}, r
	}
	rootfs := "rootfs"
	if got.Root != nil {
		rootfs = got.Root.Path
	}
	if !filepath.IsAbs(rootfs) {
		rootfs = filepath.Join(bundle, rootfs)
	}
	hash := func(p string) (string, error) { return h.HashInRoot(rootfs, p) }
	if fixtureOf(got) != "" {
		return runc.Handover{}, checkFixture(cmd, getenv, h, got, hash)
	}
	want, who, r := policyFor(cmd, getenv, h, got)
	if want == nil {
		if r == nil { // unmarked, outside strict mode: not a component, so it must not look like one
			r = checkUnmarked(cmd, getenv, h, got, "", nil, "", hash)
		}
		return runc.Handover{}, r
	}
	if err := KnownFields(raw); err != nil {
		return runc.Handover{}, who.with("config.json", "only runtime-spec v1.3.0's fields", err.Error())
	}
	f := gather(h, cmd.ID, got)
	narrowed := Narrow(want, got)
	if rs := Check(want, got, f); len(rs) > 0 {
		return runc.Handover{}, who.because(rs)
	}
	if rs := checkBelonging(cmd, getenv, h, want, got, f, hash); len(rs) > 0 {
		return runc.Handover{}, who.because(rs)
	}
	resolved := useResolved(got, f)
	if rs := CheckCode(want, got, hash); len(rs) > 0 {
		return runc.Handover{}, who.because(rs)
	}
	granted := Grant(want, got)
	confined, rs := confine(cmd.Name, getenv, h, want, got)
	if len(rs) > 0 {
		return runc.Handover{}, who.because(rs)
	}
	if !narrowed && !granted && !confined && !resolved {
		return runc.Handover{}, nil
	}
	return runc.Handover{Spec: got, SpecPath: specPath}, nil
}

// checkBelonging holds a component's container to what the engine and the session say of it:
// its networks (CheckNetworks), its project's session (CheckSession) and the code recorded for it
// (CheckCodeRecord).
func checkBelonging(cmd runc.Command, getenv func(string) string, h host, want, got *specs.Spec, f Facts, hash func(string) (string, error)) []Reason {
	rec, err := h.Engine(cmd.ID)
	if err != nil {
		return []Reason{{Field: "engine", Want: "the engine's record of the container and its networks", Got: err.Error()}}
	}
	out := append(append(CheckNetworks(want, rec), CheckVolumes(want, rec)...), CheckHealth(want, rec)...)
	root := policiesRoot(getenv)
	s, err := readSession(h, root, rec.Project)
	if err != nil {
		return append(out, Reason{Field: "session", Want: "a readable session record", Got: err.Error()})
	}
	out = append(out, CheckSession(want, got, f, s, rec.Project)...)
	code, err := readCodeRecord(h, PolicyDir(root, want.Annotations[compile.AnnotationPolicy]))
	if err != nil {
		return append(out, Reason{Field: "code", Want: "the code recorded for the policy (sharness-ai install)", Got: err.Error()})
	}
	out = append(out, CheckCodeRecord(want, code, hash)...)
	if c, ok := code.Components[want.Annotations[compile.AnnotationComponent]]; ok && want.Annotations[compile.AnnotationKind] != string(pbp.KindApp) && rec.Image != c.Image {
		out = append(out, Reason{Field: "image", Want: c.Image + " (the component's image as installed; rebuilt? run sharness-ai install)", Got: rec.Image})
	}
	return out
}

// checkAttached holds a running component to its compiled networks again, at each exec (the
// engine's health checks exec every second): a network connected after the start is seen by no
// runtime command but this one, and the container is cut (killed) as well as refused. It reads
// the record alone, without asking the engine: the create judged each network it started on
// (CheckNetworks), and a network cannot be replaced under the same name while a container is
// attached, so a name outside the compiled ones is all there is to see.
func checkAttached(cmd runc.Command, h host, want *specs.Spec, who Refusal) *Refusal {
	rec, err := h.Record(cmd.ID)
	if err != nil {
		return who.with("engine", "the engine's record of the container and its networks", err.Error())
	}
	if rs := CheckNetworkNames(want, rec); len(rs) > 0 {
		r := who.because(append(rs, Reason{Field: "exec", Want: "a container on its compiled networks", Got: "one attached to more since it started: killed"}))
		r.Cut = true
		return r
	}
	return nil
}

// checkUnmarked decides a container that claims no component (CheckUnmarked) against the code
// recorded by every installed policy.
func checkUnmarked(cmd runc.Command, getenv func(string) string, h host, got *specs.Spec, fixture string, fixtures *Fixtures, policy string, hash func(string) (string, error)) *Refusal {
	rec, err := h.Engine(cmd.ID)
	switch {
	case errors.Is(err, fs.ErrNotExist) && !engineMade(got):
		// runc used by hand (conformance suites, a host without an engine): no networks or volumes
		// of a stack to join, and the code is still compared below.
		rec = EngineRecord{}
	case err != nil:
		return plain(cmd, "engine", "the engine's record of the container and its networks", err.Error())
	}
	root := policiesRoot(getenv)
	dirs, err := h.Glob(filepath.Join(root, "*", CodeFile))
	if err != nil {
		return plain(cmd, "code", "the installed policies' code records", err.Error())
	}
	var records []CodeRecord
	for _, path := range dirs {
		c, err := readCodeRecord(h, filepath.Dir(path))
		if err != nil {
			return plain(cmd, "code", "the installed policies' code records", err.Error())
		}
		records = append(records, c)
	}
	r := Refusal{Container: cmd.ID, Policy: policy}
	if fixture != "" {
		r.Component = "fixture " + fixture
	}
	out := CheckUnmarked(got, rec, records, fixture, fixtures, policy, hash)
	if fixture != "" {
		out = append(FixtureCeiling(cmd.ID, got), out...)
	}
	out = append(out, unmarkedBinds(h, cmd.ID, got, fixture != "")...)
	out = append(out, unmarkedNamespaces(h, got)...)
	return r.because(out)
}

// engineMade reports whether Docker made the spec: its root is an overlay2 mount (or the
// containerd image store's), or its network is set up by dockerd's hook. Such a container has an
// engine record, which must then be read.
func engineMade(s *specs.Spec) bool {
	if s.Root != nil && (overlayRoot.MatchString(s.Root.Path) || snapshotRoot.MatchString(s.Root.Path)) {
		return true
	}
	if s.Hooks != nil {
		//lint:ignore SA1019 prestart is what Docker 20.10 writes
		for _, h := range append(append([]specs.Hook{}, s.Hooks.Prestart...), s.Hooks.CreateRuntime...) {
			if len(h.Args) > 0 && h.Args[0] == "libnetwork-setkey" {
				return true
			}
		}
	}
	return false
}

// checkFixture decides a container that says it is a test fixture: admitted as an unmarked
// container only when the test-world policy it names lists it, no wider than FixtureCeiling,
// and only on its networks.
func checkFixture(cmd runc.Command, getenv func(string) string, h host, got *specs.Spec, hash func(string) (string, error)) *Refusal {
	name := fixtureOf(got)
	_, policy, _ := Identify(got)
	dir := PolicyDir(policiesRoot(getenv), policy)
	who := Refusal{Container: cmd.ID, Component: "fixture " + name, Policy: policy}
	if dir == "" {
		return who.with("env["+EnvPolicy+"]", "the hash of the test-world policy that lists the fixture", fmt.Sprintf("%q", policy))
	}
	data, err := h.ReadFile(filepath.Join(dir, FixturesFile))
	if err != nil {
		return who.with("fixtures", "a test-world policy that lists its fixtures", err.Error())
	}
	fx, err := ParseFixtures(data)
	if err != nil {
		return who.with("fixtures", "a valid fixtures list", err.Error())
	}
	return checkUnmarked(cmd, getenv, h, got, name, fx, policy, hash)
}

// policiesRoot is where the compiled policies are: $SHARNESS_RUNTIME_POLICIES or DefaultRoot.
func policiesRoot(getenv func(string) string) string {
	if root := getenv(EnvPolicies); root != "" {
		return root
	}
	return DefaultRoot
}

// readSession reads project's session record, next to the policies' root (SessionDir beside
// DefaultRoot); nil, nil when there is none.
func readSession(h host, root, project string) (*Session, error) {
	path := SessionPath(filepath.Join(filepath.Dir(root), "sessions"), project)
	if path == "" {
		return nil, nil
	}
	data, err := h.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	s, err := ParseSession(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if s.Project != project {
		return nil, fmt.Errorf("%s: the record of project %q", path, s.Project)
	}
	return s, nil
}

// readCodeRecord reads the code record in a policy's folder.
func readCodeRecord(h host, dir string) (CodeRecord, error) {
	if dir == "" {
		return CodeRecord{}, errors.New("no policy folder")
	}
	data, err := h.ReadFile(filepath.Join(dir, CodeFile))
	if err != nil {
		return CodeRecord{}, err
	}
	return ParseCodeRecord(data)
}

// checkExec decides exec: the process it would start (from --process, or the container's own
// with the flags applied) against the policy's process, joined to the container's Landlock
// domain through the --process file. The handover gives runc the bytes the shim checked.
func checkExec(cmd runc.Command, getenv func(string) string, h host) (runc.Handover, *Refusal) {
	got, r := containerSpec(cmd, h)
	if r != nil {
		return runc.Handover{}, r
	}
	p, raw, err := cmd.Process(h, got.Process)
	if err != nil {
		return runc.Handover{}, plain(cmd, "process", "a valid process", err.Error())
	}
	path, viaFile := cmd.Flag("process")
	var ho runc.Handover
	if raw != nil {
		ho.Process, ho.ProcessPath = raw, path
	}
	if name := fixtureOf(got); name != "" {
		// A fixture's exec (the model's health check) is held to the fixture's process ceiling.
		_, policy, _ := Identify(got)
		if rs := fixtureProcess("process", p); len(rs) > 0 {
			return runc.Handover{}, Refusal{Container: cmd.ID, Component: "fixture " + name, Policy: policy}.because(rs)
		}
		return ho, nil
	}
	want, who, r := policyFor(cmd, getenv, h, got)
	if want == nil {
		if r != nil {
			return runc.Handover{}, r
		}
		return ho, nil
	}
	// First the networks: any exec (one the policy refuses too) is where a network connected
	// since the start is seen and cut.
	if r := checkAttached(cmd, h, want, who); r != nil {
		return runc.Handover{}, r
	}
	if rs := CheckProcess(want, p, Facts{ID: cmd.ID, Strict: strict(h)}); len(rs) > 0 {
		return runc.Handover{}, who.because(rs)
	}
	d, rs := Domain(want)
	if len(rs) > 0 {
		return runc.Handover{}, who.because(rs)
	}
	confined, rs := ConfineProcess(d, p)
	switch {
	case confined && !viaFile:
		return runc.Handover{}, who.because([]Reason{{Field: "exec", Want: "--process (a confined container's exec joins its Landlock domain through the file)", Got: "a command line"}})
	case confined:
		b, err := json.Marshal(p)
		if err != nil {
			return runc.Handover{}, who.because([]Reason{{Field: "process", Want: "a process to confine", Got: err.Error()}})
		}
		ho.Process, ho.ProcessPath = b, path
	}
	if len(rs) > 0 {
		return runc.Handover{}, who.because(rs)
	}
	return ho, nil
}

// checkUpdate decides update: the resources it would apply against the policy's limits
// (CheckResources). The handover gives runc the stdin the shim read.
func checkUpdate(cmd runc.Command, getenv func(string) string, h host) (runc.Handover, *Refusal) {
	got, r := containerSpec(cmd, h)
	if r != nil {
		return runc.Handover{}, r
	}
	res, stdin, err := cmd.Resources(h)
	if err != nil {
		return runc.Handover{}, plain(cmd, "linux.resources", "valid resources", err.Error())
	}
	want, who, r := policyFor(cmd, getenv, h, got)
	if r != nil {
		return runc.Handover{}, r
	}
	if want != nil {
		if rs := CheckResources(want, res); len(rs) > 0 {
			return runc.Handover{}, who.because(rs)
		}
	}
	return runc.Handover{PipeStdin: stdin != nil, Stdin: stdin}, nil
}

// policyFor reads the compiled policy the container's marker names. It returns no policy and no
// refusal for an unmarked container outside strict mode: there is nothing to check it against.
// who names the container for the refusals of its checks.
func policyFor(cmd runc.Command, getenv func(string) string, h host, container *specs.Spec) (want *specs.Spec, who Refusal, r *Refusal) {
	if fixtureOf(container) != "" {
		// A test fixture has no compiled spec: its create was decided by checkFixture, and its
		// execs and updates (the model's health check) are the caller's, as an unmarked one's.
		return nil, Refusal{}, nil
	}
	component, policy, marked := Identify(container)
	if !marked {
		if !strict(h) {
			return nil, Refusal{}, nil
		}
		return nil, Refusal{}, plain(cmd, "marker", "a SHarness component (strict mode: "+strictFile+")", "none")
	}
	who = Refusal{Container: cmd.ID, Component: component, Policy: policy}
	if component == "" || policy == "" {
		return nil, who, who.with("marker", "component and policy", fmt.Sprintf("component %q policy %q", component, policy))
	}
	root := policiesRoot(getenv)
	path := PolicyPath(root, policy, component)
	if rel, err := filepath.Rel(root, path); err != nil || !filepath.IsLocal(rel) {
		return nil, who, who.with("policy", "a compiled policy under "+root, path)
	}
	data, err := h.ReadFile(path)
	if err != nil {
		return nil, who, who.with("policy", "a compiled policy", err.Error())
	}
	want, err = LoadSpec(data)
	if err != nil {
		return nil, who, who.with("policy", "a compiled policy", fmt.Sprintf("parse %s: %v", path, err))
	}
	return want, who, nil
}

// gather asks the host for the facts Check needs about got, the spec of container id.
func gather(h host, id string, got *specs.Spec) Facts {
	f := Facts{ID: id, Strict: strict(h)}
	f.Sources, f.Programs = h.Resolve(bindSources(got), hookPaths(got))
	return f
}

// HostFacts gathers on this machine what the shim gathers at a create: the facts Check needs
// about s, the spec of the container id. The e2e suite checks a running stack with it.
func HostFacts(id string, s *specs.Spec) Facts { return gather(osHost{}, id, s) }

// strict reports strict mode; a strict file the shim cannot check for counts as there.
func strict(h host) bool {
	ok, err := h.Exists(strictFile)
	return ok || err != nil
}

// confine puts a created container under its Landlock domain (Confine). A restore is refused when
// the policy has a domain: CRIU does not carry Landlock domains, so the restored tree would run
// unconfined.
func confine(command string, getenv func(string) string, h host, want, got *specs.Spec) (bool, []Reason) {
	d, rs := Domain(want)
	switch {
	case rs != nil || d.Mode == landlock.PerCommand:
		return false, rs
	case command == "restore":
		return false, []Reason{{Field: "restore", Want: "a fresh start (a restored process tree would lose its Landlock domain)", Got: "a checkpoint"}}
	}
	helper := getenv(EnvHelper)
	if helper == "" {
		helper = DefaultHelper
	}
	if ok, err := h.Exists(helper); !ok || err != nil || !filepath.IsAbs(helper) {
		return false, []Reason{{Field: "landlock", Want: "the Landlock helper at " + helper + " (hack/runtime.sh install)", Got: fmt.Sprintf("missing (%v)", err)}}
	}
	return Confine(d, got, helper, h.LandlockABI())
}

func readSpec(cmd runc.Command, h host, path string) (*specs.Spec, []byte, *Refusal) {
	data, err := h.ReadFile(path)
	if err != nil {
		return nil, nil, plain(cmd, "config.json", "a readable bundle config", err.Error())
	}
	s, err := LoadSpec(data)
	if err != nil {
		return nil, nil, plain(cmd, "config.json", "a valid bundle config", fmt.Sprintf("parse %s: %v", path, err))
	}
	return s, data, nil
}

// containerSpec reads the config.json of a created container, found through `runc state`
// (its "bundle"), for exec and update: these name a container, not a bundle.
func containerSpec(cmd runc.Command, h host) (*specs.Spec, *Refusal) {
	if !runc.ValidID(cmd.ID) {
		return nil, plain(cmd, "container id", "a runc container id", fmt.Sprintf("%q", cmd.ID))
	}
	bundle, err := h.Bundle(cmd.Root, cmd.ID)
	if err != nil {
		return nil, plain(cmd, "bundle", "the bundle of the container", err.Error())
	}
	s, _, r := readSpec(cmd, h, filepath.Join(bundle, "config.json"))
	return s, r
}
