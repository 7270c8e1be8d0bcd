// Package diagram draws a composed policy as a picture: one box per component, one arrow per edge
// (each edge is its own internal network, pbp.EdgeNetwork, with only its two ends on it), and the
// egress network as the only way out, to the Internet. The README shows docs/stack.svg, which
// `sharness-ai diagram` draws from the default manifest; a test fails when the committed picture
// is not what the policy draws, so the picture stays true (issue 18).
//
// It is pure, like the rest of policies/: it returns bytes and touches nothing. The same policy
// always draws the same bytes: boxes are placed from the manifest's sorted lists by a fixed
// layout, with integer coordinates and no timestamp. The SVG is plain SVG 1.1 written with fmt,
// every text the policy supplies escaped by encoding/xml: a dozen boxes and lines need no drawing
// library, and a picture GitHub renders may hold no script, external font or image anyway.
//
// What it does not guarantee: the picture shows what the policy permits, not what a running
// stack does; the runtime shim and the compiled networks make the policy true.
package diagram

import (
	"bytes"
	"cmp"
	"encoding/xml"
	"fmt"
	"slices"
	"strings"

	"github.com/sharness-ai/sharness/policies/pbp"
)

// roles say in a few words what each kind is for in the design (docs/architecture.md). A test
// holds the table complete over pbp.Kinds.
var roles = map[pbp.Kind]string{
	pbp.KindApp:      "the agent",
	pbp.KindNet:      "egress proxy",
	pbp.KindLLM:      "model proxy",
	pbp.KindKMS:      "key custody",
	pbp.KindBash:     "shell sandboxes",
	pbp.KindFS:       "protected writes",
	pbp.KindLauncher: "session identities",
}

// The fixed layout, in pixels: the agent (kind app) on the left, the launcher on top, every other
// component in a column with net first, the Internet on the right. At the default policy the
// picture is 800 wide, the README's width.
const (
	margin    = 20
	topY      = 52  // the top row, under the title
	rowGap    = 22  // between two boxes of a column
	fanGap    = 130 // between the agent's column and the middle one: the agent's arrows
	outGap    = 100 // between the middle column and the Internet: the arcs and the egress line
	bandGap   = 40  // between the top row and the middle column
	minLeftW  = 150
	minMidW   = 200
	internetW = 180
	lineH     = 16 // one text line of a box
	legendH   = 18
)

type box struct {
	x, y, w, h int
	lines      []string // the name, then its role, then any note
	fill, edge string
	dashed     bool
	ends       [2][]*end // attachments on the left and the right side
}

func (b *box) cx() int { return b.x + b.w/2 }
func (b *box) cy() int { return b.y + b.h/2 }

const (
	left = iota
	right
)

// end is where a line meets a box: the side's attachments are spread evenly along it.
type end struct {
	b, other *box
	peer     *end // the line's other end
	side     int
	arc      bool
	y        int
}

type line struct {
	title  string // the network's name, and who opens connections
	from   *end
	to     *end
	arc    bool
	egress bool
}

type picture struct {
	w, h   int
	title  string
	boxes  []*box
	lines  []*line
	legend []string
}

// SVG draws m. It refuses an edge that names no component of m (a loaded manifest has none).
func SVG(m *pbp.Manifest) ([]byte, error) {
	p, err := layout(m)
	if err != nil {
		return nil, err
	}
	return p.render(), nil
}

