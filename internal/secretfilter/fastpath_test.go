package secretfilter

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

// The fast paths of issue 21 ("large bodies in under 1 ms added") must not change a hit: these
// hold each one to the slow path it stands in for.

// wrapAt inserts sep every n bytes of s.
func wrapAt(s []byte, n int, sep string) []byte {
	var out []byte
	for i := 0; i < len(s); i += n {
		if i > 0 {
			out = append(out, sep...)
		}
		out = append(out, s[i:min(len(s), i+n)]...)
	}
	return out
}

// FuzzSpansBreak: when spansBreak says no form can cross a line break of text, every hit layer 1
// finds in squeezed(text) is one it finds in text itself, mapped to the same bytes: skipping
// the squeezed text loses nothing.
func FuzzSpansBreak(f *testing.F) {
	for _, s := range testSecrets {
		for _, form := range spellings(s) {
			for _, n := range []int{7, 20, 64} {
				for _, sep := range []string{"\n", "\r\n", " \n  ", "\n\n", "\n \n\t"} {
					f.Add([]byte("key:\n  "+string(wrapAt([]byte(form), n, sep))+"\nend"), s)
				}
			}
			f.Add([]byte("a "+form+"\nb "+form+" c\n\n"+form), s)
		}
	}
	f.Add([]byte(strings.Repeat("func main() { fmt.Println(\"hello, world\") } // a line of source\n", 20)), testSecrets[0])
	f.Fuzz(func(t *testing.T, text, secret []byte) {
		if len(secret) < MinSecretLen {
			return
		}
		x := newExactSet([]string{"s"}, [][]byte{secret})
		q := squeezed(text)
		if q == nil || x.spansBreak(text) {
			return
		}
		direct := x.match(text, nil)
		sq := squeeze(&view{dec: text})
		for _, h := range x.match(q, nil) {
			ivs := sq.toRoot([]ival{{h.Start, h.End}})
			if len(ivs) != 1 || !slices.Contains(direct, Hit{Rule: h.Rule, Start: ivs[0].a, End: ivs[0].b}) {
				t.Fatalf("spansBreak is false, but squeezed(text)[%d:%d] is a hit at %v that text alone does not give (%v)", h.Start, h.End, ivs, direct)
			}
		}
	})
}

// TestSpansBreak: a form wrapped over lines is seen, ordinary lines are not.
func TestSpansBreak(t *testing.T) {
	s := testSecrets[0]
	x := newExactSet([]string{"s"}, [][]byte{s})
	src := []byte(strings.Repeat("func main() { fmt.Println(\"hello, world\") } // a line of source\n\n", 50))
	for _, tc := range []struct {
		name string
		text []byte
		want bool
	}{
		{"source", src, false},
		{"no breaks", s, false},
		{"secret inside a line", append(append(append(slices.Clone(src), "x = "...), s...), " // y\n"...), false},
		{"secret at a line end", append(append(slices.Clone(src), s...), '\n'), true}, // it could go on: read squeezed
		{"wrapped at 20", wrapAt(s, 20, "\n"), true},
		{"wrapped with CRLF and indent", wrapAt(s, 30, "\r\n    "), true},
		{"wrapped at 10 with blank lines", wrapAt(s, 10, "\n\n"), true},
		{"hex wrapped", wrapAt([]byte(strings.ToUpper(string(bytes.Repeat([]byte("ab"), 8))+"0")), 4, "\n"), false},
	} {
		if got := x.spansBreak(tc.text); got != tc.want {
			t.Errorf("%s: spansBreak = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestKeywordsCurated checks the automaton's skipping (keywords.live) with the curated keywords
// against a naive search, over the corpora and shapes made to start keywords everywhere.
func TestKeywordsCurated(t *testing.T) {
	f := newTestFilter(t)
	var words []string
	for _, r := range f.rules {
		words = append(words, r.keywords...)
	}
	k := newKeywords(words)
	texts := [][]byte{[]byte("sk-a\nnt-x AK\r\nIA h\n\ne s\nk_live_ -----BEGIN ://x eyJ a3t"), []byte("authorization"), []byte("a"), nil}
	for _, tc := range loadCorpus(t) {
		texts = append(texts, []byte(tc.Text))
	}
	for _, tc := range loadToolCorpus(t) {
		texts = append(texts, tc.text)
	}
	for _, unit := range adversarialShapes {
		texts = append(texts, bytes.Repeat([]byte(unit), 20))
	}
	for _, w := range words {
		texts = append(texts, []byte(strings.Repeat(w[:len(w)/2]+"\n"+w[len(w)/2:]+" ", 3)))
	}
	type occ struct{ id, at int }
	for _, text := range texts {
		var got, want []occ
		k.find(text, func(id, at int) { got = append(got, occ{id, at}) })
		// The naive automaton: every byte through the table, no skipping.
		s := uint32(0)
		for i, c := range text {
			tr := k.next[s<<8|uint32(c)]
			s = tr &^ hitFlag
			if tr&hitFlag != 0 {
				for _, id := range k.out[s] {
					want = append(want, occ{int(id), i + 1 - k.lens[id]})
				}
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("find over %.60q = %v; want %v", text, got, want)
		}
	}
}
