package secretfilter

import (
	"bytes"
	"encoding/binary"
	"sort"
	"unicode"
	"unicode/utf8"
)

// The normaliser: the views of a text that every layer reads besides the text itself, so that
// the shapes tools print hide nothing a rule or layer 1 would find in the plain text (issue 21:
// a key with zero-width spaces, a file through od -c or xxd, a value wrapped by fold). Each view
// maps its bytes back to the text's (view.go), so a hit redacts exactly the bytes that carried
// the secret, however they were spread.
//
// The views, each built only when the text has what it decodes, so that ordinary text pays a
// few passes of byte comparisons:
//
//   - terminal escapes removed (colours, erase-line, OSC; backspace overstrikes; ansi.go), when
//     the text holds an ESC or a backspace; the views below are made of this view too;
//   - a line-number gutter removed (cat -n, nl, Claude Code's Read: "N\t" before each line;
//     gutter.go), when at least half of the lines (and two) have one; the views below are made
//     of the text and of this view alike;
//   - cat -A (cat -vET) output read back: the '$' that ends each line dropped, ^X and M-x
//     decoded, when at least half of the lines (and two) end in '$';
//   - hex dumps decoded (xxd, xxd -p, hexdump -C, hexdump, od -x, od -tx1 and other od -t x
//     widths, with or without offsets) and od -c / hexdump -c dumps (dump.go);
//   - escapes decoded (\uXXXX, \xHH, %XX, &#N; and the short ones around them), when the text
//     holds one that can stand for a letter or a digit;
//   - of each of these, Unicode folded: format characters (Cf: zero-width spaces and joiners,
//     soft hyphens, bidi marks), other default-ignorable code points and combining marks
//     removed, and characters that look like ASCII or decompose to it mapped to it
//     (confusables.go: full-width forms, mathematical letters, Cyrillic and Greek look-alikes).
//
// Line breaks that split a value are joined where a rule needs it (rule.join in filter.go), and
// layer 1 also reads each view with all ASCII white space removed (squeezed).

// normView is one view the layers read; esc says it was decoded from escapes, which layer 1
// decodes itself in every scheme (exact.go), so it only matches there.
type normView struct {
	v   *view
	esc bool
}

// normalised returns the text's own view first, then every normalised view of it.
func normalised(text []byte) []normView {
	root := &view{dec: text}
	base := []*view{root}
	if a := ansi(root); a != nil {
		base = append(base, a)
	}
	for _, v := range base[:len(base):len(base)] {
		if n := catN(v, false); n != nil {
			base = append(base, n)
			if spaceAfter(v.dec) {
				base = append(base, catN(v, true))
			}
		}
	}
	for _, v := range base[:len(base):len(base)] {
		if c := catA(v); c != nil {
			base = append(base, c)
			if a := ansi(c); a != nil { // cat -A spells ESC as ^[: the escapes it hid are real now
				base = append(base, a)
			}
		}
	}
	for _, v := range base[:len(base):len(base)] {
		if d := dumps(v); d != nil {
			base = append(base, d)
		}
	}
	out := make([]normView, 0, 2*len(base))
	for _, v := range base {
		out = append(out, normView{v: v})
		if hidingEscape(v.dec) {
			e := unescape(v.dec, introducers)
			e.parent = v
			out = append(out, normView{v: e, esc: true})
			if a := ansi(e); a != nil { // "\u001b[31m" decoded is a colour again
				out = append(out, normView{v: a, esc: true})
			}
		}
	}
	for _, n := range out[:len(out):len(out)] {
		if u := foldUnicode(n.v); u != nil {
			out = append(out, normView{v: u, esc: n.esc})
		}
	}
	return out
}

// firstNonASCII returns the index of the first byte of b at or above 0x80, -1 if none.
func firstNonASCII(b []byte) int {
	i := 0
	for ; i+16 <= len(b); i += 16 { // sixteen at a time, the last eight to find which
		if (binary.LittleEndian.Uint64(b[i:])|binary.LittleEndian.Uint64(b[i+8:]))&0x8080808080808080 != 0 {
			break
		}
	}
	for ; i+8 <= len(b); i += 8 {
		if binary.LittleEndian.Uint64(b[i:])&0x8080808080808080 != 0 {
			break
		}
	}
	for ; i < len(b); i++ {
		if b[i] >= 0x80 {
			return i
		}
	}
	return -1
}

// invisible are removed by foldUnicode: they draw nothing (or nothing of their own), so an agent
// can put them inside a credential without changing how it reads.
var invisible = []*unicode.RangeTable{unicode.Cf, unicode.Mn, unicode.Me, unicode.Other_Default_Ignorable_Code_Point, unicode.Variation_Selector}

// confusable returns the ASCII that r looks like or decomposes to, "" if none.
func confusable(r rune) string {
	k := sort.Search(len(confusables), func(k int) bool { return confusables[k].r >= r })
	if k < len(confusables) && confusables[k].r == r {
		return confusables[k].to
	}
	return ""
}