func layout(m *pbp.Manifest) (*picture, error) {
	p := &picture{title: "SHarness stack: policy " + m.Name}
	boxes := map[string]*box{}
	var apps, tops, mids, egress []*box
	for _, c := range m.Components {
		b := &box{lines: []string{c.Name, "kind " + string(c.Kind) + " · " + roles[c.Kind]}, fill: "#ddf4ff", edge: "#0969da"}
		if roles[c.Kind] == "" {
			b.lines[1] = "kind " + string(c.Kind)
		}
		if len(m.Networks(c)) == 0 {
			b.lines = append(b.lines, "on no network")
		}
		b.h = boxHeight(b)
		boxes[c.Name] = b
		switch c.Kind {
		case pbp.KindApp:
			b.fill, b.edge = "#fff8c5", "#9a6700"
			apps = append(apps, b)
		case pbp.KindLauncher:
			b.fill, b.edge = "#f6f8fa", "#57606a"
			tops = append(tops, b)
		default:
			mids = append(mids, b)
		}
		if c.Egress {
			egress = append(egress, b)
		}
	}
	// The middle column in the design's order of kinds (net first: its way out is on the right),
	// then by name; m.Components is sorted by name, so a stable sort keeps that.
	kindOf := map[*box]int{}
	for _, c := range m.Components {
		kindOf[boxes[c.Name]] = slices.Index(pbp.Kinds, c.Kind)
	}
	slices.SortStableFunc(mids, func(a, b *box) int { return cmp.Compare(kindOf[a], kindOf[b]) })

	leftW, midW := minLeftW, minMidW
	for _, b := range apps {
		leftW = max(leftW, textWidth(b))
	}
	for _, b := range mids {
		midW = max(midW, textWidth(b))
	}
	midX := margin
	if len(apps) > 0 {
		midX += leftW + fanGap
	}

	// The top row, centred over the middle column.
	y, rowW, topH := topY, -rowGap, 0
	for _, b := range tops {
		b.w = textWidth(b)
		rowW += b.w + rowGap
		topH = max(topH, b.h)
	}
	x := max(margin, midX+(midW-rowW)/2)
	for _, b := range tops {
		b.x, b.y = x, y
		x += b.w + rowGap
	}
	if len(tops) > 0 {
		y += topH + bandGap
	}
	midTop := y
	midBottom := stack(mids, midX, midW, midTop)
	leftH := stack(apps, margin, leftW, 0) // measured at 0, then centred on the middle column
	for _, b := range apps {
		b.y += midTop + max(0, (midBottom-midTop)-leftH)/2
	}

	var internet *box
	if len(egress) > 0 {
		internet = &box{x: midX + midW + outGap, y: egress[0].y, w: internetW, lines: []string{"the Internet", "allowlisted hosts"}, fill: "#ffffff", edge: "#cf222e", dashed: true}
		internet.h = boxHeight(internet)
	}

	for _, e := range m.Edges {
		from, to := boxes[e.From], boxes[e.To]
		if from == nil || to == nil {
			return nil, fmt.Errorf("draw edge %s→%s: it names no component of the policy", e.From, e.To)
		}
		p.lines = append(p.lines, connect(from, to, pbp.EdgeNetwork(e)+": "+e.From+" connects to "+e.To, false))
	}
	for _, b := range egress {
		p.lines = append(p.lines, connect(b, internet, pbp.EgressNetwork+": "+b.lines[0]+"'s way out", true))
	}
	all := slices.Concat(tops, apps, mids)
	for _, b := range all {
		spread(b)
	}
	if internet != nil {
		// Centre the Internet on its lines' other ends, so a single egress line is level.
		sum := 0
		for _, e := range internet.ends[left] {
			sum += e.peer.y
		}
		internet.y = max(margin, sum/len(internet.ends[left])-internet.h/2)
		spread(internet)
		all = append(all, internet)
	}
	p.boxes = all

	p.legend = []string{
		"Each arrow is one internal network, edge-FROM-TO: only its two ends are on it, and it points from the",
		"component that opens connections. Two components with no arrow between them have no network in common.",
	}
	if len(egress) > 0 {
		var names []string
		for _, b := range egress {
			names = append(names, b.lines[0])
		}
		p.legend = append(p.legend, "The egress network (red) is the only one that leaves the machine; only "+strings.Join(names, ", ")+" is on it.")
	}
	bottom, rightEdge := 0, 0
	for _, b := range all {
		bottom = max(bottom, b.y+b.h)
		rightEdge = max(rightEdge, b.x+b.w)
	}
	p.w = max(800, rightEdge+margin)
	p.h = bottom + 28 + len(p.legend)*legendH
	return p, nil
}

// stack places bs one under the other from y and returns where the column ends.
func stack(bs []*box, x, w, y int) int {
	for i, b := range bs {
		if i > 0 {
			y += rowGap
		}
		b.x, b.y, b.w = x, y, w
		y += b.h
	}
	return y
}

func boxHeight(b *box) int { return 16 + len(b.lines)*lineH }

// textWidth is the width a box needs for its lines, estimated from their length: the picture
// holds no font to measure with (a font GitHub would have to fetch is what it may not hold).
func textWidth(b *box) int {
	w := len([]rune(b.lines[0]))*9 + 24 // 14px bold
	for _, l := range b.lines[1:] {
		w = max(w, len([]rune(l))*6+24) // 11px
	}
	return w
}

// connect draws from → to: a straight line between facing sides of two columns, or an arc on
// the right when the boxes share a column.
func connect(from, to *box, title string, egress bool) *line {
	l := &line{title: title, egress: egress}
	l.from, l.to = &end{b: from, other: to}, &end{b: to, other: from}
	l.from.peer, l.to.peer = l.to, l.from
	switch {
	case from.x+from.w <= to.x:
		attach(l.from, right)
		attach(l.to, left)
	case to.x+to.w <= from.x:
		attach(l.from, left)
		attach(l.to, right)
	default:
		l.arc, l.from.arc, l.to.arc = true, true, true
		attach(l.from, right)
		attach(l.to, right)
	}
	return l
}

func attach(e *end, side int) {
	e.side = side
	e.b.ends[side] = append(e.b.ends[side], e)
}

