package secretfilter

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"
)

// FuzzScan: on any text, with any secret added, Scan does not panic and its hits are in bounds,
// sorted and disjoint; Redact is consistent and leaves no listed encoding of the secret in the
// text it keeps.
func FuzzScan(f *testing.F) {
	base := newTestFilter(f)
	for _, tc := range loadCorpus(f) {
		secret := []byte("fuzz-secret-0")
		if len(tc.Secrets) > 0 {
			secret = []byte(tc.Secrets[0])
		}
		f.Add([]byte(tc.Text), secret)
	}
	for _, s := range testSecrets {
		for _, form := range spellings(s) {
			f.Add([]byte("x="+form+"&y"), s)
		}
	}
	for _, unit := range adversarialShapes {
		f.Add(bytes.Repeat([]byte(unit), 50), []byte("fuzz-secret-1"))
	}
	f.Fuzz(func(t *testing.T, text, secret []byte) {
		// A fresh layer 1 over the shared layer 2, so secrets do not pile up across inputs.
		g := &Filter{rules: base.rules, kw: base.kw, kwRule: base.kwRule, allNames: base.allNames}
		g.exact.Store(newExactSet(nil, nil))
		g.AddSecret("s", secret)
		hits := g.Scan(text)
		for i, h := range hits {
			if h.Start < 0 || h.End > len(text) || h.Start >= h.End || !slices.Contains(g.allNames, h.Rule) {
				t.Fatalf("hit %d = %+v out of bounds [0,%d) or unnamed", i, h, len(text))
			}
			if i > 0 && hits[i-1].End > h.Start {
				t.Fatalf("hits %d and %d overlap or are unsorted: %v", i-1, i, hits)
			}
		}
		out, rhits := g.Redact(text)
		if again, _ := g.Redact(text); !bytes.Equal(out, again) || !slices.Equal(hits, rhits) {
			t.Fatalf("Redact is not consistent")
		}
		if len(secret) < MinSecretLen {
			return
		}
		assertRedacted(t, text, secret, hits)
	})
}

// assertRedacted fails if a part of text that hits leave (what Redact keeps) holds a listed
// encoding of secret, raw or in one of its decoded views.
func assertRedacted(t *testing.T, text, secret []byte, hits []Hit) {
	t.Helper()
	last := 0
	for _, h := range append(slices.Clone(hits), Hit{Start: len(text)}) {
		kept := [][]byte{text[last:h.Start]}
		eachView(kept[0], func(v *view) { kept = append(kept, v.dec) })
		for _, k := range kept {
			found := bytes.Contains(asciiLower(k), []byte(hex.EncodeToString(secret))) // any case
			for _, form := range encodings(secret) {
				found = found || bytes.Contains(k, form)
			}
			if found {
				t.Fatalf("text kept by Redact holds an encoding of the secret: %q", k)
			}
		}
		last = h.End
	}
}

// FuzzPartialEscape: a secret with the characters mask picks escaped, in one scheme or all three
// (mask[0] says which), is found whole, whatever the secret: escapes is the test's own encoder.
func FuzzPartialEscape(f *testing.F) {
	base := newTestFilter(f)
	for _, s := range testSecrets {
		for _, mask := range []string{"\x00\x01", "\x01\x01\x00\x03\x05", "\x02\x01\x03", "\x03\x01\x03\x05\x07\x09"} {
			f.Add(s, []byte(mask))
		}
	}
	f.Add([]byte(`pa%41ss-w\x&#45;rd-&amp;1`), []byte("\x00\x01\x00"))
	f.Fuzz(func(t *testing.T, secret, mask []byte) {
		if len(secret) < MinSecretLen || len(mask) == 0 {
			return
		}
		g := &Filter{rules: base.rules, kw: base.kw, kwRule: base.kwRule, allNames: base.allNames}
		g.exact.Store(newExactSet(nil, nil))
		g.AddSecret("s", secret)
		esc := escapes(secret, mask)
		text := append(append([]byte("out: "), esc...), " ok"...)
		hits := g.Scan(text)
		if !slices.ContainsFunc(hits, func(h Hit) bool { return h.Start <= 5 && 5+len(esc) <= h.End }) {
			t.Fatalf("%q escaped as %q: hits %v do not cover it", secret, esc, hits)
		}
		assertRedacted(t, text, secret, hits)
	})
}