// foldUnicode returns the view of parent with invisible code points removed and confusable
// ones mapped to ASCII; nil when the text has neither. Invalid UTF-8 stays as it is.
func foldUnicode(parent *view) *view {
	text := parent.dec
	i := firstNonASCII(text)
	if i < 0 {
		return nil
	}
	var b *builder
	last := 0 // text[last:] is not in the view yet
	for i < len(text) {
		if text[i] < utf8.RuneSelf {
			i++
			continue
		}
		r, n := utf8.DecodeRune(text[i:])
		to, drop := "", false
		switch {
		case r == utf8.RuneError && n == 1:
		case unicode.In(r, invisible...):
			drop = true
		default:
			to = confusable(r)
		}
		if !drop && to == "" {
			i += n
			continue
		}
		if b == nil {
			b = newBuilder(parent, len(text))
		}
		b.lit(text[last:i], last)
		b.put([]byte(to), i, n, -1)
		i += n
		last = i
	}
	if b == nil {
		return nil
	}
	b.lit(text[last:], last)
	return b.done()
}

// catA returns the view of parent read back from cat -A: in each line that ends in '$', the
// '$' is dropped, ^X (X in @.._) is the control byte, ^? is DEL and M-x is x with its high bit
// set; other lines stay as they are. Nil unless two lines or more, and at least half of them,
// end in '$'. A '^' or "M-" the file itself held reads wrong, which can only cost a match.
func catA(parent *view) *view {
	text := parent.dec
	if marked := bytes.Count(text, []byte("$\n")); marked < 2 || 2*marked < bytes.Count(text, []byte("\n")) {
		return nil
	}
	b := newBuilder(parent, len(text))
	for i := 0; i < len(text); {
		j := indexByteFrom(text, i, '\n')
		if j < 0 || j == i || text[j-1] != '$' {
			if j < 0 {
				j = len(text) - 1
			}
			b.lit(text[i:j+1], i)
			i = j + 1
			continue
		}
		for k := i; k < j-1; {
			c, n := catAByte(text[k : j-1])
			if n == 1 && c == text[k] {
				b.lit(text[k:k+1], k)
			} else {
				b.put([]byte{c}, k, n, -1)
			}
			k += n
		}
		b.lit(text[j:j+1], j) // the '\n'; the '$' before it is dropped
		i = j + 1
	}
	return b.done()
}

// catAByte decodes the byte cat -v wrote at the start of t, and its length in t.
func catAByte(t []byte) (byte, int) {
	var high byte
	n := 0
	if len(t) >= 3 && t[0] == 'M' && t[1] == '-' {
		high, n, t = 0x80, 2, t[2:]
	}
	switch {
	case len(t) >= 2 && t[0] == '^' && t[1] == '?':
		return high | 0x7f, n + 2
	case len(t) >= 2 && t[0] == '^' && '@' <= t[1] && t[1] <= '_':
		return high | (t[1] - '@'), n + 2
	case n > 0:
		return high | t[0], n + 1
	}
	return t[0], 1
}

// indexByteFrom is bytes.IndexByte of b[i:], as an offset of b.
func indexByteFrom(b []byte, i int, c byte) int {
	if k := bytes.IndexByte(b[i:], c); k >= 0 {
		return i + k
	}
	return -1
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

// squeezed returns text with its line breaks removed, and the blanks on either side of each,
// nil if it has none. Layer 1 matches there: a secret, its base64 or its hex, wrapped at any
// width or indented under a YAML key, reads whole. The map back is built only for a hit
// (squeeze). Blanks inside a line stay: hex spaced out on one line is a dump (dump.go).
func squeezed(text []byte) []byte {
	var out []byte
	last := 0 // text[last:] is not in out yet
	for i := 0; ; {
		k := bytes.IndexByte(text[i:], '\n')
		if k < 0 {
			break
		}
		s, e := breakSpan(text, last, i+k)
		if out == nil {
			out = make([]byte, 0, len(text))
		}
		out = append(out, text[last:s]...)
		i, last = e, e
	}
	if out == nil {
		return nil
	}
	return append(out, text[last:]...)
}

// breakSpan returns the line break at text[nl] ('\n') with the blanks and '\r' before it (back
// to from at most) and the blanks after it.
func breakSpan(text []byte, from, nl int) (int, int) {
	s, e := nl, nl+1
	for s > from && (text[s-1] == ' ' || text[s-1] == '\t' || text[s-1] == '\r') {
		s--
	}
	for e < len(text) && (text[e] == ' ' || text[e] == '\t') {
		e++
	}
	return s, e
}

// squeeze returns the view squeezed makes of parent's text, with its map back.
func squeeze(parent *view) *view {
	text := parent.dec
	b := newBuilder(parent, len(text))
	last := 0
	for i := 0; ; {
		k := bytes.IndexByte(text[i:], '\n')
		if k < 0 {
			break
		}
		s, e := breakSpan(text, last, i+k)
		b.lit(text[last:s], last)
		i, last = e, e
	}
	b.lit(text[last:], last)
	return b.done()
}
