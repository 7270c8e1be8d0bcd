package pbp

import (
	"fmt"
	"slices"
	"strings"

	"github.com/sharness-ai/sharness/internal/strictyaml"
)

// merger narrows an accumulated policy by one layer, field kind by field kind as the table in
// docs/architecture.md ("The policy pipeline") lists them: sets may only shrink, limits only fall,
// permissions only turn off, and deny lists only grow. Anything else is an error that names the
// layer's file, line and field and both values. A widening is refused rather than clamped to the
// parent's value: clamping would let a layer's author believe a rule holds that does not.
type merger struct {
	d  *strictyaml.Document
	id string
}

func (m *merger) fail(field, format string, args ...any) error {
	e := m.d.ErrAt("policy."+field, format, args...)
	e.Msg = "layer " + m.id + ": " + e.Msg
	return e
}

func (m *merger) widen(field string, parent, child any) error {
	return m.fail(field, "widens its parent: %v is not within %v", show(child), show(parent))
}

func show(v any) string {
	switch x := v.(type) {
	case []string:
		return "[" + strings.Join(x, " ") + "]"
	case *[]string:
		return show(*x)
	case []int:
		return strings.Trim(fmt.Sprint(x), " ")
	}
	return fmt.Sprint(v)
}

// same is for identity fields: a layer may repeat them, never change them.
func (m *merger) same(field string, parent *string, child string) error {
	switch {
	case child == "":
	case *parent == "":
		*parent = child
	case *parent != child:
		return m.fail(field, "changes %q to %q: a layer may narrow, not change, what runs", *parent, child)
	}
	return nil
}

func (m *merger) sameInt(field string, parent **int, child *int) error {
	switch {
	case child == nil:
	case *parent == nil:
		*parent = child
	case **parent != *child:
		return m.fail(field, "changes %d to %d: a layer may narrow, not change, what runs", **parent, *child)
	}
	return nil
}

// subset narrows a set; within says whether a child element is covered by the parent.
func (m *merger) subset(field string, parent **[]string, child *[]string, within func([]string, string) bool) error {
	if child == nil {
		return nil
	}
	if *parent != nil {
		for _, v := range *child {
			if !within(**parent, v) {
				return m.widen(field, *parent, child)
			}
		}
	}
	c := slices.Clone(*child)
	slices.Sort(c)
	c = slices.Compact(c)
	*parent = &c
	return nil
}

func (m *merger) limit(field string, parent **int, child *int) error {
	switch {
	case child == nil:
	case *parent != nil && *child > **parent:
		return m.widen(field, **parent, *child)
	default:
		*parent = child
	}
	return nil
}

// limitText narrows a limit written as text ("64Mi", "30m"), compared by parsed value.
func (m *merger) limitText(field string, parent *string, child string, parse func(string) (int64, error)) error {
	if child == "" {
		return nil
	}
	cv, err := parse(child)
	if err != nil {
		return m.fail(field, "%v", err)
	}
	if *parent != "" {
		if pv, _ := parse(*parent); cv > pv {
			return m.widen(field, *parent, child)
		}
	}
	*parent = child
	return nil
}

// permit narrows a permission: once false, it stays false.
func (m *merger) permit(field string, parent **bool, child *bool) error {
	switch {
	case child == nil:
	case *parent != nil && !**parent && *child:
		return m.widen(field, false, true)
	default:
		*parent = child
	}
	return nil
}

func union(parent *[]string, child []string) {
	u := append(slices.Clone(*parent), child...)
	slices.Sort(u)
	*parent = slices.Compact(u)
}

func exact(set []string, v string) bool { return slices.Contains(set, v) }

func (m *merger) merge(acc, p *Policy) error {
	steps := []func(acc, p *Policy) error{m.subject, m.process, m.files, m.network, m.syscalls, m.business}
	for _, step := range steps {
		if err := step(acc, p); err != nil {
			return err
		}
	}
	if p.Audit != nil && p.Audit.Emit != nil {
		if acc.Audit == nil {
			acc.Audit = &Audit{Emit: &[]string{}}
		}
		union(acc.Audit.Emit, *p.Audit.Emit) // recording more is never a widening
	}
	return nil
}

