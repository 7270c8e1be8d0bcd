package shim

import (
	"encoding/json"
	"fmt"
	"path/filepath"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/sharness-ai/sharness/host/shim/runc"
	"github.com/sharness-ai/sharness/policies/landlock"
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
// the Landlock domain (confine). The handover rewrites config.json when it narrowed or confined.
func checkCreate(cmd runc.Command, getenv func(string) string, h host) (runc.Handover, *Refusal) {
	bundle, _ := cmd.Flag("bundle") // runc's default is the current directory
	specPath := filepath.Join(bundle, "config.json")
	got, raw, r := readSpec(cmd, h, specPath)
	if r != nil {
		return runc.Handover{}, r
	}
	want, who, r := policyFor(cmd, getenv, h, got)
	if want == nil {
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
	resolved := useResolved(got, f)
	rootfs := "rootfs"
	if got.Root != nil {
		rootfs = got.Root.Path
	}
	if !filepath.IsAbs(rootfs) {
		rootfs = filepath.Join(bundle, rootfs)
	}
	if rs := CheckCode(want, got, func(p string) (string, error) { return h.HashInRoot(rootfs, p) }); len(rs) > 0 {
		return runc.Handover{}, who.because(rs)
	}
	confined, rs := confine(cmd.Name, getenv, h, want, got)
	if len(rs) > 0 {
		return runc.Handover{}, who.because(rs)
	}
	if !narrowed && !confined && !resolved {
		return runc.Handover{}, nil
	}
	return runc.Handover{Spec: got, SpecPath: specPath}, nil
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
	want, who, r := policyFor(cmd, getenv, h, got)
	if want == nil {
		if r != nil {
			return runc.Handover{}, r
		}
		return ho, nil
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
	root := getenv(EnvPolicies)
	if root == "" {
		root = DefaultRoot
	}
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
