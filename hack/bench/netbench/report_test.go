package main

import (
	"math"
	"testing"
)

func TestSignTest(t *testing.T) {
	for _, tc := range []struct {
		w, l int
		p    float64
	}{
		{0, 0, 1},
		{1, 0, 1},
		{3, 0, 0.25},
		{5, 0, 0.0625},
		{6, 0, 0.03125},
		{0, 6, 0.03125},
		{6, 1, 0.125},
		{7, 0, 0.015625},
		{3, 3, 1},
	} {
		if got := signTest(tc.w, tc.l); math.Abs(got-tc.p) > 1e-12 {
			t.Errorf("signTest(%d, %d) = %v, want %v", tc.w, tc.l, got, tc.p)
		}
	}
}

func TestCompare(t *testing.T) {
	for _, tc := range []struct {
		name           string
		a, ref         []float64
		higherIsBetter bool
		ahead, behind  bool
		wins, losses   int
	}{
		{"ahead every round", []float64{11, 12, 13, 14, 15, 16}, []float64{10, 11, 12, 13, 14, 15}, true, true, false, 6, 0},
		{"lower is better", []float64{9, 9, 9, 9, 9, 9}, []float64{10, 10, 10, 10, 10, 10}, false, true, false, 6, 0},
		{"behind every round", []float64{1, 1, 1, 1, 1, 1}, []float64{2, 2, 2, 2, 2, 2}, true, false, true, 0, 6},
		{"one loss in six is a tie", []float64{11, 11, 11, 11, 11, 9}, []float64{10, 10, 10, 10, 10, 10}, true, false, false, 5, 1},
		// Ranges overlap, yet every paired round has the lead: settled.
		{"overlapping ranges, paired lead", []float64{12, 20, 13, 21, 14, 22}, []float64{11, 19, 12, 20, 13, 21}, true, true, false, 6, 0},
		{"equal rounds count as neither", []float64{5, 5, 5, 5, 5, 5}, []float64{5, 5, 5, 5, 5, 5}, true, false, false, 0, 0},
		{"unpaired rounds", []float64{11, 12}, []float64{10}, true, false, false, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := compare(rounds(tc.a...), rounds(tc.ref...), tc.higherIsBetter)
			if o.ahead() != tc.ahead || o.behind() != tc.behind || o.Wins != tc.wins || o.Losses != tc.losses {
				t.Errorf("compare = %+v (ahead %v, behind %v), want ahead %v behind %v wins %d losses %d: %s", o, o.ahead(), o.behind(), tc.ahead, tc.behind, tc.wins, tc.losses, o)
			}
		})
	}
}

// A round that failed leaves no value: the rounds after it must not pair with the other
// peer's, even when both have as many values.
func TestCompareRefusesRoundsWithGaps(t *testing.T) {
	a := &sample{Values: []float64{11, 12, 13, 14, 15}, Rounds: 6}
	ref := &sample{Values: []float64{10, 11, 12, 13, 14}, Rounds: 6}
	if o := compare(a, ref, true); o.Rounds != 0 || o.ahead() || o.behind() {
		t.Errorf("compare with a failed round = %+v, want unpaired", o)
	}
	if o := compare(rounds(1, 2, 3, 4, 5, 6), rounds(2, 3, 4, 5, 6, 7), true); !o.behind() {
		t.Errorf("compare = %+v, want behind", o)
	}
}

func rounds(v ...float64) *sample { return &sample{Values: v, Rounds: len(v)} }

func TestGoalAtLeastIsMetUnlessSettledBehind(t *testing.T) {
	ref := rounds(10, 10, 10, 10, 10, 10)
	tie := newGoal("net", "bulk throughput ≥ the stdlib proxy's", 1, true, rounds(11, 9, 11, 9, 11, 9), ref)
	behind := newGoal("net", "bulk throughput ≥ the stdlib proxy's", 0.9, true, rounds(9, 9, 9, 9, 9, 9), ref)
	aheadTie := newGoal("net", "ahead of smokescreen: bulk", 1, true, rounds(11, 9, 11, 9, 11, 9), ref)
	few := newGoal("net", "bulk throughput ≥ the stdlib proxy's", 1, true, rounds(11, 9), rounds(10, 10))
	if !tie.Met || behind.Met || aheadTie.Met || few.Met {
		t.Errorf("≥ with a tie met=%v (want true), ≥ settled behind met=%v (want false), ahead with a tie met=%v (want false), ≥ in two rounds met=%v (want false)", tie.Met, behind.Met, aheadTie.Met, few.Met)
	}
}
