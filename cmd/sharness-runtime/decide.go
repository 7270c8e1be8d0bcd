package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/sharness-ai/sharness/host/shim"
	"github.com/sharness-ai/sharness/internal/strictjson"
	"github.com/sharness-ai/sharness/policies/landlock"
)

const (
	// envPolicies overrides shim.DefaultRoot, the root-owned directory of compiled policies.
	envPolicies = "SHARNESS_RUNTIME_POLICIES"
	// strictFile, when present, makes the shim refuse containers without SHarness's marker.
	// A root-owned file rather than an environment variable: whether dockerd's environment
	// reaches the runtime through containerd and its shim depends on how each was started, and
	// strict mode must not silently depend on that.
	strictFile = "/etc/sharness-ai/strict"
	maxDepth   = 64
	// envHelper overrides shim.DefaultHelper, the Landlock helper bound into confined containers.
	envHelper = "SHARNESS_RUNTIME_LANDLOCK"
)

// host is everything the decision reads from the machine; the fake in the tests is a map.
type host interface {
	ReadFile(path string) ([]byte, error) // size-capped
	ReadStdin() ([]byte, error)           // size-capped, read at most once
	Exists(path string) (bool, error)
	Bundle(root, id string) (string, error) // the bundle directory of a created container
	LandlockABI() int                       // the kernel's Landlock ABI, 0 without one
	// HashInRoot is "sha256:<hex>" of the file at path inside the root file system root, never
	// leaving it (symlinks resolve inside root).
	HashInRoot(root, path string) (string, error)
}

// action is a decision to hand over to runc with the same argv.
type action struct {
	pipeStdin bool   // runc's stdin was consumed by the check: give it these bytes instead
	stdin     []byte //
	// rewrite is the bundle's spec after shim.Narrow added what the engine left out and
	// shim.Confine put the process under its Landlock domain, to be written to specPath before
	// runc reads it; nil when nothing changed.
	rewrite  *specs.Spec
	specPath string
	// process is what runc reads for an exec's --process procPath: the bytes the shim read (a
	// pipe such as /dev/fd/N cannot be read twice), or the process after shim.ConfineProcess. The
	// handover gives them to runc in a memfd; nil when the exec has no --process.
	process  []byte
	procPath string
}

// refusal is a decision not to call runc. Its zero value is never returned: nil means allowed.
type refusal struct {
	container, component, policy string
	field, want, got             string // the first reason
	msg                          string // every reason, as docker shows it
}

func (r *refusal) Error() string { return r.msg }

// decide reads runc's argv and returns either the handover or the reason it refuses. Every error
// on the way is a refusal (fail closed); commands that create nothing and widen nothing (start,
// state, kill, delete, events, checkpoint, ...) pass through unread.
func decide(args []string, getenv func(string) string, h host) (action, *refusal) {
	inv, err := parseArgs(args)
	if err != nil {
		return action{}, plain(inv, "argv", "a runc command line", err.Error())
	}
	var act action
	var check func(want *specs.Spec) []shim.Refusal
	var container *specs.Spec
	switch inv.command {
	case "create", "run", "restore":
		bundle, _ := inv.last("bundle") // runc's default is the current directory
		specPath := filepath.Join(bundle, "config.json")
		got, r := readSpec(inv, h, specPath)
		if r != nil {
			return action{}, r
		}
		container, check = got, func(want *specs.Spec) []shim.Refusal {
			narrowed := shim.Narrow(want, got)
			if rs := shim.Check(want, got); len(rs) > 0 {
				return rs
			}
			rootfs := "rootfs"
			if got.Root != nil {
				rootfs = got.Root.Path
			}
			if !filepath.IsAbs(rootfs) {
				rootfs = filepath.Join(bundle, rootfs)
			}
			if rs := shim.CheckCode(want, got, func(p string) (string, error) { return h.HashInRoot(rootfs, p) }); len(rs) > 0 {
				return rs
			}
			confined, rs := confine(inv.command, getenv, h, want, got)
			if narrowed || confined {
				act.rewrite, act.specPath = got, specPath
			}
			return rs
		}
	case "exec", "update":
		got, r := containerSpec(inv, h)
		if r != nil {
			return action{}, r
		}
		container = got
		if inv.command == "exec" {
			p, raw, err := execProcess(inv, h, got.Process)
			if err != nil {
				return action{}, plain(inv, "process", "a valid process", err.Error())
			}
			if raw != nil {
				act.process, act.procPath = raw, mustLast(inv, "process")
			}
			check = func(want *specs.Spec) []shim.Refusal {
				if rs := shim.CheckProcess(want, p); len(rs) > 0 {
					return rs
				}
				d, rs := shim.Domain(want)
				if rs != nil {
					return rs
				}
				confined, rs := shim.ConfineProcess(d, p)
				path, viaFile := inv.last("process")
				switch {
				case confined && !viaFile:
					return []shim.Refusal{{Field: "exec", Want: "--process (a confined container's exec joins its Landlock domain through the file)", Got: "a command line"}}
				case confined:
					b, err := json.Marshal(p)
					if err != nil {
						return []shim.Refusal{{Field: "process", Want: "a process to confine", Got: err.Error()}}
					}
					act.process, act.procPath = b, path
				}
				return rs
			}
			break
		}
		res, stdin, err := updateResources(inv, h)
		if err != nil {
			return action{}, plain(inv, "linux.resources", "valid resources", err.Error())
		}
		act = action{pipeStdin: stdin != nil, stdin: stdin}
		check = func(want *specs.Spec) []shim.Refusal { return shim.CheckResources(want, res) }
	default:
		return action{}, nil
	}
	if r := judge(inv, getenv, h, container, check); r != nil {
		return action{}, r
	}
	return act, nil
}

