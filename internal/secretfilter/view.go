package secretfilter

import (
	"slices"
	"sort"
)

// view is a text derived from another, its parent, and the map back to it: the escape-decoded
// views of layer 1 (unescape.go) and the normalised views every layer reads (normalise.go,
// dump.go). A view with no segments is the scanned text itself.
//
// The map is a list of segments that tile dec in order: segment k made dec[segs[k].d:
// segs[k+1].d] out of parent[s:s+sn]. A literal segment is a byte-for-byte copy, so a hit may
// start or end inside it; any other one (an escape, a full-width letter, two hex digits) maps
// as a whole, and may also have echo, the parent offset of one byte that shows the same datum
// again (a hex dump's text column). Parent bytes no segment names (a zero-width space, a dump's
// offsets, a joined line break) were dropped. A hit's bytes in the view map to the parent's
// bytes that carried them, and through each parent to the scanned text, where Redact needs them.
type view struct {
	dec    []byte
	segs   []seg
	parent *view
}

type seg struct {
	d, s, sn, echo int32
	lit            bool
}

// ival is a half-open interval [a, b) of a text.
type ival struct{ a, b int }

// builder makes a view of parent one piece at a time, pieces in the order of the parent.
type builder struct {
	v view
}

func newBuilder(parent *view, size int) *builder {
	return &builder{v: view{dec: make([]byte, 0, size), parent: parent}}
}

// lit appends parent[s:s+len(b)], b being those bytes, as they are.
func (b *builder) lit(p []byte, s int) {
	if len(p) == 0 {
		return
	}
	if n := len(b.v.segs); n > 0 {
		if last := &b.v.segs[n-1]; last.lit && int(last.s+last.sn) == s {
			last.sn += int32(len(p))
			b.v.dec = append(b.v.dec, p...)
			return
		}
	}
	b.v.segs = append(b.v.segs, seg{d: int32(len(b.v.dec)), s: int32(s), sn: int32(len(p)), echo: -1, lit: true})
	b.v.dec = append(b.v.dec, p...)
}

// grow makes room for n more segments.
func (b *builder) grow(n int) { b.v.segs = slices.Grow(b.v.segs, n) }

// put appends out as what parent[s:s+sn] stands for; echo is the parent offset of a byte that
// shows it again, -1 if none.
func (b *builder) put(out []byte, s, sn, echo int) {
	if len(out) == 0 {
		return
	}
	b.v.segs = append(b.v.segs, seg{d: int32(len(b.v.dec)), s: int32(s), sn: int32(sn), echo: int32(echo)})
	b.v.dec = append(b.v.dec, out...)
}

// done returns the view, nil if nothing was appended.
func (b *builder) done() *view {
	if len(b.v.segs) == 0 {
		return nil
	}
	return &b.v
}

// toParent appends the parent intervals that carried v.dec[a:b].
func (v *view) toParent(a, b int, out []ival) []ival {
	if v.segs == nil {
		return append(out, ival{a, b})
	}
	k := sort.Search(len(v.segs), func(k int) bool { return int(v.segs[k].d) > a }) - 1
	for k = max(k, 0); k < len(v.segs) && int(v.segs[k].d) < b; k++ {
		g := v.segs[k]
		d, s := int(g.d), int(g.s)
		if g.lit {
			end := len(v.dec)
			if k+1 < len(v.segs) {
				end = int(v.segs[k+1].d)
			}
			out = append(out, ival{s + max(a, d) - d, s + min(b, end) - d})
			continue
		}
		out = append(out, ival{s, s + int(g.sn)})
		if g.echo >= 0 {
			out = append(out, ival{int(g.echo), int(g.echo) + 1})
		}
	}
	return out
}

// toRoot maps intervals of v.dec to the scanned text, through every parent.
func (v *view) toRoot(ivs []ival) []ival {
	for ; v != nil && v.segs != nil; v = v.parent {
		var up []ival
		for _, iv := range ivs {
			up = v.toParent(iv.a, iv.b, up)
		}
		ivs = up
	}
	return ivs
}

// hitsOf appends to hits the hits in text (the scanned text) that cover ivs, intervals of
// it carrying one secret. Intervals are joined where only blanks or non-ASCII bytes lie
// between them on one line: the separators inside a hex dump's line, the zero-width spaces
// inside a key. A secret spread over lines is redacted line by line, so what it leaves is
// exactly the bytes that did not carry it.
func hitsOf(text []byte, rule string, ivs []ival, hits []Hit) []Hit {
	if len(ivs) == 1 {
		return append(hits, Hit{Rule: rule, Start: ivs[0].a, End: ivs[0].b})
	}
	ivs = slices.Clone(ivs)
	slices.SortFunc(ivs, func(x, y ival) int { return x.a - y.a })
	cur := ivs[0]
	for _, iv := range ivs[1:] {
		if iv.a <= cur.b || filler(text[cur.b:iv.a]) {
			cur.b = max(cur.b, iv.b)
			continue
		}
		hits = append(hits, Hit{Rule: rule, Start: cur.a, End: cur.b})
		cur = iv
	}
	return append(hits, Hit{Rule: rule, Start: cur.a, End: cur.b})
}

// filler reports whether gap holds only what separates a secret's pieces on one line.
func filler(gap []byte) bool {
	for _, c := range gap {
		if c != ' ' && c != '\t' && c < 0x80 {
			return false
		}
	}
	return true
}
