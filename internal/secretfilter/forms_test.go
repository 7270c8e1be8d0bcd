package secretfilter

import (
	"encoding/base64"
	"fmt"
	"strings"
	"unicode/utf8"
)

// The forms a file takes through the tools issue 21 lists, written again here (the tool corpus
// holds the tools' own output) so that a test knows which bytes of the output carry which byte
// of the file: src[i] is the file offset output byte i shows, -1 for none (an offset, a
// separator, an inserted character); for base64, the file byte whose bits start the character,
// and src2 the one whose bits end it.

type formed struct {
	out        []byte
	src, src2  []int
	lineSpaced bool // a hit may span blanks between the carrying bytes of a line
}

func (o *formed) emit(s string, from int) {
	for i := range len(s) {
		o.out = append(o.out, s[i])
		o.src = append(o.src, from)
		o.src2 = append(o.src2, from)
	}
}

func (o *formed) lit(s string) { o.emit(s, -1) }

func printable(c byte) byte {
	if c < 0x20 || c > 0x7e {
		return '.'
	}
	return c
}

type formFunc func(file []byte, width int) formed

// forms are the layouts FuzzForms plants a secret in; width is a line width where a layout has
// one (fold -w, base64 -w), at least 8.
var forms = map[string]formFunc{
	"plain": func(file []byte, _ int) (o formed) {
		for i, c := range file {
			o.emit(string(c), i)
		}
		return o
	},
	"xxd": func(file []byte, _ int) (o formed) {
		for l := 0; l < len(file); l += 16 {
			o.lit(fmt.Sprintf("%08x: ", l))
			n := min(16, len(file)-l)
			w := 0
			for k := range n {
				o.emit(fmt.Sprintf("%02x", file[l+k]), l+k)
				w += 2
				if k%2 == 1 && k != 15 {
					o.lit(" ")
					w++
				}
			}
			o.lit(strings.Repeat(" ", 39-w+2))
			for k := range n {
				o.emit(string(printable(file[l+k])), l+k)
			}
			o.lit("\n")
		}
		o.lineSpaced = true
		return o
	},
	"hexdump-C": func(file []byte, _ int) (o formed) {
		for l := 0; l < len(file); l += 16 {
			o.lit(fmt.Sprintf("%08x  ", l))
			n := min(16, len(file)-l)
			for k := range 16 {
				if k < n {
					o.emit(fmt.Sprintf("%02x", file[l+k]), l+k)
					o.lit(" ")
				} else {
					o.lit("   ")
				}
				if k == 7 {
					o.lit(" ")
				}
			}
			o.lit(" |")
			for k := range n {
				o.emit(string(printable(file[l+k])), l+k)
			}
			o.lit("|\n")
		}
		o.lit(fmt.Sprintf("%08x\n", len(file)))
		o.lineSpaced = true
		return o
	},
	"od-x": func(file []byte, _ int) (o formed) {
		for l := 0; l < len(file); l += 16 {
			o.lit(fmt.Sprintf("%07o", l))
			for k := l; k < min(l+16, len(file)); k += 2 {
				o.lit(" ")
				if k+1 < len(file) {
					o.emit(fmt.Sprintf("%02x", file[k+1]), k+1)
				} else {
					o.lit("00")
				}
				o.emit(fmt.Sprintf("%02x", file[k]), k)
			}
			o.lit("\n")
		}
		o.lit(fmt.Sprintf("%07o\n", len(file)+len(file)%2))
		o.lineSpaced = true
		return o
	},
	"od-An-tx1": func(file []byte, _ int) (o formed) {
		for l := 0; l < len(file); l += 16 {
			for k := l; k < min(l+16, len(file)); k++ {
				o.lit(" ")
				o.emit(fmt.Sprintf("%02x", file[k]), k)
			}
			o.lit("\n")
		}
		o.lineSpaced = true
		return o
	},
	"od-c": func(file []byte, _ int) formed { return odc(file, true) },
	"od-An-c": func(file []byte, _ int) formed {
		return odc(file, false)
	},
	"base64-w": func(file []byte, width int) (o formed) {
		enc := base64.StdEncoding.EncodeToString(file)
		for k := range len(enc) {
			if k > 0 && k%width == 0 {
				o.lit("\n")
			}
			first, last := 6*k/8, (6*k+5)/8
			if enc[k] == '=' {
				first, last = -1, -1
			}
			o.out, o.src, o.src2 = append(o.out, enc[k]), append(o.src, first), append(o.src2, min(last, len(file)-1))
		}
		o.lit("\n")
		return o
	},
	"fold-w": func(file []byte, width int) (o formed) {
		col := 0
		for i, c := range file {
			if c == '\n' {
				col = -1
			} else if col == width {
				o.lit("\n")
				col = 0
			}
			o.emit(string(c), i)
			col++
		}
		return o
	},
	"paste-sd": func(file []byte, _ int) (o formed) {
		for i, c := range file {
			if c != '\n' {
				o.emit(string(c), i)
			}
		}
		return o
	},
	"cat-A": func(file []byte, _ int) (o formed) {
		for i, c := range file {
			if c == '\n' {
				o.lit("$")
			}
			o.emit(string(c), i)
		}
		return o
	},
	"zwsp": func(file []byte, width int) (o formed) {
		for i, c := range file {
			o.emit(string(c), i)
			if i%(width%5+2) == 1 && c != '\n' && c != ' ' {
				o.lit("\u200b")
			}
		}
		o.lineSpaced = true // the zero-width spaces are the blanks
		return o
	},
	"fullwidth": func(file []byte, _ int) (o formed) {
		for i, c := range file {
			if '!' <= c && c <= '~' {
				o.emit(string(rune(c)+0xfee0), i)
			} else {
				o.emit(string(c), i)
			}
		}
		return o
	},
	"homoglyph": func(file []byte, _ int) (o formed) {
		m := map[byte]rune{'a': 'а', 'c': 'с', 'e': 'е', 'o': 'о', 'p': 'р', 'x': 'х', 'A': 'А', 'B': 'В', 'K': 'К', 'T': 'Т'}
		for i, c := range file {
			if r, ok := m[c]; ok {
				o.emit(string(r), i)
			} else {
				o.emit(string(c), i)
			}
		}
		return o
	},
	"u-escapes": func(file []byte, _ int) (o formed) {
		for i, c := range file {
			o.emit(fmt.Sprintf(`\u%04x`, c), i)
		}
		return o
	},
	"x-escapes": func(file []byte, _ int) (o formed) {
		for i, c := range file {
			o.emit(fmt.Sprintf(`\x%02x`, c), i)
		}
		return o
	},
	"pct-escapes": func(file []byte, _ int) (o formed) {
		for i, c := range file {
			o.emit(fmt.Sprintf(`%%%02X`, c), i)
		}
		return o
	},
}

