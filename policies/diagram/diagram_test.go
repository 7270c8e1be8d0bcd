package diagram

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sharness-ai/sharness/policies/pbp"
)

// drawn is what an SVG holds, read back with encoding/xml: the texts of the boxes (each box a
// <g> with a <rect>), and each line's title and arrow.
type drawn struct {
	boxes [][]string // the texts of each box, in order
	lines []drawnLine
}

type drawnLine struct{ title, marker, d string }

func parse(t *testing.T, svg []byte) drawn {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(svg))
	var out drawn
	var stack []string
	var text, title strings.Builder
	var cur *drawnLine
	inBox := false
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("the SVG is not well-formed XML: %v", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			stack = append(stack, tok.Name.Local)
			text.Reset()
			switch tok.Name.Local {
			case "g":
				cur = &drawnLine{}
				title.Reset()
			case "rect":
				if len(stack) >= 2 && stack[len(stack)-2] == "g" {
					inBox = true
					out.boxes = append(out.boxes, nil)
				}
			case "path":
				if cur != nil {
					for _, a := range tok.Attr {
						switch a.Name.Local {
						case "marker-end":
							cur.marker = a.Value
						case "d":
							cur.d = a.Value
						}
					}
				}
			case "script", "image", "foreignObject", "style":
				t.Errorf("the SVG holds a <%s>, which GitHub would not render", tok.Name.Local)
			}
			for _, a := range tok.Attr {
				if a.Name.Local == "href" {
					t.Errorf("the SVG links to %q: it must stand alone", a.Value)
				}
			}
		case xml.CharData:
			text.Write(tok)
		case xml.EndElement:
			switch tok.Name.Local {
			case "text":
				if inBox && len(stack) >= 2 && stack[len(stack)-2] == "g" {
					out.boxes[len(out.boxes)-1] = append(out.boxes[len(out.boxes)-1], text.String())
				}
			case "title":
				if cur != nil {
					title.WriteString(text.String())
				}
			case "g":
				if cur != nil && cur.marker != "" {
					cur.title = title.String()
					out.lines = append(out.lines, *cur)
				}
				cur, inBox = nil, false
			}
			stack = stack[:len(stack)-1]
		}
	}
	return out
}

func manifest(edges []pbp.Edge, cs ...*pbp.Component) *pbp.Manifest {
	return &pbp.Manifest{Name: "synthetic", Components: cs, Edges: edges}
}

// TestTwoComponentsOneEdge: the smallest policy draws its two boxes, with their names and kinds,
// and one arrow between them named after the edge's network; nothing else (no way out).
func TestTwoComponentsOneEdge(t *testing.T) {
	m := manifest([]pbp.Edge{{From: "agent", To: "fs"}},
		&pbp.Component{Name: "agent", Kind: pbp.KindApp}, &pbp.Component{Name: "fs", Kind: pbp.KindFS})
	svg, err := SVG(m)
	if err != nil {
		t.Fatal(err)
	}
	got := parse(t, svg)
	want := drawn{
		boxes: [][]string{{"agent", "kind app · the agent"}, {"fs", "kind fs · protected writes"}},
		lines: []drawnLine{{title: "edge-agent-fs: agent connects to fs", marker: "url(#edge)"}},
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(drawn{}, drawnLine{}), cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".d" }, cmp.Ignore())); diff != "" {
		t.Errorf("drawn (-want +got):\n%s", diff)
	}
	p, _ := layout(m)
	l := p.lines[0]
	if l.arc || l.from.x() != l.from.b.x+l.from.b.w || l.to.x() != l.to.b.x {
		t.Errorf("the arrow runs from x=%d to x=%d; want from the agent's right side to fs's left side", l.from.x(), l.to.x())
	}
}

