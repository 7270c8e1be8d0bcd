package secretfilter

import (
	"strings"
	"testing"
)

// Fake credentials for the tests of joins and glued values; gh checks out (githubCut).
const (
	tAnt = "sk-ant-api03-Qm7vX2pL9kR4tW8zN1cB6yH3jF5dG0sA-eU_iO7qP2wE9rT4yU1iO8pA3sD6fG9hJ2kL5zX8cV1bN4mQ7wE0rTAA"
	tGH  = "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"
	tAKI = "AKIAFQGEOZJACZNCCO7U"
	tSec = "IK1zVY5Hr1khWCAhoYlj1K82qp94j89l4XcuG3kW"
	tNPM = "npm_Zq8Lm3Vn7Xc2Bw5Rt9Yk4Hs6Jd1Pf0Ga8Uex"
)

func wrap(s string, w int) string {
	var b strings.Builder
	for i := 0; i < len(s); i += w {
		b.WriteString(s[i:min(len(s), i+w)])
		if i+w < len(s) {
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// TestJoin: a value a line break split is found whole and redacted line by line; a value that
// ends at a line end is not glued to the next line's text; line breaks that are paragraphs or
// indentation are not joined.
func TestJoin(t *testing.T) {
	f := newTestFilter(t)
	for _, tc := range []struct{ name, text, want string }{
		{"id over two lines", "id " + tAKI[:10] + "\n" + tAKI[10:] + " ok", "id [REDACTED:aws-access-key-id]\n[REDACTED:aws-access-key-id] ok"},
		{"crlf", "id " + tAKI[:10] + "\r\n" + tAKI[10:] + "\r\n", "id [REDACTED:aws-access-key-id]\r\n[REDACTED:aws-access-key-id]\r\n"},
		{"keyword split", "key: sk-a\n" + tAnt[4:] + "\n", "key: [REDACTED:anthropic-api-key]\n[REDACTED:anthropic-api-key]\n"},
		{"fold -w 20", wrap("ANTHROPIC_API_KEY="+tAnt+"\n", 20),
			"ANTHROPIC_API_KEY=[REDACTED:anthropic-api-key]" + strings.Repeat("\n[REDACTED:anthropic-api-key]", 5) + "\n"},
		{"secret access key over three lines", wrap("aws_secret_access_key = "+tSec, 20) + "\nregion = x\n",
			"aws_secret_access_ke\ny = [REDACTED:aws-secret-access-key]\n[REDACTED:aws-secret-access-key]\n[REDACTED:aws-secret-access-key]\nregion = x\n"},
		{"second part to the line end", "k: " + tAnt[:70] + "\n" + tAnt[70:] + "\",\n", "k: [REDACTED:anthropic-api-key]\n[REDACTED:anthropic-api-key]\",\n"},
		{"second part looks like a key", "k: " + tAnt[:70] + "\n" + tAnt[70:] + " and more\n", "k: [REDACTED:anthropic-api-key]\n[REDACTED:anthropic-api-key] and more\n"},
		{"not glued to a command", "GITHUB_TOKEN=" + tGH + "\ngh repo list\n", "GITHUB_TOKEN=[REDACTED:github-token]\ngh repo list\n"},
		{"not glued to a word", "ANTHROPIC_API_KEY=" + tAnt + "\nexport PATH=/bin\n", "ANTHROPIC_API_KEY=[REDACTED:anthropic-api-key]\nexport PATH=/bin\n"},
		{"not glued to a diff line", "+Authorization: Bearer " + tSec + "\n+Accept: */*\n", "+Authorization: Bearer [REDACTED:bearer-token]\n+Accept: */*\n"},
		{"indented line", "id " + tAKI[:10] + "\n    " + tAKI[10:] + "\n", ""},
		{"paragraph", "id " + tAKI[:10] + "\n\n" + tAKI[10:] + "\n", ""},
		{"prose", "the trip to asia\nand back, a bearer\nof news\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.want == "" {
				tc.want = tc.text
			}
			if got, _ := f.Redact([]byte(tc.text)); string(got) != tc.want {
				t.Errorf("Redact(%q)\n = %q\nwant %q", tc.text, got, tc.want)
			}
		})
	}
}

// TestGlued: rules find a fixed-length id with no word boundary after it, as `paste -sd ""`
// glues a file's lines; a secret access key glued to the next key name is found, and the first
// 40 characters of a longer value are not; a GitHub token that checks out ends at its 40
// characters.
func TestGlued(t *testing.T) {
	f := newTestFilter(t)
	for _, tc := range []struct{ name, text, want string }{
		{"aws credentials", "[default]aws_access_key_id = " + tAKI + "aws_secret_access_key = " + tSec + "region = eu-west-1",
			"[default]aws_access_key_id = [REDACTED:aws-access-key-id]aws_secret_access_key = [REDACTED:aws-secret-access-key]region = eu-west-1"},
		{"aws env", "AWS_ACCESS_KEY_ID=" + tAKI + "AWS_SECRET_ACCESS_KEY=" + tSec + "AWS_DEFAULT_REGION=us-east-1",
			"AWS_ACCESS_KEY_ID=[REDACTED:aws-access-key-id]AWS_SECRET_ACCESS_KEY=[REDACTED:aws-secret-access-key]AWS_DEFAULT_REGION=us-east-1"},
		{"npm", "//registry.npmjs.org/:_authToken=" + tNPM + "always-auth=true", "//registry.npmjs.org/:_authToken=[REDACTED:npm-token]always-auth=true"},
		{"github checks out", "GITHUB_TOKEN=" + tGH + "GH_REPO=acme/infra", "GITHUB_TOKEN=[REDACTED:github-token]GH_REPO=acme/infra"},
		{"github made up: taken whole", "GITHUB_TOKEN=ghp_" + strings.Repeat("aB3dE5fG7h", 4) + "x", "GITHUB_TOKEN=[REDACTED:github-token]"},
		{"longer base64 value", "aws_secret_key = " + tSec + "QUJDRA==", ""},
		{"base64 padding", "aws_secret_key: " + tSec + "ng==\"", ""},
		{"a longer upper-case word", "XAKIA" + tAKI[4:] + "Z", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.want == "" {
				tc.want = tc.text
			}
			if got, _ := f.Redact([]byte(tc.text)); string(got) != tc.want {
				t.Errorf("Redact(%q)\n = %q\nwant %q", tc.text, got, tc.want)
			}
		})
	}
}