// judge checks a container against the compiled policy its marker names.
func judge(inv invocation, getenv func(string) string, h host, container *specs.Spec,
	check func(want *specs.Spec) []shim.Refusal) *refusal {
	component, policy, marked := shim.Identify(container)
	if !marked {
		strict, err := h.Exists(strictFile)
		if err == nil && !strict {
			return nil
		}
		return plain(inv, "marker", "a SHarness component (strict mode: "+strictFile+")", "none")
	}
	r := &refusal{container: inv.id, component: component, policy: policy}
	if component == "" || policy == "" {
		return r.with("marker", "component and policy", fmt.Sprintf("component %q policy %q", component, policy))
	}
	root := getenv(envPolicies)
	if root == "" {
		root = shim.DefaultRoot
	}
	path := shim.PolicyPath(root, policy, component)
	if rel, err := filepath.Rel(root, path); err != nil || !filepath.IsLocal(rel) {
		return r.with("policy", "a compiled policy under "+root, path)
	}
	data, err := h.ReadFile(path)
	if err != nil {
		return r.with("policy", "a compiled policy", err.Error())
	}
	want, err := shim.LoadSpec(data)
	if err != nil {
		return r.with("policy", "a compiled policy", fmt.Sprintf("parse %s: %v", path, err))
	}
	rs := check(want)
	if len(rs) == 0 {
		return nil
	}
	reasons := make([]string, len(rs))
	for i, x := range rs {
		reasons[i] = reason(x.Field, x.Want, x.Got)
	}
	r.field, r.want, r.got = rs[0].Field, rs[0].Want, rs[0].Got
	r.msg = "sharness-runtime: refused " + component + ": " + strings.Join(reasons, "; ")
	return r
}

// confine puts a created container under its Landlock domain (shim.Confine). A restore is
// refused when the policy has a domain: CRIU does not carry Landlock domains, so the restored
// tree would run unconfined.
func confine(command string, getenv func(string) string, h host, want, got *specs.Spec) (bool, []shim.Refusal) {
	d, rs := shim.Domain(want)
	switch {
	case rs != nil || d.Mode == landlock.PerCommand:
		return false, rs
	case command == "restore":
		return false, []shim.Refusal{{Field: "restore", Want: "a fresh start (a restored process tree would lose its Landlock domain)", Got: "a checkpoint"}}
	}
	helper := getenv(envHelper)
	if helper == "" {
		helper = shim.DefaultHelper
	}
	if ok, err := h.Exists(helper); !ok || err != nil || !filepath.IsAbs(helper) {
		return false, []shim.Refusal{{Field: "landlock", Want: "the Landlock helper at " + helper + " (hack/runtime.sh install)", Got: fmt.Sprintf("missing (%v)", err)}}
	}
	return shim.Confine(d, got, helper, h.LandlockABI())
}

// mustLast is the last value of a flag the parser has seen.
func mustLast(inv invocation, name string) string {
	v, _ := inv.last(name)
	return v
}

func reason(field, want, got string) string { return field + ": want " + want + " got " + got }

// with sets a single reason on r.
func (r *refusal) with(field, want, got string) *refusal {
	r.field, r.want, r.got = field, want, got
	who := r.component
	if who == "" {
		who = "container " + r.container
		if r.container == "" {
			who = "container"
		}
	}
	r.msg = "sharness-runtime: refused " + who + ": " + reason(field, want, got)
	return r
}

// plain is a refusal before the component is known.
func plain(inv invocation, field, want, got string) *refusal {
	return (&refusal{container: inv.id}).with(field, want, got)
}

func readSpec(inv invocation, h host, path string) (*specs.Spec, *refusal) {
	data, err := h.ReadFile(path)
	if err != nil {
		return nil, plain(inv, "config.json", "a readable bundle config", err.Error())
	}
	s, err := shim.LoadSpec(data)
	if err != nil {
		return nil, plain(inv, "config.json", "a valid bundle config", fmt.Sprintf("parse %s: %v", path, err))
	}
	return s, nil
}

// containerSpec reads the config.json of a created container, found through `runc state`
// (its "bundle"), for exec and update: these name a container, not a bundle.
func containerSpec(inv invocation, h host) (*specs.Spec, *refusal) {
	if !validID(inv.id) {
		return nil, plain(inv, "container id", "a runc container id", fmt.Sprintf("%q", inv.id))
	}
	bundle, err := h.Bundle(inv.root, inv.id)
	if err != nil {
		return nil, plain(inv, "bundle", "the bundle of the container", err.Error())
	}
	return readSpec(inv, h, filepath.Join(bundle, "config.json"))
}

// validID is runc's own rule for container ids (^[\w+-\.]+$, not . or ..), checked here so that
// an id can never be read as a flag or a path by `runc state`.
func validID(id string) bool {
	if id == "" || id == "." || id == ".." || id[0] == '-' {
		return false
	}
	for _, c := range id {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("_+-.", c)
		if !ok {
			return false
		}
	}
	return true
}

// decodeStrict decodes a process.json or resources document, refusing duplicate and case-folded
// keys and unknown fields: it is written by whoever drives the Docker API.
func decodeStrict(data []byte, v any) error { return strictjson.Decode(data, maxDepth, v) }
