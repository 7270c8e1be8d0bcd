package secretfilter

import (
	"bytes"
	"sort"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// The escape schemes layer 1 decodes, wherever they occur, before it matches again: an encoder
// that escapes only some characters, or an agent that escapes a few on purpose, writes a secret
// no whole-text encoding lists (the e2e suite saw the API key with each '-' as \u002d). A scheme
// is named by the byte that introduces its escapes:
//
//	\  JSON's \uXXXX (surrogate pairs joined), \" \\ \/ \b \f \n \r \t; and \xHH
//	%  %XX, either case (RFC 3986 §2.1)
//	&  HTML's &#N; and &#xH;, and &amp; &lt; &gt; &quot; &apos;
const introducers = `\%&`

var named = [...]string{"&amp;", "&lt;", "&gt;", "&quot;", "&apos;"}

// view is a text with the escape sequences of some schemes decoded once (an escape's output is
// not read again), and the spans that tell where each decoded escape came from.
type view struct {
	dec []byte
	esc []span
}

// span is one decoded escape sequence: dec[d:de] came from text[s:se].
type span struct{ d, de, s, se int }

// eachView calls fn with a view of text for each scheme with an escape in it and, when two or
// more have one, with a view of all of them decoded, one view at a time. The view of one scheme
// alone recovers a secret that holds another scheme's introducer ("pa%41ss" written with some
// characters as \u00XX); the combined view recovers a secret escaped in different schemes.
func eachView(text []byte, fn func(*view)) {
	all := ""
	for _, c := range introducers {
		if v := unescape(text, string(c)); v.esc != nil {
			fn(&v)
			all += string(c)
		}
	}
	if len(all) > 1 {
		v := unescape(text, all)
		fn(&v)
	}
}

// unescape returns the view of text with the escapes of the schemes in set (introducers)
// decoded; it has no spans (and no dec) when there are none.
func unescape(text []byte, set string) (v view) {
	last := 0 // text[last:] is not in v.dec yet
	for i := 0; ; i++ {
		k := bytes.IndexAny(text[i:], set)
		if k < 0 {
			break
		}
		i += k
		var buf [utf8.UTFMax]byte
		out, n := decodeAt(buf[:0], text[i:])
		if n == 0 {
			continue
		}
		if v.dec == nil {
			most := 0 // escapes there can be, so that v.esc is not copied as it grows
			for _, c := range []byte(set) {
				most += bytes.Count(text[i:], []byte{c})
			}
			v.dec, v.esc = make([]byte, 0, len(text)), make([]span, 0, most)
		}
		v.dec = append(v.dec, text[last:i]...)
		v.esc = append(v.esc, span{len(v.dec), len(v.dec) + len(out), i, i + n})
		v.dec = append(v.dec, out...)
		i, last = i+n-1, i+n
	}
	if v.esc != nil {
		v.dec = append(v.dec, text[last:]...)
	}
	return v
}

// decodeAt appends to dst what the escape sequence at the start of t stands for, and returns its
// length in t, 0 if t does not start with one. A \u escape that is half a
// surrogate pair, or an entity that is not a Unicode scalar value, is not decoded.
func decodeAt(dst, t []byte) ([]byte, int) {
	switch c := t[0]; {
	case c == '%':
		if b, ok := number(t, 1, 3, 16); ok {
			return append(dst, byte(b)), 3
		}
	case c == '\\' && len(t) > 1:
		if k := strings.IndexByte(`"\/bfnrt`, t[1]); k >= 0 {
			return append(dst, "\"\\/\b\f\n\r\t"[k]), 2
		}
		if b, ok := number(t, 2, 4, 16); ok && t[1] == 'x' {
			return append(dst, byte(b)), 4
		}
		r, ok := number(t, 2, 6, 16)
		if !ok || t[1] != 'u' {
			break
		}
		if !utf16.IsSurrogate(r) {
			return utf8.AppendRune(dst, r), 6
		}
		if lo, ok := number(t, 8, 12, 16); ok && string(t[6:8]) == `\u` && utf16.DecodeRune(r, lo) != utf8.RuneError {
			return utf8.AppendRune(dst, utf16.DecodeRune(r, lo)), 12
		}
	case c == '&':
		for k, name := range named {
			if bytes.HasPrefix(t, []byte(name)) {
				return append(dst, "&<>\"'"[k]), len(name)
			}
		}
		end := bytes.IndexByte(t[:min(len(t), 12)], ';') // &#x and 8 digits at most
		if end < 0 || !bytes.HasPrefix(t, []byte("&#")) {
			break
		}
		r, ok := number(t, 2, end, 10)
		if t[2]|0x20 == 'x' {
			r, ok = number(t, 3, end, 16)
		}
		if ok && utf8.ValidRune(r) {
			return utf8.AppendRune(dst, r), end + 1
		}
	}
	return dst, 0
}

// number reads t[i:j] as a number in base (10 or 16, either case), digits only; false if t is
// shorter, or t[i:j] is empty or longer than 8 digits.
func number(t []byte, i, j, base int) (rune, bool) {
	if j > len(t) || i >= j || j-i > 8 {
		return 0, false
	}
	var n rune
	for _, c := range t[i:j] {
		d := strings.IndexByte("0123456789abcdef", c|0x20) // c|0x20: 'A'-'F' and 0x10-0x19 too
		if c < '0' || d < 0 || d >= base {
			return 0, false
		}
		n = n*rune(base) + rune(d)
	}
	return n, true
}

// orig maps offset p of v.dec to text: the start of the escape p lies in (with end, the end of
// it, to map the last byte of a hit), so a hit covers each escape it touches whole.
func (v *view) orig(p int, end bool) int {
	var e span // before the first escape, offsets agree
	if k := sort.Search(len(v.esc), func(k int) bool { return v.esc[k].d > p }); k > 0 {
		e = v.esc[k-1]
	}
	switch {
	case p >= e.de:
		p += e.se - e.de
	case end:
		return e.se
	default:
		return e.s
	}
	if end {
		p++
	}
	return p
}
