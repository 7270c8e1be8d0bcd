package secretfilter

import (
	"math/rand/v2"
	"strings"
	"testing"
)

const (
	alnum   = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	b64url  = alnum + "-_"
	b64std  = alnum + "+/"
	base32  = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
	hexLow  = "0123456789abcdef"
	decimal = "0123456789"
)

// TestRandomTokens: the entropy floors cost no recall. Thousands of random tokens of each format
// (the corpus holds a few) are all found, by the right rule.
func TestRandomTokens(t *testing.T) {
	f := newTestFilter(t)
	r := rand.New(rand.NewPCG(7, 7))
	rs := func(n int, alphabet string) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		return string(b)
	}
	for _, tc := range []struct {
		rule string
		gen  func() string
	}{
		{"anthropic-api-key", func() string { return "sk-ant-api03-" + rs(93, b64url) + "AA" }},
		{"anthropic-admin-key", func() string { return "sk-ant-admin01-" + rs(93, b64url) + "AA" }},
		{"openai-api-key", func() string { return "sk-proj-" + rs(74, b64url) + "T3BlbkFJ" + rs(74, b64url) }},
		{"openai-api-key", func() string { return "sk-" + rs(20, alnum) + "T3BlbkFJ" + rs(20, alnum) }},
		{"aws-access-key-id", func() string { return "AKIA" + rs(16, base32) }},
		{"aws-secret-access-key", func() string { return "aws_secret_access_key = " + rs(40, b64std) }},
		{"github-token", func() string { return "ghp_" + rs(36, alnum) }},
		{"github-token", func() string { return "github_pat_" + rs(22, alnum) + "_" + rs(59, alnum) }},
		{"gitlab-token", func() string { return "glpat-" + rs(20, b64url) }},
		{"slack-token", func() string { return "xoxb-" + rs(12, decimal) + "-" + rs(13, decimal) + "-" + rs(24, alnum) }},
		{"slack-webhook", func() string {
			return "https://hooks.slack.com/services/T" + rs(8, base32) + "/B" + rs(10, base32) + "/" + rs(24, alnum)
		}},
		{"google-api-key", func() string { return "AIza" + rs(35, b64url) }},
		{"stripe-key", func() string { return "sk_live_" + rs(24, alnum) }},
		{"npm-token", func() string { return "npm_" + rs(36, alnum) }},
		{"bearer-token", func() string { return "Authorization: Bearer " + rs(32, hexLow) }},
		{"bearer-token", func() string { return "bearer " + rs(20, b64url) }},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			for range 2000 {
				text := "x " + tc.gen() + " y"
				if hits := f.Scan([]byte(text)); len(hits) != 1 || hits[0].Rule != tc.rule {
					t.Fatalf("Scan(%q) = %v; want one %s hit", text, hits, tc.rule)
				}
			}
		})
	}
}

func TestEntropy(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want float64
	}{
		{"", 0},
		{"aaaa", 0},
		{"abab", 1},
		{"abcd", 2},
		{strings.Repeat("0123456789abcdef", 4), 4},
	} {
		if got := entropy([]byte(tc.in)); got != tc.want {
			t.Errorf("entropy(%q) = %v; want %v", tc.in, got, tc.want)
		}
	}
}
