package secretfilter

import (
	"bytes"
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

// eachView calls fn with a view of text for each scheme with an escape in it and, when two or
// more have one, with a view of all of them decoded, one view at a time. The view of one scheme
// alone recovers a secret that holds another scheme's introducer ("pa%41ss" written with some
// characters as \u00XX); the combined view recovers a secret escaped in different schemes. A
// view's parent is nil: it maps to text.
func eachView(text []byte, fn func(*view)) {
	all := ""
	for _, c := range introducers {
		if v := unescape(text, string(c)); v != nil {
			fn(v)
			all += string(c)
		}
	}
	if len(all) > 1 {
		fn(unescape(text, all))
	}
}

// unescape returns the view of text with the escapes of the schemes in set (introducers)
// decoded once, each escape a segment of its own; nil when there are none.
func unescape(text []byte, set string) *view {
	var b *builder
	last := 0 // text[last:] is not in the view yet
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
		if b == nil {
			b = newBuilder(nil, len(text))
		}
		b.lit(text[last:i], last)
		b.put(out, i, n, -1)
		i, last = i+n-1, i+n
	}
	if b == nil {
		return nil
	}
	b.lit(text[last:], last)
	return b.done()
}

// hidingEscape reports whether text holds an escape that can stand for a letter or a digit
// (\uXXXX, \xHH, %XX, &#N;), the ones that hide a credential from a rule; the short escapes of
// JSON (\n, \") and the named entities cannot. Most source code holds only those, and is not
// read a second time.
func hidingEscape(text []byte) bool {
	// One vectorised search per introducer: most text has none, or only short escapes.
	for _, c := range []byte(introducers) {
		for i := 0; ; i++ {
			k := bytes.IndexByte(text[i:], c)
			if k < 0 {
				break
			}
			i += k
			if t := text[i:]; len(t) >= 3 && (c == '%' || c == '\\' && (t[1] == 'u' || t[1] == 'x') || c == '&' && t[1] == '#') {
				if _, n := decodeAt(nil, t); n > 0 {
					return true
				}
			}
		}
	}
	return false
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