// spread sets where each line meets b, top to bottom along each side, so that lines leaving one
// side do not cross there: arcs going up (shortest first), then straight lines (by the height of
// their other end), then arcs going down (longest first). Nested arcs then stay nested.
func spread(b *box) {
	for _, ends := range b.ends {
		rank := func(e *end) (int, int) {
			dy := e.other.cy() - b.cy()
			switch {
			case e.arc && dy < 0:
				return 0, -dy
			case e.arc && dy > 0:
				return 2, -dy
			}
			return 1, e.other.cy()
		}
		slices.SortStableFunc(ends, func(x, y *end) int {
			gx, kx := rank(x)
			gy, ky := rank(y)
			return cmp.Or(cmp.Compare(gx, gy), cmp.Compare(kx, ky))
		})
		for i, e := range ends {
			e.y = b.y + (i+1)*b.h/(len(ends)+1)
		}
	}
}

// x is where the end meets its box: the side it was attached to.
func (e *end) x() int {
	if e.side == left {
		return e.b.x
	}
	return e.b.x + e.b.w
}

func (p *picture) render() []byte {
	var s bytes.Buffer
	fmt.Fprintf(&s, `<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" version="1.1" width="%d" height="%d" viewBox="0 0 %d %d" font-family="Helvetica, Arial, sans-serif">
<title>%s</title>
<desc>Drawn from the policy by sharness-ai diagram: one box per component, one arrow per edge network, and the egress network to the Internet.</desc>
<defs>
<marker id="edge" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="9" markerHeight="9" markerUnits="userSpaceOnUse" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#0969da"/></marker>
<marker id="egress" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="9" markerHeight="9" markerUnits="userSpaceOnUse" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#cf222e"/></marker>
</defs>
<rect x="0" y="0" width="%d" height="%d" fill="#ffffff"/>
<text x="%d" y="32" font-size="16" font-weight="bold" fill="#1f2328">%s</text>
`, p.w, p.h, p.w, p.h, esc(p.title), p.w, p.h, margin, esc(p.title))
	for _, b := range p.boxes {
		dash := ""
		if b.dashed {
			dash = ` stroke-dasharray="6 4"`
		}
		fmt.Fprintf(&s, `<g><rect x="%d" y="%d" width="%d" height="%d" rx="6" fill="%s" stroke="%s" stroke-width="1.5"%s/>`, b.x, b.y, b.w, b.h, b.fill, b.edge, dash)
		for i, t := range b.lines {
			size, weight, colour := 11, "normal", "#57606a"
			if i == 0 {
				size, weight, colour = 14, "bold", "#1f2328"
			}
			fmt.Fprintf(&s, `<text x="%d" y="%d" font-size="%d" font-weight="%s" fill="%s" text-anchor="middle">%s</text>`, b.cx(), b.y+8+(i+1)*lineH-4, size, weight, colour, esc(t))
		}
		s.WriteString("</g>\n")
	}
	for _, l := range p.lines {
		x1, y1, x2, y2 := l.from.x(), l.from.y, l.to.x(), l.to.y
		d := fmt.Sprintf("M%d,%d L%d,%d", x1, y1, x2, y2)
		if l.arc {
			// Both controls out to the right by the bulge, which grows with the height spanned,
			// so a longer arc passes outside a shorter one (the curve reaches 3/4 of it).
			bulge := min(8+abs(y2-y1)/3, (outGap-16)*4/3)
			cx := max(x1, x2) + bulge
			d = fmt.Sprintf("M%d,%d C%d,%d %d,%d %d,%d", x1, y1, cx, y1, cx, y2, x2, y2)
		}
		colour, marker := "#0969da", "edge"
		if l.egress {
			colour, marker = "#cf222e", "egress"
		}
		fmt.Fprintf(&s, `<g><title>%s</title><path d="%s" fill="none" stroke="%s" stroke-width="1.5" marker-end="url(#%s)"/>`, esc(l.title), d, colour, marker)
		if l.egress {
			fmt.Fprintf(&s, `<text x="%d" y="%d" font-size="11" fill="#cf222e" text-anchor="middle">%s</text>`, (x1+x2)/2, (y1+y2)/2-6, esc(pbp.EgressNetwork))
		}
		s.WriteString("</g>\n")
	}
	y := p.h - len(p.legend)*legendH + 4
	for i, t := range p.legend {
		fmt.Fprintf(&s, `<text x="%d" y="%d" font-size="12" fill="#57606a">%s</text>`+"\n", margin, y+i*legendH, esc(t))
	}
	s.WriteString("</svg>\n")
	return s.Bytes()
}

// esc makes t safe as XML character data or an attribute value.
func esc(t string) string {
	var b strings.Builder
	xml.EscapeText(&b, []byte(t)) // writes to a strings.Builder, which never fails
	return b.String()
}

func abs(n int) int { return max(n, -n) }
