package egress

import (
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestRefusalsComplete holds net's table of refusals complete: every Rule constant of the
// package's source has a row (a row twice does not compile), and every row a status and a
// text. Go cannot list a package's constants at run time, so the source is read.
func TestRefusalsComplete(t *testing.T) {
	rules, rows := map[string]bool{}, map[string]bool{}
	files, _ := filepath.Glob("*.go")
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST && g.Tok != token.VAR {
				continue
			}
			for _, s := range g.Specs {
				vs := s.(*ast.ValueSpec)
				for i, id := range vs.Names {
					if g.Tok == token.CONST && strings.HasPrefix(id.Name, "Rule") {
						rules[id.Name] = true
					}
					if g.Tok == token.VAR && id.Name == "refusals" {
						for _, e := range vs.Values[i].(*ast.CompositeLit).Elts {
							rows[e.(*ast.KeyValueExpr).Key.(*ast.Ident).Name] = true
						}
					}
				}
			}
		}
	}
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