// escapes writes s with some characters escaped: mask[0]%4 picks JSON and \xHH (0), percent (1),
// HTML entities (2) or all three (3); mask[1:], cycled, has one byte per character, whose low
// bit says whether to escape it and the rest which way. An introducer of a scheme in use ('\\',
// '%', '&') is always escaped, as an encoder does.
func escapes(s, mask []byte) []byte {
	mode, mask := mask[0]%4, mask[1:]
	var out []byte
	for i := 0; len(s) > 0; i++ {
		r, n := utf8.DecodeRune(s)
		c, m := s[:n], byte(0)
		if len(mask) > 0 {
			m = mask[i%len(mask)]
		}
		each := func(format string) (b []byte) { // every byte of c
			for _, x := range c {
				b = fmt.Appendf(b, format, x)
			}
			return b
		}
		var ways [][]byte
		if mode == 0 || mode == 3 {
			ways = append(ways, each(`\x%02x`))
			if k := strings.IndexByte("\"\\/\b\f\n\r\t", c[0]); k >= 0 && n == 1 {
				ways = append(ways, []byte{'\\', `"\/bfnrt`[k]})
			}
			if r != utf8.RuneError || n > 1 {
				var u, U []byte
				for _, x := range utf16.Encode([]rune{r}) {
					u, U = fmt.Appendf(u, `\u%04x`, x), fmt.Appendf(U, `\u%04X`, x)
				}
				ways = append(ways, u, U)
			}
		}
		if mode == 1 || mode == 3 {
			ways = append(ways, each("%%%02X"), each("%%%02x"))
		}
		if (mode == 2 || mode == 3) && (r != utf8.RuneError || n > 1) {
			ways = append(ways, fmt.Appendf(nil, "&#%d;", r), fmt.Appendf(nil, "&#x%X;", r))
			if k := strings.IndexByte("&<>\"'", c[0]); k >= 0 {
				ways = append(ways, []byte(named[k]))
			}
		}
		forced := n == 1 && (c[0] == '\\' && mode != 1 && mode != 2 || c[0] == '%' && mode%2 == 1 || c[0] == '&' && mode >= 2)
		switch {
		case len(ways) == 0 || m&1 == 0 && !forced:
			out = append(out, c...)
		default:
			out = append(out, ways[int(m>>1)%len(ways)]...)
		}
		s = s[n:]
	}
	return out
}

// FuzzKeywords checks the automaton against a naive search, keywords overlapping included, in
// the text with its line breaks ('\n', '\r') removed (a keyword a wrap split is found), each
// occurrence at the offset of its first byte in the text.
func FuzzKeywords(f *testing.F) {
	words := []string{"he", "she", "his", "hers", "sk-", "sk-ant-", "ant", "AKIA", "://", "t3blbkfj", "\xff\x00"}
	k := newKeywords(words)
	f.Add([]byte("ushers SK-ANT-api https://x AKIAakia T3BlbkFJ \xff\x00"))
	f.Add([]byte("sk-a\nnt-x AK\r\nIA h\n\ne"))
	f.Fuzz(func(t *testing.T, text []byte) {
		type occ struct{ id, start int }
		var got, want []occ
		k.find(text, func(id, at int) { got = append(got, occ{id, k.start(text, id, at)}) })
		var joined []byte
		var at []int // at[i]: offset in text of joined[i]
		for i, c := range text {
			if c != '\n' && c != '\r' {
				joined, at = append(joined, c), append(at, i)
			}
		}
		folded := asciiLower(joined)
		for end := 1; end <= len(joined); end++ {
			for id, w := range words {
				if s := end - len(w); s >= 0 && bytes.Equal(folded[s:end], asciiLower([]byte(w))) {
					want = append(want, occ{id, at[s]})
				}
			}
		}
		key := func(o occ) int { return o.start*64 + o.id }
		slices.SortFunc(got, func(a, b occ) int { return key(a) - key(b) })
		slices.SortFunc(want, func(a, b occ) int { return key(a) - key(b) })
		if !slices.Equal(got, want) {
			t.Fatalf("find = %v; want %v", got, want)
		}
	})
}

func asciiLower(b []byte) []byte {
	out := make([]byte, len(b))
	for i, c := range b {
		out[i] = fold(c)
	}
	return out
}