func (m *merger) subject(acc, p *Policy) error {
	if s := p.Subject; s != nil {
		a := ensure(&acc.Subject)
		ep := strings.Join(a.Entrypoint, "\x00")
		if err := firstErr(m.same("subject.image", &a.Image, s.Image),
			m.same("subject.entrypoint", &ep, strings.Join(s.Entrypoint, "\x00")),
			m.same("subject.code_sha256", &a.CodeSHA256, s.CodeSHA256)); err != nil {
			return err
		}
		if ep != "" {
			a.Entrypoint = strings.Split(ep, "\x00")
		}
	}
	if id := p.Identity; id != nil {
		a := ensure(&acc.Identity)
		return firstErr(m.sameInt("identity.uid", &a.UID, id.UID), m.sameInt("identity.gid", &a.GID, id.GID))
	}
	return nil
}

func (m *merger) process(acc, p *Policy) error {
	pr := p.Process
	if pr == nil {
		return nil
	}
	a := ensure(&acc.Process)
	return firstErr(m.subset("process.capabilities", &a.Capabilities, pr.Capabilities, exact),
		m.limit("process.max_pids", &a.MaxPIDs, pr.MaxPIDs),
		m.limitText("process.max_memory", &a.MaxMemory, pr.MaxMemory, ParseSize),
		m.limitText("process.max_runtime", &a.MaxRuntime, pr.MaxRuntime, ParseDuration),
		m.subset("process.exec", &a.Exec, pr.Exec, beneathAny),
		m.landlock(&a.Landlock, pr.Landlock))
}

// beneathAny says whether path p is one of set's files, or is beneath one of its folders.
func beneathAny(set []string, p string) bool {
	for _, s := range set {
		if s == p || strings.HasSuffix(s, "/") && strings.HasPrefix(p, s) {
			return true
		}
	}
	return false
}

// landlock narrows process.landlock: any value may become "enforce", nothing else changes.
func (m *merger) landlock(parent *string, child string) error {
	switch {
	case child == "" || child == *parent:
	case *parent == "" || child == LandlockEnforce:
		*parent = child
	default:
		return m.widen("process.landlock", *parent, child)
	}
	return nil
}

func (m *merger) files(acc, p *Policy) error {
	f := p.Files
	if f == nil {
		return nil
	}
	a := ensure(&acc.Files)
	union(&a.Protected, f.Protected)
	switch {
	case f.Workspace == "" || f.Workspace == a.Workspace:
	case a.Workspace == "" || (a.Workspace == "rw" && f.Workspace == "ro"):
		a.Workspace = f.Workspace
	default:
		return m.widen("files.workspace", a.Workspace, f.Workspace)
	}
	if f.Tmpfs != nil {
		for i, t := range *f.Tmpfs {
			field := fmt.Sprintf("files.tmpfs[%d]", i)
			size, _ := ParseSize(t.Size) // checked by shapeLayer
			if a.Tmpfs != nil {
				k := slices.IndexFunc(*a.Tmpfs, func(x Tmpfs) bool { return x.Path == t.Path })
				if k < 0 {
					return m.fail(field+".path", "widens its parent: tmpfs %s is not among the parent's", t.Path)
				}
				if ps, _ := ParseSize((*a.Tmpfs)[k].Size); size > ps {
					return m.widen(field+".size", (*a.Tmpfs)[k].Size, t.Size)
				}
			}
		}
		a.Tmpfs = f.Tmpfs
	}
	if f.Volumes != nil {
		for i, v := range *f.Volumes {
			field := fmt.Sprintf("files.volumes[%d]", i)
			if a.Volumes != nil {
				k := slices.IndexFunc(*a.Volumes, func(x Volume) bool { return x.Name == v.Name && x.Target == v.Target })
				if k < 0 {
					return m.fail(field, "widens its parent: volume %s at %s is not among the parent's", v.Name, v.Target)
				}
				if isTrue((*a.Volumes)[k].ReadOnly) && !isTrue(v.ReadOnly) {
					return m.widen(field+".read_only", true, false)
				}
			}
		}
		a.Volumes = f.Volumes
	}
	return nil
}

func (m *merger) network(acc, p *Policy) error {
	if p.Network == nil {
		return nil
	}
	return m.permit("network.egress", &ensure(&acc.Network).Egress, p.Network.Egress)
}

func (m *merger) syscalls(acc, p *Policy) error {
	s := p.Syscalls
	if s == nil {
		return nil
	}
	a := ensure(&acc.Syscalls)
	union(&a.Deny, s.Deny)
	return firstErr(m.same("syscalls.base", &a.Base, s.Base), m.subset("syscalls.allow", &a.Allow, s.Allow, exact))
}

func ensure[T any](p **T) *T {
	if *p == nil {
		*p = new(T)
	}
	return *p
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func isTrue(b *bool) bool { return b != nil && *b }
