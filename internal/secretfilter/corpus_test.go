package secretfilter

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// corpusCase is one labelled text of testdata/corpus: Want lists the rule of each hit in order
// (empty for a near miss that must not match), Secrets the credential values Redact must
// remove. Every value in the corpus is fake: generated at random in the real formats.
type corpusCase struct {
	Name    string   `json:"name"`
	Text    string   `json:"text"`
	Want    []string `json:"want"`
	Secrets []string `json:"secrets"`
}

func loadCorpus(tb testing.TB) []corpusCase {
	tb.Helper()
	files, err := filepath.Glob("testdata/corpus/*.json")
	if err != nil || len(files) == 0 {
		tb.Fatalf("no corpus: %v", err)
	}
	var all []corpusCase
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			tb.Fatal(err)
		}
		var cs []corpusCase
		if err := json.Unmarshal(b, &cs); err != nil {
			tb.Fatalf("read %s: %v", p, err)
		}
		all = append(all, cs...)
	}
	return all
}

func newTestFilter(tb testing.TB) *Filter {
	tb.Helper()
	f, err := New(nil)
	if err != nil {
		tb.Fatal(err)
	}
	return f
}

func ruleNames(hits []Hit) []string {
	names := []string{}
	for _, h := range hits {
		names = append(names, h.Rule)
	}
	return names
}

func TestCorpus(t *testing.T) {
	f := newTestFilter(t)
	perRule := map[string]int{}
	for _, tc := range loadCorpus(t) {
		t.Run(tc.Name, func(t *testing.T) {
			hits := f.Scan([]byte(tc.Text))
			if diff := cmp.Diff(append([]string{}, tc.Want...), ruleNames(hits)); diff != "" {
				t.Errorf("Scan rules (-want +got):\n%s", diff)
			}
			out, _ := f.Redact([]byte(tc.Text))
			for _, s := range tc.Secrets {
				if bytes.Contains(out, []byte(s)) {
					t.Errorf("Redact output still holds secret #%d of the case", slices.Index(tc.Secrets, s))
				}
			}
			if len(tc.Want) == 0 && !bytes.Equal(out, []byte(tc.Text)) {
				t.Errorf("Redact changed a near miss")
			}
		})
		for _, r := range slices.Compact(slices.Clone(tc.Want)) {
			perRule[r]++
		}
	}
	// The corpus must keep at least three true positives for each curated rule.
	for _, r := range f.Rules()[1:] {
		if perRule[r] < 3 {
			t.Errorf("corpus has %d true positives for rule %s, want at least 3", perRule[r], r)
		}
	}
}
