package secretfilter

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sharness-ai/sharness/policies/pbp"
)

func TestNewRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		rule pbp.FilterRule
		is   error  // errors.Is target, if any
		text string // what the error must say
	}{
		{"empty name", pbp.FilterRule{Regex: `x+`}, nil, `filter rule ""`},
		{"curated name", pbp.FilterRule{Name: "jwt", Regex: `x+`}, nil, `filter rule "jwt": name empty or already taken`},
		{"layer-1 name", pbp.FilterRule{Name: RuleHarnessSecret, Regex: `x+`}, nil, `already taken`},
		{"bad syntax", pbp.FilterRule{Name: "acme", Regex: `(x`}, nil, `filter rule "acme": error parsing regexp`},
		{"perl lookahead", pbp.FilterRule{Name: "acme", Regex: `x(?=y)`}, nil, `filter rule "acme": error parsing regexp`},
		{"matches empty", pbp.FilterRule{Name: "acme", Regex: `x*`}, errMatchesEmpty, `filter rule "acme"`},
		{"empty regex", pbp.FilterRule{Name: "acme", Regex: ``}, errMatchesEmpty, `filter rule "acme"`},
		{"empty keyword", pbp.FilterRule{Name: "acme", Regex: `x+`, Keywords: []string{"a", ""}}, errEmptyKeyword, `filter rule "acme"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := New([]pbp.FilterRule{{Name: "ok", Regex: `ok-\d+`}, tc.rule})
			if err == nil || f != nil {
				t.Fatalf("New = %v, %v; want an error", f, err)
			}
			if !strings.Contains(err.Error(), tc.text) || tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("New error = %q; want it to contain %q (is %v)", err, tc.text, tc.is)
			}
		})
	}
	if _, err := New([]pbp.FilterRule{{Name: "a", Regex: `a+`}, {Name: "a", Regex: `b+`}}); err == nil {
		t.Errorf("New accepted two policy rules with one name")
	}
}

func TestRules(t *testing.T) {
	f, err := New([]pbp.FilterRule{{Name: "acme-token", Regex: `acme_[a-z0-9]{16}`}})
	if err != nil {
		t.Fatal(err)
	}
	got := f.Rules()
	want := []string{RuleHarnessSecret, "anthropic-api-key", "anthropic-admin-key", "openai-api-key",
		"aws-access-key-id", "aws-secret-access-key", "github-token", "gitlab-token", "slack-token",
		"slack-webhook", "google-api-key", "gcp-service-account-key", "stripe-key", "npm-token",
		"pypi-token", "private-key", "jwt", "bearer-token", "basic-auth", "url-credentials", "acme-token"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Rules (-want +got):\n%s", diff)
	}
	got[0] = "changed"
	if f.Rules()[0] != RuleHarnessSecret {
		t.Errorf("Rules returned the filter's own slice")
	}
}

func TestPolicyRules(t *testing.T) {
	f, err := New([]pbp.FilterRule{
		{Name: "acme-token", Regex: `acme_[a-z0-9]{16}`, Keywords: []string{"ACME_"}},
		{Name: "ticket-secret", Regex: `ticket=(?P<secret>[0-9a-f]{12})`},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, text string
		want       []Hit
	}{
		{"keyword case-insensitive", "x acme_0123456789abcdef y", []Hit{{"acme-token", 2, 23}}},
		{"keyword absent", "x Acme-0123456789abcdef y", nil},
		{"far from keyword", "acme_ " + strings.Repeat("z", 5000) + " acme_aaaaaaaaaaaaaaaa", []Hit{{"acme-token", 5007, 5028}}},
		{"no keywords: always runs, secret group", "GET /?ticket=0123456789ab&x=1", []Hit{{"ticket-secret", 13, 25}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, f.Scan([]byte(tc.text))); diff != "" {
				t.Errorf("Scan (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMergeAndRedact(t *testing.T) {
	f := newTestFilter(t)
	gh := "ghp_" + strings.Repeat("aB3dE5gH7j", 3) + "Kl9nOp"
	f.AddSecret("github", []byte(gh))
	jwt := "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
	for _, tc := range []struct {
		name, text, want string
		hits             []Hit
	}{
		{"nothing", "plain text", "plain text", nil},
		// The same bytes found by layer 1 and the github rule: layer 1 names it.
		{"layer 1 first", "GH=" + gh + ".", "GH=[REDACTED:harness-secret].", []Hit{{RuleHarnessSecret, 3, 43}}},
		// A JWT in an Authorization header starts where the bearer token does: jwt is earlier.
		{"same start", "Authorization: Bearer " + jwt, "Authorization: Bearer [REDACTED:jwt]", []Hit{{"jwt", 22, 22 + len(jwt)}}},
		// A password that is itself a token: url-credentials starts first and absorbs it.
		{"overlap", "https://x:" + gh + "@github.com/a", "https://[REDACTED:url-credentials]@github.com/a", []Hit{{"url-credentials", 8, 50}}},
		{"two", gh + " " + gh, "[REDACTED:harness-secret] [REDACTED:harness-secret]", []Hit{{RuleHarnessSecret, 0, 40}, {RuleHarnessSecret, 41, 81}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, hits := f.Redact([]byte(tc.text))
			if string(out) != tc.want {
				t.Errorf("Redact = %q; want %q", out, tc.want)
			}
			if diff := cmp.Diff(tc.hits, hits); diff != "" {
				t.Errorf("hits (-want +got):\n%s", diff)
			}
			if again, _ := f.Redact([]byte(tc.text)); string(again) != string(out) {
				t.Errorf("Redact is not consistent: %q then %q", out, again)
			}
		})
	}
}

// TestLongMatch: a match longer than its rule's window after the keyword is still found whole.
func TestLongMatch(t *testing.T) {
	f := newTestFilter(t)
	body := strings.Repeat("MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\n", 2000) // > 64 KiB
	text := "x\n-----BEGIN PRIVATE KEY-----\n" + body + "-----END PRIVATE KEY-----\ny"
	want := []Hit{{"private-key", 2, len(text) - 2}}
	if diff := cmp.Diff(want, f.Scan([]byte(text))); diff != "" {
		t.Errorf("Scan (-want +got):\n%s", diff)
	}
}

func TestAddSecretConcurrent(t *testing.T) {
	f := newTestFilter(t)
	text := []byte("one: secret-number-0001, two: secret-number-0002")
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 200 {
				for _, h := range f.Scan(text) {
					if h.Rule != RuleHarnessSecret {
						t.Errorf("unexpected hit %v", h)
					}
				}
			}
		})
	}
	f.AddSecret("one", []byte("secret-number-0001"))
	f.AddSecret("two", []byte("secret-number-0002"))
	f.AddSecret("again", []byte("secret-number-0002"))
	wg.Wait()
	if got := len(f.Scan(text)); got != 2 {
		t.Errorf("Scan found %d hits after AddSecret, want 2", got)
	}
	if diff := cmp.Diff([]string{"one", "two"}, f.Secrets()); diff != "" {
		t.Errorf("Secrets (-want +got):\n%s", diff)
	}
}
