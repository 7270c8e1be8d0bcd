package guard

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

// TestRefusalsComplete holds fs's table of refusals complete: every Reason constant of the
// package's source, typed or converted (Reason(gate.ReasonDenied)), has a row (a row twice does
// not compile), and every row, and the answer to the gate's other reasons, a status, an error
// type and a text. Go cannot list a package's constants at run time, so the source is read.
func TestRefusalsComplete(t *testing.T) {
	reasons, rows := map[string]bool{}, map[string]bool{}
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
					typ, _ := vs.Type.(*ast.Ident)
					var conv *ast.Ident
					if i < len(vs.Values) {
						if c, ok := vs.Values[i].(*ast.CallExpr); ok {
							conv, _ = c.Fun.(*ast.Ident)
						}
					}
					if g.Tok == token.CONST && (typ != nil && typ.Name == "Reason" || conv != nil && conv.Name == "Reason") {
						reasons[id.Name] = true
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
	if d := cmp.Diff(reasons, rows); d != "" || len(rows) != len(refusals) {
		t.Errorf("the reasons (-) and the rows of refusals (+) differ:\n%s", d)
	}
	for r, row := range refusals {
		if http.StatusText(row.status) == "" || row.typ == "" || row.text == "" {
			t.Errorf("refusal %s: status %d, type %q, text %q; want all three", r, row.status, row.typ, row.text)
		}
	}
	if status, typ := Reason("approval_bad_signature").Status(); status != http.StatusForbidden || typ != "permission_error" || passedOn.text == "" {
		t.Errorf("a reason of the gate fs passes on: %d %s %q, want 403 permission_error and a text", status, typ, passedOn.text)
	}
}
