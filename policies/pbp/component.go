package pbp

import (
	"cmp"
	"fmt"
	"slices"
	"sort"

	"github.com/sharness-ai/sharness/internal/strictyaml"
)

// Component is one component's effective policy: the intersection of its layers, with the
// design's least-privilege defaults filled in. Every value here is final.
type Component struct {
	Name       string
	Kind       Kind
	SPIFFEID   string
	Image      string
	Entrypoint []string
	CodeSHA256 string
	UID, GID   int

	Capabilities []string // sorted, CAP_ prefixed
	NoNewPrivs   bool     // always true: the design has no way to turn it off
	MaxPIDs      int64
	MaxMemory    int64    // bytes
	MaxRuntime   int64    // seconds; 0 means the session's lifetime
	Exec         []string // sorted; what may be executed (a trailing "/" marks a folder)
	Landlock     string   // LandlockEnforce, LandlockBestEffort or LandlockPerCommand

	Tmpfs     []TmpfsMount  // sorted by path
	Volumes   []VolumeMount // sorted by target
	Protected []string      // sorted; a trailing "/" marks a folder
	Workspace string        // "rw", "ro" or "" (no workspace)

	Egress bool

	SyscallAllow []string // sorted re-additions from the design's floor
	SyscallDeny  []string // sorted extra removals

	Business Business
	Audit    []string

	ConnectTo  []string // from the manifest's edges, sorted
	AcceptFrom []string
}

// TmpfsMount is a resolved tmpfs: its size in bytes.
type TmpfsMount struct {
	Path string
	Size int64
}

// VolumeMount is a resolved named volume.
type VolumeMount struct {
	Name, Target string
	ReadOnly     bool
}

// compose narrows one component's layers in order and resolves the result.
func compose(md *strictyaml.Document, name string, ref ComponentRef, layers map[string]*layer, trustDomain string) (*Component, error) {
	var acc Policy
	for _, id := range ref.Layers {
		l := layers[id]
		if err := (&merger{d: l.d, id: id}).merge(&acc, &l.doc.Policy); err != nil {
			return nil, err
		}
	}
	where := func(field string) *Error {
		e := md.ErrAt("components."+name, "")
		e.Field = fmt.Sprintf("components.%s (%s)", name, field)
		return e
	}
	c, err := resolve(name, ref.Kind, &acc, where)
	if err != nil {
		return nil, err
	}
	c.SPIFFEID = "spiffe://" + trustDomain + "/" + name
	return c, checkDesign(c, where)
}

// resolve fills in the design's least-privilege defaults and refuses a policy that leaves a
// required limit open.
func resolve(name string, kind Kind, p *Policy, where func(string) *Error) (*Component, error) {
	missing := func(field, why string) error {
		e := where(field)
		e.Msg = "no layer sets " + field + ": " + why
		return e
	}
	c := &Component{Name: name, Kind: kind, NoNewPrivs: true, Capabilities: []string{}}
	s, id, pr := deref(p.Subject), deref(p.Identity), deref(p.Process)
	switch {
	case s.Image == "":
		return nil, missing("subject.image", "the policy must say what runs")
	case id.UID == nil || id.GID == nil:
		return nil, missing("identity.uid/gid", "every component runs as a named non-root user")
	case pr.MaxPIDs == nil:
		return nil, missing("process.max_pids", "a pids limit is required")
	case pr.MaxMemory == "":
		return nil, missing("process.max_memory", "a memory limit is required")
	}
	c.Image, c.Entrypoint, c.CodeSHA256 = s.Image, s.Entrypoint, s.CodeSHA256
	c.UID, c.GID = *id.UID, *id.GID
	if pr.Capabilities != nil {
		c.Capabilities = *pr.Capabilities
	}
	c.MaxPIDs = int64(*pr.MaxPIDs)
	c.MaxMemory, _ = ParseSize(pr.MaxMemory)
	if pr.MaxRuntime != "" {
		c.MaxRuntime, _ = ParseDuration(pr.MaxRuntime)
	}
	c.Landlock = cmp.Or(pr.Landlock, LandlockEnforce)
	switch {
	case pr.Exec != nil:
		c.Exec = *pr.Exec
	case len(c.Entrypoint) > 0:
		c.Exec = []string{c.Entrypoint[0]}
	default:
		c.Exec = []string{}
	}
	f := deref(p.Files)
	if f.Tmpfs != nil {
		for _, t := range *f.Tmpfs {
			size, _ := ParseSize(t.Size)
			c.Tmpfs = append(c.Tmpfs, TmpfsMount{Path: t.Path, Size: size})
		}
		sort.Slice(c.Tmpfs, func(i, j int) bool { return c.Tmpfs[i].Path < c.Tmpfs[j].Path })
	}
	if f.Volumes != nil {
		for _, v := range *f.Volumes {
			c.Volumes = append(c.Volumes, VolumeMount{Name: v.Name, Target: v.Target, ReadOnly: isTrue(v.ReadOnly)})
		}
		sort.Slice(c.Volumes, func(i, j int) bool { return c.Volumes[i].Target < c.Volumes[j].Target })
	}
	if dup := firstDup(c.Tmpfs, c.Volumes); dup != "" {
		e := where("files")
		e.Msg = "two mounts at " + dup
		return nil, e
	}
	c.Protected = f.Protected
	c.Workspace = f.Workspace
	c.Egress = isTrue(deref(p.Network).Egress)
	sc := deref(p.Syscalls)
	if sc.Allow != nil {
		c.SyscallAllow = *sc.Allow
	}
	c.SyscallDeny = sc.Deny
	if p.Business != nil {
		c.Business = *p.Business
	}
	if p.Audit != nil && p.Audit.Emit != nil {
		c.Audit = *p.Audit.Emit
	}
	return c, nil
}

func deref[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}

func firstDup(t []TmpfsMount, v []VolumeMount) string {
	var targets []string
	for _, x := range t {
		targets = append(targets, x.Path)
	}
	for _, x := range v {
		targets = append(targets, x.Target)
	}
	slices.Sort(targets)
	for i := 1; i < len(targets); i++ {
		if targets[i] == targets[i-1] {
			return targets[i]
		}
	}
	return ""
}
