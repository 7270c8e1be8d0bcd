package secretfilter

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/zricethezav/gitleaks/v8/detect"
	"github.com/zricethezav/gitleaks/v8/report"
)

// The tool corpus (testdata/corpus/tools, issue 21): real tools' output over files of fake
// secrets. src/ holds the files, secrets.json what each holds, out/<format>/<source> what a
// tool printed over it (capture.sh runs the tools; fakes.py writes the files).

const toolsDir = "testdata/corpus/tools"

type planted struct {
	Rule  string `json:"rule"`
	Value string `json:"value"`
}

type toolCase struct {
	format, source string
	text           []byte
	want           []planted // empty: a source without secrets
}

func loadToolCorpus(tb testing.TB) []toolCase {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(toolsDir, "secrets.json"))
	if err != nil {
		tb.Fatalf("read secrets.json: %v", err)
	}
	var labels map[string][]planted
	if err := json.Unmarshal(b, &labels); err != nil {
		tb.Fatalf("read secrets.json: %v", err)
	}
	files, err := filepath.Glob(filepath.Join(toolsDir, "out", "*", "*"))
	if err != nil || len(files) == 0 {
		tb.Fatalf("no captured outputs in %s/out: %v", toolsDir, err)
	}
	var cases []toolCase
	for _, p := range files {
		source, format := filepath.Base(p), filepath.Base(filepath.Dir(p))
		want, ok := labels[source]
		if !ok {
			tb.Fatalf("%s: source %q is not in secrets.json", p, source)
		}
		text, err := os.ReadFile(p)
		if err != nil {
			tb.Fatal(err)
		}
		cases = append(cases, toolCase{format, source, text, want})
	}
	return cases
}

// toolMisses are the captured cases a rule does not find, each with the reason; the test fails
// if one of them starts to be found (so the list stays true) or another one is missed.
var toolMisses = map[string]string{}

// layer1Only is a filter without rules: layer 1 alone, to see what it finds by itself.
func layer1Only(secrets []planted) *Filter {
	f := &Filter{kw: newKeywords(nil), allNames: []string{RuleHarnessSecret}}
	f.exact.Store(newExactSet(nil, nil))
	for _, s := range secrets {
		f.AddSecret(s.Rule, []byte(s.Value))
	}
	return f
}

// TestToolCorpus: every planted secret in every captured format is found by its rule and, held
// as the harness's own secret, by layer 1; nothing is found in the sources without secrets;
// Redact leaves nothing either layer finds, and no 12 characters of a secret as they were.
func TestToolCorpus(t *testing.T) {
	f := newTestFilter(t)
	for _, tc := range loadToolCorpus(t) {
		name := tc.format + "/" + tc.source
		t.Run(name, func(t *testing.T) {
			hits := f.Scan(tc.text)
			got := ruleNames(hits)
			var missed []string
			for _, p := range tc.want {
				if !slices.Contains(got, p.Rule) {
					missed = append(missed, p.Rule)
				}
			}
			reason, known := toolMisses[name]
			switch {
			case len(tc.want) == 0 && len(hits) > 0:
				t.Errorf("source without secrets: hits %v", hits)
			case len(missed) > 0 && !known:
				t.Errorf("missed %v; hits %v", missed, hits)
			case len(missed) == 0 && known:
				t.Errorf("listed as missed (%s) but found", reason)
			}
			for _, r := range got {
				if !slices.ContainsFunc(tc.want, func(p planted) bool { return p.Rule == r }) {
					t.Errorf("hit of rule %s, which the source does not hold", r)
				}
			}
			if len(tc.want) == 0 {
				return
			}
			l1 := layer1Only(tc.want)
			if h := l1.Scan(tc.text); len(h) == 0 {
				t.Errorf("layer 1 holding the secrets finds none")
			}
			out, _ := f.Redact(tc.text)
			if h := f.Scan(out); len(h) > 0 {
				t.Errorf("Redact left hits %v in %q", h, out)
			}
			out, _ = l1.Redact(tc.text)
			if h := l1.Scan(out); len(h) > 0 {
				t.Errorf("layer 1's Redact left hits %v", h)
			}
			src, err := os.ReadFile(filepath.Join(toolsDir, "src", tc.source))
			if err != nil {
				t.Fatal(err)
			}
			src = bytes.ReplaceAll(src, []byte("\n"), nil) // as paste -sd "" joins it
			for _, p := range tc.want {
				for i := 0; i+12 <= len(p.Value); i++ {
					// A window the source holds elsewhere too (an OpenSSH key repeats its public
					// part), even across a line, is not the secret's own.
					if w := []byte(p.Value[i : i+12]); bytes.Count(src, w) == 1 && bytes.Contains(out, w) {
						t.Fatalf("layer 1's Redact left %q of a secret", p.Value[i:i+12])
					}
				}
			}
		})
	}
}

