package pbp

import (
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/sharness-ai/sharness/internal/strictyaml"
)

// Error is a refusal that names the file, the line and the field, from the strict decoder or from
// the policy's own rules: Load, LoadBytes, LayerHash and Lock refuse a document with one.
type Error = strictyaml.Error

// Manifest is a loaded, verified and composed manifest: every layer matched its recorded hash,
// every component's chain narrowed without widening, and every design rule held.
type Manifest struct {
	Hash        string // M: the hash the person supplies
	Name        string
	TrustDomain string
	Components  []*Component // sorted by name
	Edges       []Edge       // sorted
	Layers      []LayerRef   // as the manifest lists them
	TestWorld   *TestWorld   // nil for a production policy (testworld.go)
}

// Component returns the named component, or nil.
func (m *Manifest) Component(name string) *Component {
	for _, c := range m.Components {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// Launcher returns the manifest's component of kind launcher, or nil when it has none.
func (m *Manifest) Launcher() *Component {
	for _, c := range m.Components {
		if c.Kind == KindLauncher {
			return c
		}
	}
	return nil
}

// Peers names the components of kind k that from has an edge to, in edge order.
func (m *Manifest) Peers(from string, k Kind) []string {
	var out []string
	for _, e := range m.Edges {
		if to := m.Component(e.To); e.From == from && to != nil && to.Kind == k {
			out = append(out, to.Name)
		}
	}
	return out
}

var (
	layerPattern = regexp.MustCompile(`^(L[0-5])-[a-z0-9][a-z0-9-]{0,40}$`)
	trustPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)
)

// Load reads the manifest at name from fsys, checks every layer against its recorded hash, and
// composes each component's layers. It reads only through fsys.
func Load(fsys fs.FS, name string) (*Manifest, error) {
	data, err := fs.ReadFile(fsys, name)
	if err != nil {
		return nil, &Error{File: name, Msg: fmt.Sprintf("cannot read: %v", unwrapPath(err))}
	}
	return LoadBytes(fsys, name, data)
}

// LoadBytes is Load with the manifest's bytes already read (layers still come from fsys).
func LoadBytes(fsys fs.FS, name string, data []byte) (*Manifest, error) {
	var md ManifestDoc
	d, err := strictyaml.Decode(name, data, &md)
	if err != nil {
		return nil, err
	}
	if err := checkHeader(d, md.PBP, md.Kind, "manifest"); err != nil {
		return nil, err
	}
	if err := shapeManifest(d, &md); err != nil {
		return nil, err
	}
	if err := checkManifest(d, &md); err != nil {
		return nil, err
	}
	if err := checkTestWorld(d, md.TestWorld, md.Components); err != nil {
		return nil, err
	}
	m := &Manifest{Name: md.Name, TrustDomain: md.TrustDomain, Layers: md.Layers, TestWorld: md.TestWorld}
	if m.Hash, err = Digest(d.Value()); err != nil {
		return nil, err
	}
	layers := map[string]*layer{}
	for i, ref := range md.Layers {
		l, err := loadLayer(fsys, path.Join(path.Dir(name), ref.File), ref)
		if err != nil {
			return nil, err
		}
		if l.hash != ref.SHA256 {
			return nil, d.ErrAt(fmt.Sprintf("layers[%d].sha256", i), "layer %s (%s) has content hash %s, not the recorded one: the layer changed after the manifest named it (run sharness-ai lock if the change is yours)", ref.ID, ref.File, l.hash)
		}
		if l.doc.Level != ref.ID[:2] {
			return nil, d.ErrAt(fmt.Sprintf("layers[%d].id", i), "layer %s is level %s in its file", ref.ID, l.doc.Level)
		}
		layers[ref.ID] = l
	}
	names := make([]string, 0, len(md.Components))
	for n := range md.Components {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		c, err := compose(d, n, md.Components[n], layers, md.TrustDomain)
		if err != nil {
			return nil, err
		}
		m.Components = append(m.Components, c)
	}
	m.Edges = slices.Clone(md.Edges)
	sort.Slice(m.Edges, func(i, j int) bool {
		a, b := m.Edges[i], m.Edges[j]
		return a.From < b.From || a.From == b.From && a.To < b.To
	})
	for _, e := range m.Edges {
		m.Component(e.From).ConnectTo = append(m.Component(e.From).ConnectTo, e.To)
		m.Component(e.To).AcceptFrom = append(m.Component(e.To).AcceptFrom, e.From)
	}
	return m, checkCallers(d, m)
}

// checkCallers makes sure every net rule names a component that has an edge to that net.
func checkCallers(d *strictyaml.Document, m *Manifest) error {
	for _, c := range m.Components {
		if c.Business.Net == nil || c.Business.Net.Callers == nil {
			continue
		}
		for i, r := range *c.Business.Net.Callers {
			if !slices.Contains(c.AcceptFrom, r.Caller) {
				return d.ErrAt("components."+c.Name, "business.net.callers[%d]: caller %q has no edge to %s (edges to it: %v)", i, r.Caller, c.Name, c.AcceptFrom)
			}
		}
	}
	return nil
}

func checkHeader(d *strictyaml.Document, version int, kind, want string) error {
	if !d.Has("pbp") {
		return d.ErrAt("pbp", "missing: the format version must be given as pbp: %d", Version)
	}
	if version != Version {
		return d.ErrAt("pbp", "unknown format version %d (this build reads pbp: %d)", version, Version)
	}
	if kind != want {
		return d.ErrAt("kind", "is %q, want %q", kind, want)
	}
	return nil
}

// checkManifest enforces the manifest's references (shapeManifest has checked each value on its
// own): layer ids are unique and known and come outermost first, edges join existing components
// along the design's matrix.
func checkManifest(d *strictyaml.Document, md *ManifestDoc) error {
	ids := map[string]int{}
	for i, ref := range md.Layers {
		if _, dup := ids[ref.ID]; dup {
			return d.ErrAt(fmt.Sprintf("layers[%d].id", i), "layer %s is listed twice", ref.ID)
		}
		ids[ref.ID] = i
	}
	names := make([]string, 0, len(md.Components))
	for name := range md.Components {
		names = append(names, name)
	}
	sort.Strings(names) // with several faults, always report the same one
	for _, name := range names {
		prev := ""
		for i, id := range md.Components[name].Layers {
			f := fmt.Sprintf("components.%s.layers[%d]", name, i)
			if _, ok := ids[id]; !ok {
				return d.ErrAt(f, "unknown layer %q", id)
			}
			if id[:2] < prev {
				return d.ErrAt(f, "layer %s comes after a %s layer: layers go outermost (L0) first", id, prev)
			}
			prev = id[:2]
		}
	}
	if len(md.Edges) > 256 {
		return d.ErrAt("edges", "%d edges: the edge address pool holds 256", len(md.Edges))
	}
	seen := map[Edge]bool{}
	for i, e := range md.Edges {
		f := fmt.Sprintf("edges[%d]", i)
		from, okf := md.Components[e.From]
		to, okt := md.Components[e.To]
		switch {
		case !okf:
			return d.ErrAt(f+".from", "edge from %q: no such component", e.From)
		case !okt:
			return d.ErrAt(f+".to", "edge to %q: no such component", e.To)
		case seen[e]:
			return d.ErrAt(f, "edge %s→%s is listed twice", e.From, e.To)
		case !designEdge(from.Kind, to.Kind):
			return d.ErrAt(f, "edge %s→%s (%s→%s) is not an edge the design allows (%s)", e.From, e.To, from.Kind, to.Kind, designEdgesText())
		}
		seen[e] = true
	}
	return nil
}

type layer struct {
	doc  LayerDoc
	d    *strictyaml.Document
	hash string
}

func loadLayer(fsys fs.FS, file string, ref LayerRef) (*layer, error) {
	data, err := fs.ReadFile(fsys, file)
	if err != nil {
		return nil, &Error{File: file, Msg: fmt.Sprintf("layer %s: cannot read: %v", ref.ID, unwrapPath(err))}
	}
	l := &layer{}
	if l.d, err = strictyaml.Decode(file, data, &l.doc); err != nil {
		return nil, err
	}
	if err := checkHeader(l.d, l.doc.PBP, l.doc.Kind, "layer"); err != nil {
		return nil, err
	}
	if err := shapeLayer(l.d, &l.doc); err != nil {
		return nil, err
	}
	if l.hash, err = Digest(l.d.Value()); err != nil {
		return nil, err
	}
	return l, nil
}

// LayerHash returns the hash a manifest must record for the layer file at name.
func LayerHash(fsys fs.FS, name string) (string, error) {
	data, err := fs.ReadFile(fsys, name)
	if err != nil {
		return "", &Error{File: name, Msg: fmt.Sprintf("cannot read: %v", unwrapPath(err))}
	}
	var ld LayerDoc
	d, err := strictyaml.Decode(name, data, &ld)
	if err != nil {
		return "", err
	}
	return Digest(d.Value())
}

// unwrapPath drops fs.PathError's own copy of the path, which the caller already names.
func unwrapPath(err error) error {
	if pe, ok := err.(*fs.PathError); ok {
		return pe.Err
	}
	return err
}

// Lock returns the manifest's bytes with every layer's recorded hash set to the layer file's
// current hash, changing nothing else (comments and layout stay). The result has a new policy
// hash M, which the person must supply again.
func Lock(fsys fs.FS, name string, data []byte) ([]byte, error) {
	var md ManifestDoc
	d, err := strictyaml.Decode(name, data, &md)
	if err != nil {
		return nil, err
	}
	lines := strings.SplitAfter(string(data), "\n")
	for i, ref := range md.Layers {
		h, err := LayerHash(fsys, path.Join(path.Dir(name), ref.File))
		if err != nil {
			return nil, err
		}
		field := fmt.Sprintf("layers[%d].sha256", i)
		n, ok := d.Line(field), d.Has(field)
		if !ok || ref.SHA256 == "" || !strings.Contains(lines[n-1], ref.SHA256) {
			return nil, d.ErrAt(fmt.Sprintf("layers[%d]", i), "cannot find the recorded hash on its own line to update it")
		}
		lines[n-1] = strings.Replace(lines[n-1], ref.SHA256, h, 1)
	}
	return []byte(strings.Join(lines, "")), nil
}
