package shim

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// specFields walks the runtime spec's types and returns every field's path, the way rules keys
// them: JSON names joined by ".", "[]" after a slice of structs, "{}" after a map of structs, and
// an untagged embedded struct's fields promoted (as encoding/json does).
func specFields() map[string]reflect.Type {
	out := map[string]reflect.Type{}
	var walkType func(prefix string, t reflect.Type)
	walkType = func(prefix string, t reflect.Type) {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct {
			return
		}
		for i := range t.NumField() {
			f := t.Field(i)
			name := jsonName(f)
			if f.Anonymous && name == "" {
				walkType(prefix, f.Type)
				continue
			}
			path := join(prefix, name)
			out[path] = f.Type
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			switch ft.Kind() {
			case reflect.Struct:
				walkType(path, ft)
			case reflect.Slice, reflect.Array:
				walkType(path+"[]", ft.Elem())
			case reflect.Map:
				walkType(path+"{}", ft.Elem())
			}
		}
	}
	walkType("", reflect.TypeOf(specs.Spec{}))
	return out
}

// parent is the path of the field a path's field belongs to ("" at the top).
func parent(path string) string {
	i := strings.LastIndex(path, ".")
	if i < 0 {
		return ""
	}
	return strings.TrimSuffix(strings.TrimSuffix(path[:i], "[]"), "{}")
}

// TestRulesCoverTheSpec holds the allowlist complete: every field of runtime-spec (at any depth,
// map and slice elements included) has a rule, or lies below a field compared whole (equal); every
// rule names a field; a field decided by its parent's rule (within) lies below a named or engine
// rule, never a walked struct (where it would be skipped); a walked field is a struct; and every
// named, engine and within rule says why. A new runtime-spec field fails here before it can pass
// unexamined (and is refused at run time meanwhile: TestUnknownFieldRefused).
func TestRulesCoverTheSpec(t *testing.T) {
	fields := specFields()
	if len(fields) < 200 {
		t.Fatalf("walked %d fields: the walk is broken", len(fields))
	}
	ruleOf := func(path string) (string, rule, bool) {
		for p := path; ; p = parent(p) {
			if r, ok := rules[p]; ok {
				return p, r, true
			}
			if p == "" {
				return "", rule{}, false
			}
		}
	}
	var paths []string
	for p := range fields {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, p := range paths {
		r, ok := rules[p]
		if !ok {
			if at, anc, found := ruleOf(parent(p)); !found || anc.kind != equal {
				t.Errorf("%s has no rule (nearest: %q)", p, at)
			}
			continue
		}
		ft := fields[p]
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		switch r.kind {
		case walk:
			if ft.Kind() != reflect.Struct {
				t.Errorf("%s is walked but is a %s", p, ft.Kind())
			}
		case within:
			at, anc, found := ruleOf(parent(p))
			if !found || (anc.kind != narrower && anc.kind != engine && anc.kind != within) {
				t.Errorf("%s is decided by its parent's rule, but %q is %v: nothing would decide it", p, at, anc.kind)
			}
		case equal:
			if at, anc, found := ruleOf(parent(p)); found && anc.kind == equal && at != "" {
				t.Errorf("%s: equal under %s, which is compared whole already", p, at)
			}
		}
		if (r.kind == narrower || r.kind == engine || r.kind == within) && r.why == "" {
			t.Errorf("%s: a %v rule without its reason", p, r.kind)
		}
		if (r.kind == narrower || r.kind == engine) && r.check == nil {
			t.Errorf("%s: a %v rule without a check", p, r.kind)
		}
		if p != "" {
			if at, anc, found := ruleOf(parent(p)); found && at != "" && anc.kind == equal {
				t.Errorf("%s has a rule of its own below %s, which is compared whole", p, at)
			}
		}
	}
	for p := range rules {
		if _, ok := fields[p]; !ok {
			t.Errorf("rule %q names no field of runtime-spec", p)
		}
	}
}

// TestUnknownFieldRefused: a field the table has no rule for (as a newer runtime-spec would add)
// is refused when set, named, and passes when unset.
func TestUnknownFieldRefused(t *testing.T) {
	c := &comparison{want: &specs.Spec{}}
	type newer struct {
		Feature string `json:"feature"`
	}
	v := reflect.ValueOf(newer{Feature: "on"})
	rs := c.field("linux.feature", reflect.Zero(v.Type()), v)
	if len(rs) != 1 || rs[0].Field != "linux.feature" || !strings.Contains(rs[0].Got, "on") {
		t.Errorf("an unknown field set: %v, want one refusal naming it", rs)
	}
	if rs := c.field("linux.feature", reflect.Zero(v.Type()), reflect.Zero(v.Type())); len(rs) != 0 {
		t.Errorf("an unknown field unset: %v, want none", rs)
	}
}

func TestSameValue(t *testing.T) {
	f := false
	zero := 0
	for _, tc := range []struct {
		name string
		a, b any
		same bool
	}{
		{"nil and empty slice", []string(nil), []string{}, true},
		{"nil pointer and a pointer to zero: runc sets the one, not the other", (*bool)(nil), &f, false},
		{"nil pointer and a pointer to zero int", (*int)(nil), &zero, false},
		{"two pointers to zero", &zero, new(int), true},
		{"different strings", "a", "b", false},
		{"nil and a map", map[string]string(nil), map[string]string{"a": "b"}, false},
		{"equal maps", map[string]string{"a": "b"}, map[string]string{"a": "b"}, true},
		{"structs", specs.LinuxPersonality{Domain: specs.PerLinux}, specs.LinuxPersonality{Domain: specs.PerLinux32}, false},
	} {
		if got := sameValue(reflect.ValueOf(tc.a), reflect.ValueOf(tc.b)); got != tc.same {
			t.Errorf("%s: sameValue = %v, want %v", tc.name, got, tc.same)
		}
	}
}
