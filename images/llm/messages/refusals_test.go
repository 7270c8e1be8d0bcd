package messages

import (
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sharness-ai/sharness/testkit/tablecheck"
)

// TestRefusalsComplete holds llm's table of refusals complete: every Reason constant of the
// package's source has a row (a row twice does not compile), and every row a status, an error
// type and a text; testkit/tablecheck reads the source.
func TestRefusalsComplete(t *testing.T) {
	reasons, rows := tablecheck.Names(t, tablecheck.OfType("Reason"), "refusals")
	if d := cmp.Diff(reasons, rows); d != "" || len(rows) != len(refusals) {
		t.Errorf("the reasons (-) and the rows of refusals (+) differ:\n%s", d)
	}
	for r, row := range refusals {
		if http.StatusText(row.status) == "" || row.typ == "" || row.text == "" {
			t.Errorf("refusal %s: status %d, type %q, text %q; want all three", r, row.status, row.typ, row.text)
		}
	}
}
