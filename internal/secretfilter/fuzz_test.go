package secretfilter

import (
	"bytes"
	"slices"
	"testing"
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
		last := 0
		for _, h := range append(hits, Hit{Start: len(text)}) {
			kept := text[last:h.Start]
			for _, form := range encodings(secret) {
				if bytes.Contains(kept, form) {
					t.Fatalf("text kept by Redact holds an encoding of the secret: %q", kept)
				}
			}
			last = h.End
		}
	})
}

// FuzzKeywords checks the automaton against a naive search, keywords overlapping included.
func FuzzKeywords(f *testing.F) {
	words := []string{"he", "she", "his", "hers", "sk-", "sk-ant-", "ant", "AKIA", "://", "t3blbkfj", "\xff\x00"}
	k := newKeywords(words)
	f.Add([]byte("ushers SK-ANT-api https://x AKIAakia T3BlbkFJ \xff\x00"))
	f.Fuzz(func(t *testing.T, text []byte) {
		type occ struct{ id, start int }
		var got, want []occ
		k.find(text, func(id, start int) { got = append(got, occ{id, start}) })
		folded := asciiLower(text)
		for end := 1; end <= len(text); end++ {
			for id, w := range words {
				if s := end - len(w); s >= 0 && bytes.Equal(folded[s:end], asciiLower([]byte(w))) {
					want = append(want, occ{id, s})
				}
			}
		}
		key := func(o occ) int { return (o.start+len(words[o.id]))*64 + o.id }
		slices.SortFunc(got, func(a, b occ) int { return key(a) - key(b) })
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
