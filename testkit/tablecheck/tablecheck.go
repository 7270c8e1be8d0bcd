// Package tablecheck lets a test hold a table complete against the constants it must cover.
// Go cannot list a package's constants at run time, so it reads the package's own non-test
// source in the test's working folder: the constants that match, and the keys of a map
// variable's composite literal.
//
// It checks names only, not values; a key spelled as an expression other than a plain
// identifier is reported as an error, so nothing is skipped silently.
package tablecheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// Match decides whether a constant counts: its name, its declared type (nil when untyped) and
// its value (nil when implicit, as in an iota run).
type Match func(name string, typ, value ast.Expr) bool

// Names returns the constants that match, and the keys of the composite literal assigned to
// the package-level variable table.
func Names(t testing.TB, match Match, table string) (consts, keys map[string]bool) {
	t.Helper()
	consts, keys = map[string]bool{}, map[string]bool{}
	files, err := filepath.Glob("*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no Go source in the test's folder (%v)", err)
	}
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
			if !ok {
				continue
			}
			for _, s := range g.Specs {
				vs, ok := s.(*ast.ValueSpec)
				if !ok {
					continue
				}
				for i, id := range vs.Names {
					var value ast.Expr
					if i < len(vs.Values) {
						value = vs.Values[i]
					}
					switch {
					case g.Tok == token.CONST && match(id.Name, vs.Type, value):
						consts[id.Name] = true
					case g.Tok == token.VAR && id.Name == table && i < len(vs.Values):
						lit, ok := vs.Values[i].(*ast.CompositeLit)
						if !ok {
							t.Fatalf("%s: %s is not a composite literal", name, table)
						}
						for _, e := range lit.Elts {
							kv, ok := e.(*ast.KeyValueExpr)
							key, isIdent := ast.Expr(nil), false
							if ok {
								key = kv.Key
								_, isIdent = key.(*ast.Ident)
							}
							if !isIdent {
								t.Fatalf("%s: a key of %s is not a plain identifier", name, table)
							}
							keys[key.(*ast.Ident).Name] = true
						}
					}
				}
			}
		}
	}
	return consts, keys
}

// OfType matches constants declared with the named type or converted to it
// (Reason(gate.ReasonDenied)).
func OfType(name string) Match {
	return func(_ string, typ, value ast.Expr) bool {
		if id, ok := typ.(*ast.Ident); ok {
			return id.Name == name
		}
		if c, ok := value.(*ast.CallExpr); ok {
			id, ok := c.Fun.(*ast.Ident)
			return ok && id.Name == name
		}
		return false
	}
}

// Prefixed matches constants whose name starts with prefix.
func Prefixed(prefix string) Match {
	return func(name string, _, _ ast.Expr) bool { return strings.HasPrefix(name, prefix) }
}