// score is recall and precision over planted secrets: a secret is found by a hit of its rule
// (ours) or a finding that holds it (gitleaks); a false positive is a rule hit the source does
// not hold, or a finding that holds no planted secret.
type score struct{ tp, fn, fp int }

func (s score) String() string {
	r, p := "-", "-"
	if s.tp+s.fn > 0 {
		r = fmt.Sprintf("%.2f", float64(s.tp)/float64(s.tp+s.fn))
	}
	if s.tp+s.fp > 0 {
		p = fmt.Sprintf("%.2f", float64(s.tp)/float64(s.tp+s.fp))
	} else if s.fp == 0 {
		p = "1.00"
	}
	return r + " / " + p
}

func scoreOurs(f *Filter, tc toolCase) score {
	var s score
	got := slices.Compact(slices.Sorted(slices.Values(ruleNames(f.Scan(tc.text)))))
	for _, p := range tc.want {
		if slices.Contains(got, p.Rule) {
			s.tp++
		} else {
			s.fn++
		}
	}
	for _, r := range got {
		if !slices.ContainsFunc(tc.want, func(p planted) bool { return p.Rule == r }) {
			s.fp++
		}
	}
	return s
}

func scoreGitleaks(d *detect.Detector, tc toolCase) score {
	var s score
	findings := d.DetectBytes(tc.text)
	holds := func(secret, match, v string) bool {
		return strings.Contains(secret, v) || strings.Contains(match, v) || len(secret) >= 12 && strings.Contains(v, secret)
	}
	for _, p := range tc.want {
		if slices.ContainsFunc(findings, func(x report.Finding) bool { return holds(x.Secret, x.Match, p.Value) }) {
			s.tp++
		} else {
			s.fn++
		}
	}
	seen := map[string]bool{}
	for _, x := range findings {
		if !slices.ContainsFunc(tc.want, func(p planted) bool { return holds(x.Secret, x.Match, p.Value) }) && !seen[x.RuleID+x.Secret] {
			seen[x.RuleID+x.Secret] = true
			s.fp++
		}
	}
	return s
}

// TestToolCorpusReport logs recall / precision per format, of this filter and of gitleaks v8
// (default configuration, decoding on as its CLI has it), with -v:
//
//	go test -run TestToolCorpusReport -v ./internal/secretfilter
func TestToolCorpusReport(t *testing.T) {
	if testing.Short() {
		t.Skip("gitleaks is slow to start; -short skips the report")
	}
	f, d := newTestFilter(t), gitleaksDetector(t, 5)
	ours, theirs, exact := map[string]score{}, map[string]score{}, map[string]score{}
	add := func(m map[string]score, k string, s score) {
		a := m[k]
		m[k] = score{a.tp + s.tp, a.fn + s.fn, a.fp + s.fp}
	}
	for _, tc := range loadToolCorpus(t) {
		o, g := scoreOurs(f, tc), scoreGitleaks(d, tc)
		add(ours, tc.format, o)
		add(theirs, tc.format, g)
		add(ours, "all", o)
		add(theirs, "all", g)
		for _, p := range tc.want { // layer 1 holding each planted secret alone
			var e score
			if len(layer1Only([]planted{p}).Scan(tc.text)) > 0 {
				e.tp++
			} else {
				e.fn++
			}
			add(exact, tc.format, e)
			add(exact, "all", e)
		}
	}
	formats := slices.Collect(func(yield func(string) bool) {
		for k := range ours {
			if !yield(k) {
				return
			}
		}
	})
	sort.Strings(formats)
	var b strings.Builder
	fmt.Fprintf(&b, "\n| %-12s | %-14s | %-14s | %-8s |\n", "format", "secretfilter", "gitleaks", "layer 1")
	for _, k := range formats {
		r, _, _ := strings.Cut(exact[k].String(), " ")
		fmt.Fprintf(&b, "| %-12s | %-14s | %-14s | %-8s |\n", k, ours[k], theirs[k], r)
	}
	t.Log("recall / precision per format (layer 1: recall holding the planted secret)" + b.String())
}
