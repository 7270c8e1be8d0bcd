package secretfilter

// keywords is an Aho-Corasick automaton over ASCII-case-folded bytes: one pass over a text
// reports every occurrence of every keyword, overlapping ones included. It is the prefilter that
// decides which rules' regular expressions run and where, which is where the filter's
// throughput comes from (a byte costs one table load unless a keyword ends there).
type keywords struct {
	next []uint32  // state<<8 | byte -> next state, hitFlag set when keywords end there
	out  [][]int32 // per state, the ids of the keywords that end in it (suffix links folded in)
	lens []int     // per keyword id, its length in bytes
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
	}
	return k
}

// find calls hit with the id and start offset of every keyword occurrence in text, in order of
// their end offsets.
func (k *keywords) find(text []byte, hit func(id, start int)) {
	s := uint32(0)
	for i, c := range text {
		t := k.next[s<<8|uint32(c)]
		s = t &^ hitFlag
		if t&hitFlag != 0 {
			for _, id := range k.out[s] {
				hit(int(id), i+1-k.lens[id])
			}
		}
	}
}
