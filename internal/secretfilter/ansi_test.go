package secretfilter

import (
	"slices"
	"testing"
)

// TestANSI: keys as terminals show them through colour codes and overstrikes (what grep, rg,
// git and nroff print with colour or bold on), found by their rules and redacted; each case is
// an attack that reached llm's upstream before this view (helper attack, 2 December 2026).
func TestANSI(t *testing.T) {
	f := newTestFilter(t)
	const id, secret, token = "AKIAQYLPMN5HHHFPZAM2", "q7Zt2Lm9Vx4Rb8Nc1Hd6Jf3Kp0Ws5Yg2Ue7Ai4Oz", "ghp_R8xK2mQ9vL4nT7pW1sY6zB3cF5hJ0dG8aE2u"
	for _, tt := range []struct {
		name, text, rule string
	}{
		{"colour around an id", "\x1b[31m" + id + "\x1b[0m\n", "aws-access-key-id"},
		{"colour around a token", "\x1b[31m" + token + "\x1b[0m\n", "github-token"},
		{"colour around a secret key", "aws_secret_access_key = \x1b[33m" + secret + "\x1b[0m\n", "aws-secret-access-key"},
		{"grep --color=always, the match whole", "creds:2:aws_access_key_id = \x1b[01;31m\x1b[K" + id + "\x1b[m\x1b[K\n", "aws-access-key-id"},
		{"grep --color=always, the match a prefix", "aws_access_key_id = \x1b[01;31m\x1b[KAKIA\x1b[m\x1b[K" + id[4:] + "\n", "aws-access-key-id"},
		{"git diff --color-words inside the key", "aws_access_key_id = " + id[:19] + "\x1b[31mQ\x1b[m\x1b[32m" + id[19:] + "\x1b[m\n", "aws-access-key-id"},
		{"an OSC hyperlink around it", "\x1b]8;;https://x.example\x1b\\" + token + "\x1b]8;;\x07\n", "github-token"},
		{"cat -A of grep --color=always", "creds:2:aws_access_key_id = ^[[01;31m^[[K" + id + "^[[m^[[K$\ntoken = ^[[31m" + token + "^[[0m$\n", "aws-access-key-id"},
		{"JSON-escaped colours", `aws_access_key_id = \u001b[01;31m\u001b[K` + id + `\u001b[m\u001b[K`, "aws-access-key-id"},
		{"nroff bold", "A\bAK\bKI\bIA\bA" + id[4:] + "\n", "aws-access-key-id"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := ruleNames(f.Scan([]byte(tt.text))); !slices.Contains(got, tt.rule) {
				t.Errorf("rule %s does not find it (hits %v)", tt.rule, got)
			}
			if out, _ := f.Redact([]byte(tt.text)); len(f.Scan(out)) > 0 {
				t.Errorf("Redact left %v in %q", f.Scan(out), out)
			}
		})
	}
	if ansi(&view{dec: []byte("plain text, no escapes\n")}) != nil {
		t.Error("a view made of text without escapes")
	}
	for in, want := range map[string]string{"a\x1b[1;31mb\x1b[0mc": "abc", "a\x1b[": "a", "x\x1b]0;t\x07y": "xy", "\x1b(Bz": "z", "ab\bc": "ac"} {
		if v := ansi(&view{dec: []byte(in)}); v == nil || string(v.dec) != want {
			t.Errorf("ansi(%q) = %v, want %q", in, v, want)
		}
	}
}
