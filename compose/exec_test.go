package compose

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/sharness-ai/sharness/policies/compile"
	"github.com/sharness-ai/sharness/policies/pbp"
)

// TestExecListIsTheHealthCheck: the commands a compiled spec lets an exec run
// (compile.AnnotationExec, which the runtime shim enforces) are exactly the health check the
// compose file gives Docker, which Docker runs as an exec; the agent (kind app) has no list (its
// execs are the caller's). A health check the list lacked would leave the component unhealthy;
// a command the list had beyond it would be an exec the shim lets through for nothing.
func TestExecListIsTheHealthCheck(t *testing.T) {
	m := loadFixture(t, "../policies/testdata/full")
	opts := fullOpts
	opts.Runtime = "sharness" // the Landlock helper's health check is rendered only for the shim
	files, err := Build(m, opts)
	if err != nil {
		t.Fatal(err)
	}
	p := loadCompose(t, files)
	checked := 0
	for _, c := range m.Components {
		var s specs.Spec
		if err := json.Unmarshal(files["compiled/"+c.Name+"/config.json"], &s); err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		// The health command the shim holds every container to is the one compose gives Docker.
		var health []string
		if h := p.Services[c.Name].HealthCheck; h != nil && len(h.Test) > 1 {
			health = h.Test[1:]
		}
		var compiledHealth []string
		if raw, ok := s.Annotations[compile.AnnotationHealth]; ok {
			if err := json.Unmarshal([]byte(raw), &compiledHealth); err != nil {
				t.Errorf("%s: %s %q: %v", c.Name, compile.AnnotationHealth, raw, err)
			}
		}
		if !slices.Equal(health, compiledHealth) {
			t.Errorf("%s: health check %q, compiled %s %q", c.Name, health, compile.AnnotationHealth, compiledHealth)
		}
		raw, ok := s.Annotations[compile.AnnotationExec]
		if c.Kind == pbp.KindApp {
			if ok {
				t.Errorf("%s (an app) carries %s %s: its execs are the caller's", c.Name, compile.AnnotationExec, raw)
			}
			continue
		}
		var list [][]string
		if err := json.Unmarshal([]byte(raw), &list); !ok || err != nil {
			t.Errorf("%s: %s %q (%v): want a JSON list of commands", c.Name, compile.AnnotationExec, raw, err)
			continue
		}
		var want [][]string
		if h := p.Services[c.Name].HealthCheck; h != nil {
			if len(h.Test) < 2 || h.Test[0] != "CMD" {
				t.Errorf("%s: health check %q: want the exec form [CMD, ...]", c.Name, h.Test)
				continue
			}
			want = append(want, slices.Clone(h.Test[1:]))
			checked++
		}
		if diff := cmp.Diff(want, list, cmp.Comparer(func(a, b [][]string) bool {
			return slices.EqualFunc(a, b, slices.Equal[[]string])
		})); diff != "" {
			t.Errorf("%s: the exec list differs from the health check (-health check +exec list):\n%s", c.Name, diff)
		}
	}
	if checked == 0 {
		t.Error("no component of the fixture has a health check: the test compared nothing")
	}
}

// TestDNSIsWhatTheShimAllows: compose gives every component NoDNS as its only resolver, but the
// egress (kind net) and a component without a network (network_mode none), which get none. The
// runtime shim allows exactly that (host/shim/etcfiles.go, dnsAllowed: none or NoDNS for kinds
// net and launcher, NoDNS for every other kind), so the two must not drift.
func TestDNSIsWhatTheShimAllows(t *testing.T) {
	m := loadFixture(t, "../policies/testdata/full")
	files, err := Build(m, fullOpts)
	if err != nil {
		t.Fatal(err)
	}
	p := loadCompose(t, files)
	for _, c := range m.Components {
		s := p.Services[c.Name]
		dns := []string(s.DNS)
		switch {
		case slices.Equal(dns, []string{NoDNS}):
		case len(dns) == 0 && (c.Kind == pbp.KindNet || c.Kind == pbp.KindLauncher):
		default:
			t.Errorf("%s (kind %s, network_mode %q): dns %q, which the shim refuses", c.Name, c.Kind, s.NetworkMode, dns)
		}
		if len(s.DNSSearch) > 0 || len(s.DNSOpts) > 0 || len(s.ExtraHosts) > 0 {
			t.Errorf("%s: dns_search %q, dns_opt %q, extra_hosts %v: the shim refuses every one", c.Name, s.DNSSearch, s.DNSOpts, s.ExtraHosts)
		}
	}
}
