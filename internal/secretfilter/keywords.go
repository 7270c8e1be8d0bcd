package secretfilter

// keywords is an Aho-Corasick automaton over ASCII-case-folded bytes: one pass over a text
// reports every occurrence of every keyword, overlapping ones included. It is the prefilter that
// decides which rules' regular expressions run and where, which is where the filter's
// throughput comes from (a byte costs one table load unless a keyword ends there).
type keywords struct {
	next []uint32  // state<<8 | byte -> next state, hitFlag set when keywords end there
	out  [][]int32 // per state, the ids of the keywords that end in it (suffix links folded in)
	lens []int     // per keyword id, its length in bytes
	// live holds a bit per pair of bytes (a | b<<8, as binary.LittleEndian.Uint16 reads them):
	// set unless, from the root, reading a then b reaches the state that reading b alone does,
	// with no keyword ending at a. A pair whose bit is clear can be skipped over a byte at a
	// time without running the automaton (find's fast path); most pairs of ordinary text are.
	live [1 << 16 / 64]uint64
}

const hitFlag = 1 << 31

// fold lower-cases ASCII letters only: keywords are ASCII in practice, and folding other bytes
// would need a decoder on the hot path.
func fold(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

func newKeywords(words []string) *keywords {
	// delta[s][c] == 0 means no trie edge: no edge leads back to the root, state 0.
	delta, k := [][256]int32{{}}, &keywords{out: [][]int32{nil}, lens: make([]int, len(words))}
	for id, w := range words {
		s := int32(0)
		for i := range len(w) {
			if c := fold(w[i]); delta[s][c] == 0 {
				delta, k.out = append(delta, [256]int32{}), append(k.out, nil)
				delta[s][c] = int32(len(delta) - 1)
			}
			s = delta[s][fold(w[i])]
		}
		k.out[s], k.lens[id] = append(k.out[s], int32(id)), len(w)
	}
	// Breadth first, so that a state's failure target is complete before the state itself.
	fail := make([]int32, len(delta))
	for queue := []int32{0}; len(queue) > 0; queue = queue[1:] {
		s := queue[0]
		k.out[s] = append(k.out[s], k.out[fail[s]]...)
		for c := range 256 {
			if n := delta[s][c]; n != 0 {
				if s != 0 {
					fail[n] = delta[fail[s]][c]
				}
				queue = append(queue, n)
			} else if s != 0 {
				delta[s][c] = delta[fail[s]][c]
			}
		}
	}
	k.next = make([]uint32, len(delta)<<8)
	for s := range delta {
		for c := range 256 {
			t := delta[s][fold(byte(c))]
			k.next[s<<8|c] = uint32(t)
			if len(k.out[t]) > 0 {
				k.next[s<<8|c] |= hitFlag
			}
		}
		// Line breaks leave the state as it is, so that a keyword a wrap split is found
		// (join.go); no keyword holds one.
		k.next[s<<8|'\n'], k.next[s<<8|'\r'] = uint32(s), uint32(s)
	}
	for a := range 256 {
		t := k.next[a]
		for b := range 256 {
			if t&hitFlag != 0 || k.next[(t&^hitFlag)<<8|uint32(b)] != k.next[b] {
				k.live[(a|b<<8)>>6] |= 1 << ((a | b<<8) & 63)
			}
		}
	}
	return k
}

// find calls hit with the id and the offset of every keyword occurrence in text, in order of
// their end offsets: the offset is the end less the keyword's length, which start corrects
// when the occurrence has line breaks inside it (the loop is kept small enough to be inlined:
// it is the filter's hottest).
//
// At the root, a byte whose pair with the next one is not live (see keywords.live) leaves the
// automaton where the next byte alone would, with no keyword ending there: it is skipped, and
// the automaton runs only from the first live pair on until it is back at the root. Both
// paths report the same occurrences; the fast one reads 8 KiB of bits instead of the states.
func (k *keywords) find(text []byte, hit func(id, at int)) {
	s := uint32(0)
	for i := 0; i < len(text); i++ {
		if s == 0 {
			i = k.skip(text, i)
		}
		c := text[i]
		t := k.next[s<<8|uint32(c)]
		s = t &^ hitFlag
		if t&hitFlag != 0 {
			for _, id := range k.out[s] {
				hit(int(id), i+1-k.lens[id])
			}
		}
	}
}

// skip returns the first i' >= i at which the pair of bytes text[i'], text[i'+1] is live, or
// the last index: each byte before i' leaves the automaton, started at the root, where the byte
// after it alone would, with no keyword ending there (keywords.live), so running it from the
// root at i' reports exactly what running it from the root at i does.
func (k *keywords) skip(text []byte, i int) int {
	if i+1 >= len(text) {
		return i
	}
	a := uint32(text[i])
	for j, c := range text[i+1:] {
		if p := a | uint32(c)<<8; k.live[p>>6]&(1<<(p&63)) != 0 {
			return i + j
		}
		a = uint32(c)
	}
	return len(text) - 1
}

// start returns where in text the occurrence of keyword id that find reported at at starts:
// at itself, unless line breaks inside the occurrence ("sk-a\nnt-"), which do not count in its
// length, put it earlier.
func (k *keywords) start(text []byte, id, at int) int {
	end := at + k.lens[id] - 1 // its last byte
	if at >= 0 && !hasBreak(text[at:end]) {
		return at
	}
	at = end
	for n := k.lens[id] - 1; n > 0; at-- {
		if c := text[at-1]; c != '\n' && c != '\r' {
			n--
		}
	}
	return at
}

// hasBreak reports whether b, a keyword's span, holds a line break.
func hasBreak(b []byte) bool {
	for _, c := range b {
		if c == '\n' || c == '\r' {
			return true
		}
	}
	return false
}
