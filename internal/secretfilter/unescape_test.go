package secretfilter

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// unescapeCases are each escape each scheme knows, and the near misses left as they are.
var unescapeCases = []struct {
	name string
	text string
	set  string
	want string // "" when nothing is decoded
}{
	{"percent", `a%2Db%2dc%zz%4`, `%`, "a-b-c%zz%4"},
	{"json short", `\"\\\/\b\f\n\r\t\a\`, `\`, "\"\\/\b\f\n\r\t\\a\\"},
	{"json unicode", `\u002D\u00e9\u12\u00G1`, `\`, `-é\u12\u00G1`},
	{"surrogates", `\ud83d\udca1 \ud83d\ud83d\udca1 \udca1 \ud83dx`, `\`, `💡 \ud83d💡 \udca1 \ud83dx`},
	{"backslash x", `\x2d\x2G\x`, `\`, `-\x2G\x`},
	{"entity named", `&amp;&lt;&gt;&quot;&apos;&nbsp;&amp`, `&`, `&<>"'&nbsp;&amp`},
	{"entity numeric", `&#45;&#x2D;&#X2d;&#0045;&#128161;`, `&`, "----💡"},
	{"entity near misses", `&#;&#x;&#45&#xD800;&#123456789;&#x110000;&#`, `&`, ""},
	{"one scheme of three", `%2D\u002d&#45;`, `%`, `-\u002d&#45;`},
	{"all schemes", `%2D\u002d&#45;`, `\%&`, "---"},
	{"decoded once", `%255C%5Cu002d\\u002d`, `\%&`, `%5C\u002d\u002d`},
	{"nothing", `100% \q & &#x; %`, `\%&`, ""},
}

func TestUnescape(t *testing.T) {
	for _, tc := range unescapeCases {
		t.Run(tc.name, func(t *testing.T) {
			v, got := unescape([]byte(tc.text), tc.set), ""
			if v != nil {
				got = string(v.dec)
			}
			if got != tc.want || (v == nil) != (tc.want == "") {
				t.Errorf("unescape(%q) = %q (nil view %v); want %q", tc.text, got, v == nil, tc.want)
			}
		})
	}
}

// FuzzUnescape: a view is the text with each escape, read left to right, replaced by what
// decodeAt makes of it, and nothing else changed; the segments say so.
func FuzzUnescape(f *testing.F) {
	for _, tc := range unescapeCases {
		f.Add([]byte(tc.text), tc.set)
	}
	f.Fuzz(func(t *testing.T, text []byte, set string) {
		if strings.Trim(set, introducers) != "" {
			return
		}
		v := unescape(text, set)
		if v == nil {
			for i := range text {
				if _, n := decodeAt(nil, text[i:]); n > 0 && strings.IndexByte(set, text[i]) >= 0 {
					t.Fatalf("escape at %d of %q left undecoded", i, text)
				}
			}
			return
		}
		p := 0 // text[:p] is accounted for
		for k, g := range v.segs {
			end := len(v.dec)
			if k+1 < len(v.segs) {
				end = int(v.segs[k+1].d)
			}
			dec, src := v.dec[g.d:end], text[g.s:g.s+g.sn]
			if int(g.s) != p {
				t.Fatalf("segment %d starts at %d, want %d: %+v", k, g.s, p, v.segs)
			}
			if g.lit {
				if !bytes.Equal(dec, src) {
					t.Fatalf("literal segment %d: %q is not %q", k, dec, src)
				}
				for i := range src {
					if _, n := decodeAt(nil, text[int(g.s)+i:]); n > 0 && strings.IndexByte(set, src[i]) >= 0 {
						t.Fatalf("escape at %d of %q left undecoded", int(g.s)+i, text)
					}
				}
			} else if out, n := decodeAt(nil, text[g.s:]); n != int(g.sn) || !bytes.Equal(out, dec) {
				t.Fatalf("segment %d (%q from %q) does not match its escape", k, dec, src)
			}
			p += int(g.sn)
		}
		if p != len(text) {
			t.Fatalf("segments end at %d of %d", p, len(text))
		}
	})
}

// TestViewToParent: bytes of a view map to the text, a byte inside an escape's output to the
// whole escape.
func TestViewToParent(t *testing.T) {
	text := `ab\u00e9cd%41e` // a b [\u00e9 = 2 bytes] c d [%41] e
	v := unescape([]byte(text), `\%`)
	if string(v.dec) != "abécdAe" {
		t.Fatalf("dec = %q", v.dec)
	}
	var got []ival
	for p := range v.dec {
		got = append(got, v.toParent(p, p+1, nil)...)
	}
	want := []ival{{0, 1}, {1, 2}, {2, 8}, {2, 8}, {8, 9}, {9, 10}, {10, 13}, {13, 14}}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(ival{})); diff != "" {
		t.Errorf("toParent per byte of the view (-want +got):\n%s", diff)
	}
}

// TestEachView: a view per scheme with an escape, then the combined one when there are two.
func TestEachView(t *testing.T) {
	for _, tc := range []struct {
		text string
		want []string
	}{
		{`%zz \q &x`, nil},
		{`a\nb%20`, []string{"a\nb%20", `a\nb `, "a\nb "}},
		{`&#45;`, []string{"-"}},
	} {
		var got []string
		eachView([]byte(tc.text), func(v *view) { got = append(got, string(v.dec)) })
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("views of %q (-want +got):\n%s", tc.text, diff)
		}
	}
}
