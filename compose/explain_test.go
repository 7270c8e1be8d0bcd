package compose

import (
	"slices"
	"strings"
	"testing"
)

func TestExplain(t *testing.T) {
	m := loadFixture(t, "../policies/testdata/full")
	cases := []struct {
		component         string
		denied, notDenied []string
		rows              map[string]string // field → a fragment of its value or mapping
	}{
		{"bash", []string{"ptrace", "keyctl"}, []string{"unshare", "mount", "setns"}, map[string]string{
			"syscalls": "clone_namespaces", "files.tmpfs /tmp": "268435456 bytes",
		}},
		{"launcher", []string{"unshare"}, nil, map[string]string{"identity.spiffe": "issues every other role's SVID"}},
		{"fs", []string{"unshare", "ptrace"}, nil, map[string]string{
			"files.protected": "not enforced by the artefacts", "edges": "agent→fs",
		}},
		{"net", []string{"unshare"}, nil, map[string]string{
			"process.capabilities": "none", "edges": "networks: one internal network per edge + egress",
			"identity.spiffe": "volume identity-net",
		}},
	}
	for _, tc := range cases {
		t.Run(tc.component, func(t *testing.T) {
			rows, denied, err := Explain(m, m.Component(tc.component))
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range tc.denied {
				if !slices.Contains(denied, s) {
					t.Errorf("%s not listed as refused by name", s)
				}
			}
			for _, s := range tc.notDenied {
				if slices.Contains(denied, s) {
					t.Errorf("%s listed as refused, but the policy re-allows it", s)
				}
			}
			for field, frag := range tc.rows {
				i := slices.IndexFunc(rows, func(r Row) bool { return r.Field == field })
				if i < 0 {
					t.Errorf("no row for %s", field)
					continue
				}
				if r := rows[i]; !strings.Contains(r.Value+" "+r.Spec+" "+r.Compose, frag) {
					t.Errorf("row %s = %+v, want it to mention %q", field, r, frag)
				}
			}
		})
	}
}
