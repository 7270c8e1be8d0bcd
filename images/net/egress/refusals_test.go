package egress

import (
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sharness-ai/sharness/testkit/tablecheck"
)

// TestRefusalsComplete holds net's table of refusals complete: every Rule constant of the
// package's source has a row (a row twice does not compile), and every row a status and a
// text; testkit/tablecheck reads the source.
func TestRefusalsComplete(t *testing.T) {
	rules, rows := tablecheck.Names(t, tablecheck.Prefixed("Rule"), "refusals")
	if d := cmp.Diff(rules, rows); d != "" || len(rows) != len(refusals) {
		t.Errorf("the rules (-) and the rows of refusals (+) differ:\n%s", d)
	}
	for r, row := range refusals {
		if http.StatusText(row.status) == "" || row.text == "" {
			t.Errorf("refusal %s: status %d, text %q; want both", r, row.status, row.text)
		}
	}
}

// TestStatus: a special-range refusal is answered by its prefix's row, and a rule net does not
// define (the approval gate's reasons, passed on) as a policy decision.
func TestStatus(t *testing.T) {
	for rule, want := range map[string]int{
		RuleBadAuthority: 400, RuleInvalidHost: 400, RuleIPLiteral: 403, RuleHeaderTooBig: 431,
		RefuseSpecial("loopback").Rule: 403, "approval_denied": 403, "approval_timeout": 403,
	} {
		if got := Status(rule); got != want {
			t.Errorf("Status(%q) = %d, want %d", rule, got, want)
		}
	}
	if d := Deny(RuleRateLimit, ""); d.Allow || d.Rule != RuleRateLimit || d.Reason != refusals[RuleRateLimit].text {
		t.Errorf("Deny without a reason = %+v, want the rule's own text", d)
	}
}
