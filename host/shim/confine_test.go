package shim

import (
	"slices"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/sharness-ai/sharness/host/shim/restrict"
	"github.com/sharness-ai/sharness/policies/landlock"
)

func TestConfine(t *testing.T) {
	const helper = "/usr/local/lib/sharness-ai/sharness-landlock"
	agent, raw := compiled(t, "agent")
	bash, _ := compiled(t, "bash")
	fresh := func() *specs.Spec {
		s, err := LoadSpec(raw)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	d, rs := Domain(agent)
	if rs != nil || d.Mode != landlock.Enforce || !slices.Contains(d.Exec, "/sharness-agent") {
		t.Fatalf("Domain(agent) = %+v, %v", d, rs)
	}

	got := fresh()
	changed, rs := Confine(d, got, helper, landlock.MinABI)
	if !changed || rs != nil {
		t.Fatalf("Confine = %v, %v", changed, rs)
	}
	if want := []string{HelperMount, helperDomain(d).Encode(), "--", "/sharness-agent"}; !slices.Equal(got.Process.Args, want) {
		t.Errorf("args = %q, want %q", got.Process.Args, want)
	}
	m := got.Mounts[len(got.Mounts)-1]
	if m.Destination != HelperMount || m.Source != helper || !slices.Contains(m.Options, "ro") || slices.Contains(m.Options, "noexec") {
		t.Errorf("helper mount = %+v, want it read-only and executable", m)
	}
	if !unwrap(got) || len(Check(agent, got, fixtureFacts(got))) != 0 || !slices.Equal(got.Process.Args, []string{"/sharness-agent"}) {
		t.Errorf("unwrap did not give back the checked spec: %v, %v", got.Process.Args, Check(agent, got, fixtureFacts(got)))
	}
	if unwrap(fresh()) {
		t.Error("unwrap of a spec the shim never confined says it was")
	}

	// Under `init: true`, Docker's init is the first program, and runs inside the domain.
	withInit := fresh()
	withInit.Process.Args = []string{"/sbin/docker-init", "--", "/sharness-agent"}
	if changed, rs := Confine(d, withInit, helper, landlock.MinABI); !changed || rs != nil {
		t.Fatalf("Confine with init = %v, %v", changed, rs)
	}
	if inner, err := restrict.Decode(withInit.Process.Args[1]); err != nil || !slices.Contains(inner.Exec, "/sbin/docker-init") ||
		!slices.Equal(withInit.Process.Args[2:], []string{"--", "/sbin/docker-init", "--", "/sharness-agent"}) {
		t.Errorf("with init: args %q (%v); want docker-init wrapped and executable in the domain", withInit.Process.Args, err)
	}

	p := &specs.Process{Args: []string{"/sharness-agent", "health"}}
	if changed, rs := ConfineProcess(d, p); !changed || rs != nil || p.Args[0] != HelperMount || p.Args[3] != "/sharness-agent" {
		t.Errorf("ConfineProcess = %v, %v, %q", changed, rs, p.Args)
	}

	// bash confines each command itself: nothing changes, and nothing is refused.
	b := fresh()
	bd, rs := Domain(bash)
	if rs != nil {
		t.Fatal(rs)
	}
	if changed, rs := Confine(bd, b, helper, 0); changed || rs != nil {
		t.Errorf("Confine(bash) = %v, %v; want no change on any kernel", changed, rs)
	}

	noDomain := fresh()
	delete(noDomain.Annotations, landlock.Annotation)
	bestEffort := fresh()
	bestEffort.Annotations[landlock.Annotation] = landlock.Domain{Mode: landlock.BestEffort, Exec: []string{"/sharness-agent"}}.Encode()
	bad := fresh()
	bad.Annotations[landlock.Annotation] = `{"mode":"off"}`
	tests := []struct {
		name      string
		want      *specs.Spec
		abi       int
		wantField string
	}{
		{"an enforced domain on an old kernel", agent, landlock.MinABI - 1, "landlock"},
		{"no kernel Landlock at all", agent, 0, "landlock"},
		{"a policy without a domain", noDomain, landlock.MinABI, "annotations." + landlock.Annotation},
		{"a domain that does not parse", bad, landlock.MinABI, "annotations." + landlock.Annotation},
		{"best effort on an old kernel", bestEffort, 3, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := fresh()
			d, rs := Domain(tt.want)
			changed := false
			if rs == nil {
				changed, rs = Confine(d, got, helper, tt.abi)
			}
			if tt.wantField == "" {
				if !changed || rs != nil {
					t.Errorf("Confine = %v, %v; want the process wrapped", changed, rs)
				}
				return
			}
			if changed || len(rs) != 1 || rs[0].Field != tt.wantField {
				t.Errorf("Confine = %v, %+v; want one refusal of %s and no change", changed, rs, tt.wantField)
			}
			if got.Process.Args[0] == HelperMount {
				t.Error("a refused spec was wrapped anyway")
			}
		})
	}
}

// unwrap undoes Confine on a spec: the helper's mount removed and its arguments taken off, so
// that Check sees what the engine asked for. It says whether the spec was confined.
func unwrap(s *specs.Spec) bool {
	i := slices.IndexFunc(s.Mounts, func(m specs.Mount) bool { return m.Destination == HelperMount })
	if i < 0 || s.Process == nil || len(s.Process.Args) < 3 || s.Process.Args[0] != HelperMount || s.Process.Args[2] != "--" {
		return false
	}
	s.Mounts = slices.Delete(s.Mounts, i, i+1)
	s.Process.Args = s.Process.Args[3:]
	return true
}

// TestHelperReadsTheDomain: what the shim writes for the helper, the helper reads back as the
// policy's domain, field by field, whatever its mode.
func TestHelperReadsTheDomain(t *testing.T) {
	for _, d := range []landlock.Domain{
		{Mode: landlock.Enforce, Exec: []string{"/bin/busybox", "/usr/lib/git-core/"}, Write: []string{"/tmp", "/workspace"},
			Bind: []uint16{8080}, Connect: []uint16{53, 3128}},
		{Mode: landlock.BestEffort, Exec: []string{"/sharness-agent"}},
		{Mode: landlock.Enforce, Bind: []uint16{3128}, AnyConnect: true},
	} {
		args := wrap(d, []string{"/prog"})
		got, argv, err := restrict.ParseArgs(args[1:])
		switch {
		case err != nil:
			t.Errorf("%+v: the helper reads %q: %v", d, args, err)
		case args[0] != HelperMount || !slices.Equal(argv, []string{"/prog"}):
			t.Errorf("%+v: args %q", d, args)
		case got.BestEffort != (d.Mode == landlock.BestEffort) || !slices.Equal(got.Exec, d.Exec) || !slices.Equal(got.Write, d.Write) ||
			!slices.Equal(got.Bind, d.Bind) || !slices.Equal(got.Connect, d.Connect) || got.AnyConnect != d.AnyConnect:
			t.Errorf("%+v: the helper reads %+v", d, got)
		}
	}
}
