package guard

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzResolve: whatever the agent sends as a path, an accepted one is clean, relative, free of
// "..", NUL and control characters, and a protected path or inside a protected folder; a write
// accepted is never to an ask path, a delete never of a protected path.
func FuzzResolve(f *testing.F) {
	for _, c := range pathCases {
		f.Add(c.path)
	}
	for _, p := range []string{".claude/./x", "./.claude/x", ".claude/x/..", ".git/hooks/../config", ".claude/\u2215x", ".claude\\..\\x"} {
		f.Add(p)
	}
	r, flt := testRules(f), testFilter(f)
	f.Fuzz(func(t *testing.T, p string) {
		target, ref := r.Resolve(p)
		if ref != nil {
			if ref.Reason == "" || ref.Message == "" {
				t.Fatalf("refusal without reason or message: %+v", ref)
			}
			return
		}
		rel := target.Path
		switch {
		case !utf8.ValidString(p), strings.ContainsAny(p, "\x00\n\r"), strings.HasPrefix(p, "/"):
			t.Fatalf("accepted %q", p)
		case slices.Contains(strings.Split(rel, "/"), ".."), slices.Contains(strings.Split(rel, "/"), "."), slices.Contains(strings.Split(rel, "/"), ""):
			t.Fatalf("accepted %q with an unclean component", p)
		case rel != strings.TrimSuffix(p, "/"):
			t.Fatalf("accepted %q as %q", p, rel)
		}
		inside := false
		for _, e := range defaultProtected {
			d, isDir := strings.CutSuffix(e, "/")
			inside = inside || rel == d || isDir && strings.HasPrefix(rel, d+"/")
		}
		if !inside {
			t.Fatalf("accepted %q outside every protected path", p)
		}
		if tg, _, ref := r.checkWrite(p, nil, "", flt); verdict(ref, tg) == nil && target.ask {
			t.Fatalf("write to ask path %q accepted", p)
		}
		if tg, ref := r.checkDelete(p); verdict(ref, tg) == nil && (target.isRoot || target.ask) {
			t.Fatalf("delete of %q accepted", p)
		}
	})
}

// FuzzRename: an accepted rename has two different ends, neither a protected path, an ask
// path, or a folder holding one.
func FuzzRename(f *testing.F) {
	for i, c := range pathCases {
		f.Add(c.path, pathCases[(i+1)%len(pathCases)].path)
	}
	f.Add(".claude/a", ".claude/a/b")
	r := testRules(f)
	f.Fuzz(func(t *testing.T, from, to string) {
		a, b, ref := r.checkRename(from, to)
		if verdict(ref, a, b) != nil {
			return
		}
		for _, x := range []Target{a, b} {
			if x.isRoot || x.ask || x.holds != "" || !x.dir {
				t.Fatalf("rename %q -> %q accepted with an end %+v", from, to, x)
			}
		}
		if a.Path == b.Path || strings.HasPrefix(b.Path, a.Path+"/") {
			t.Fatalf("rename %q into itself accepted", from)
		}
	})
}