// TestEgressIsTheWayOut: a component with egress gets a level red arrow to the Internet, named
// after the egress network, and a component on no network says so.
func TestEgressIsTheWayOut(t *testing.T) {
	m := manifest([]pbp.Edge{{From: "agent", To: "net"}},
		&pbp.Component{Name: "agent", Kind: pbp.KindApp},
		&pbp.Component{Name: "launcher", Kind: pbp.KindLauncher},
		&pbp.Component{Name: "net", Kind: pbp.KindNet, Egress: true})
	svg, err := SVG(m)
	if err != nil {
		t.Fatal(err)
	}
	got := parse(t, svg)
	var titles []string
	for _, l := range got.lines {
		titles = append(titles, l.title+" "+l.marker)
	}
	want := []string{"edge-agent-net: agent connects to net url(#edge)", "egress: net's way out url(#egress)"}
	if diff := cmp.Diff(want, titles); diff != "" {
		t.Errorf("lines (-want +got):\n%s", diff)
	}
	if !slices.ContainsFunc(got.boxes, func(b []string) bool { return slices.Equal(b, []string{"the Internet", "allowlisted hosts"}) }) {
		t.Errorf("no Internet box among %q", got.boxes)
	}
	if !slices.ContainsFunc(got.boxes, func(b []string) bool { return b[0] == "launcher" && slices.Contains(b, "on no network") }) {
		t.Errorf("the launcher, on no edge, does not say it is on no network: %q", got.boxes)
	}
	p, _ := layout(m)
	eg := p.lines[1]
	if !eg.egress || eg.from.y != eg.to.y {
		t.Errorf("the egress arrow runs from y=%d to y=%d; want level", eg.from.y, eg.to.y)
	}
}

func TestEdgeToNoComponentIsRefused(t *testing.T) {
	m := manifest([]pbp.Edge{{From: "agent", To: "ghost"}}, &pbp.Component{Name: "agent", Kind: pbp.KindApp})
	if _, err := SVG(m); err == nil || !strings.Contains(err.Error(), "agent→ghost") {
		t.Errorf("err = %v, want a refusal naming the edge", err)
	}
}

// TestEscape: every text the policy supplies goes through esc. A loaded manifest's names cannot
// hold these characters (pbp's name rule), but the picture must not depend on that.
func TestEscape(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"tag", "<script>", "&lt;script&gt;"},
		{"ampersand", "a&b", "a&amp;b"},
		{"quotes", `say "hi" it's`, "say &#34;hi&#34; it&#39;s"},
		{"plain", "edge-agent-net", "edge-agent-net"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := esc(tc.in); got != tc.want {
				t.Errorf("esc(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
	m := manifest(nil, &pbp.Component{Name: `a<b&"c`, Kind: pbp.KindFS})
	svg, err := SVG(m)
	if err != nil {
		t.Fatal(err)
	}
	if got := parse(t, svg).boxes[0][0]; got != `a<b&"c` {
		t.Errorf("the name reads back as %q", got)
	}
}

// TestEveryKindHasARole holds the role table complete over the design's kinds.
func TestEveryKindHasARole(t *testing.T) {
	for _, k := range pbp.Kinds {
		if roles[k] == "" {
			t.Errorf("kind %s has no role line", k)
		}
	}
	if len(roles) != len(pbp.Kinds) {
		t.Errorf("%d roles for %d kinds", len(roles), len(pbp.Kinds))
	}
}

// TestDefaultPolicyLayout: the default stack fits the README's 800 px, no two boxes overlap,
// every edge has its arrow, every arrow starts and ends on a side of its boxes, and the same
// policy draws the same bytes.
func TestDefaultPolicyLayout(t *testing.T) {
	m, err := pbp.Load(os.DirFS("../default"), "manifest.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p, err := layout(m)
	if err != nil {
		t.Fatal(err)
	}
	if p.w != 800 {
		t.Errorf("width %d, want 800", p.w)
	}
	for i, a := range p.boxes {
		if a.x < 0 || a.y < 0 || a.x+a.w > p.w || a.y+a.h > p.h {
			t.Errorf("box %s (%d,%d %dx%d) is outside the %dx%d picture", a.lines[0], a.x, a.y, a.w, a.h, p.w, p.h)
		}
		for _, b := range p.boxes[i+1:] {
			if a.x < b.x+b.w && b.x < a.x+a.w && a.y < b.y+b.h && b.y < a.y+a.h {
				t.Errorf("boxes %s and %s overlap", a.lines[0], b.lines[0])
			}
		}
	}
	if got, want := len(p.lines), len(m.Edges)+1; got != want {
		t.Errorf("%d lines, want %d (one per edge, and egress)", got, want)
	}
	for _, l := range p.lines {
		for _, e := range []*end{l.from, l.to} {
			if e.y <= e.b.y || e.y >= e.b.y+e.b.h {
				t.Errorf("%s meets %s at y=%d, outside its side %d..%d", l.title, e.b.lines[0], e.y, e.b.y, e.b.y+e.b.h)
			}
		}
	}
	a, _ := SVG(m)
	b, _ := SVG(m)
	if !bytes.Equal(a, b) {
		t.Error("the same policy drew different bytes")
	}
}