// odc writes od -c, with its offsets or as -An.
func odc(file []byte, offsets bool) (o formed) {
	for l := 0; l < len(file); l += 16 {
		if offsets {
			o.lit(fmt.Sprintf("%07o", l))
		}
		for k := l; k < min(l+16, len(file)); k++ {
			c := file[k]
			switch i := strings.IndexByte(odBytes, c); {
			case ' ' <= c && c < 0x7f:
				o.lit("   ")
				o.emit(string(c), k)
			case i >= 0:
				o.lit("  ")
				o.emit(`\`+odEscapes[i:i+1], k)
			default:
				o.lit(" ")
				o.emit(fmt.Sprintf("%03o", c), k)
			}
		}
		o.lit("\n")
	}
	if offsets {
		o.lit(fmt.Sprintf("%07o\n", len(file)))
	}
	o.lineSpaced = true
	return o
}

// carries reports for each byte of o.out whether it carries a byte of file[s:e] at all (may),
// and whether it carries nothing else (must).
func (o *formed) carries(s, e int) (may, must []bool) {
	may, must = make([]bool, len(o.out)), make([]bool, len(o.out))
	for i := range o.out {
		a, b := o.src[i], o.src2[i]
		may[i] = a >= 0 && (s <= a && a < e || s <= b && b < e)
		must[i] = a >= s && b < e && a >= 0
	}
	return may, must
}

// coverErr checks hits against a secret that o's bytes may / must carry: every must byte is
// covered, and a hit covers nothing but may bytes and, inside a line of a spaced layout, the
// blanks between them. It returns what is wrong, "" if nothing.
func coverErr(o formed, hits []Hit, may, must []bool) string {
	covered := make([]bool, len(o.out))
	for _, h := range hits {
		for i := h.Start; i < h.End; i++ {
			covered[i] = true
			c := o.out[i]
			if !may[i] && !(o.lineSpaced && (c == ' ' || c >= utf8.RuneSelf)) {
				return fmt.Sprintf("hit %v covers byte %d (%q), which does not carry the secret", h, i, c)
			}
		}
		if !may[h.Start] || !may[h.End-1] {
			return fmt.Sprintf("hit %v starts or ends on a byte that does not carry the secret", h)
		}
	}
	for i := range must {
		if must[i] && !covered[i] {
			return fmt.Sprintf("byte %d (%q) carries the secret and is not covered", i, o.out[i])
		}
	}
	return ""
}
