package compose

import (
	"slices"
	"strings"
	"testing"

	"github.com/sharness-ai/sharness/policies/pbp"
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
			"files.protected": "none: no workspace is mounted", "edges": "agent→fs",
		}},
		{"net", []string{"unshare"}, nil, map[string]string{
			"process.capabilities": "none", "edges": "networks: one internal network per edge + egress",
			"identity.spiffe": "volume identity-net", "(gated kind)": "volumes gate-net",
		}},
		{"llm", nil, nil, map[string]string{"identity.spiffe": "volume identity-llm"}},
	}
	for _, tc := range cases {
		t.Run(tc.component, func(t *testing.T) {
			explainCase(t, m, tc.component, tc.denied, tc.notDenied, tc.rows)
		})
	}
	// The default stack mounts a workspace: read-only protected paths for all but fs.
	def := loadFixture(t, "../policies/default")
	for name, frag := range map[string]string{"agent": "read-only binds", "bash": "read-only binds", "fs": "only writer"} {
		t.Run("default/"+name, func(t *testing.T) {
			explainCase(t, def, name, nil, nil, map[string]string{"files.protected": frag, "files.workspace": "rw"})
		})
	}
}

// explainCase checks one component's explanation: the syscalls it lists as refused by name (and
// not), and a fragment of each named row.
func explainCase(t *testing.T, m *pbp.Manifest, component string, denied, notDenied []string, wantRows map[string]string) {
	t.Helper()
	rows, refused, err := Explain(m, m.Component(component))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range denied {
		if !slices.Contains(refused, s) {
			t.Errorf("%s not listed as refused by name", s)
		}
	}
	for _, s := range notDenied {
		if slices.Contains(refused, s) {
			t.Errorf("%s listed as refused, but the policy re-allows it", s)
		}
	}
	for field, frag := range wantRows {
		i := slices.IndexFunc(rows, func(r Row) bool { return r.Field == field })
		if i < 0 {
			t.Errorf("no row for %s", field)
			continue
		}
		if r := rows[i]; !strings.Contains(r.Value+" "+r.Spec+" "+r.Compose, frag) {
			t.Errorf("row %s = %+v, want it to mention %q", field, r, frag)
		}
	}
}

// TestExplainGate: the gated kinds say where their approval gate is; the others have no such row.
func TestExplainGate(t *testing.T) {
	m := loadFixture(t, "../policies/testdata/full")
	for _, c := range m.Components {
		rows, _, err := Explain(m, c)
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(rows, func(r Row) bool { return r.Field == "(gated kind)" })
		gated := c.Kind == pbp.KindFS || c.Kind == pbp.KindBash || c.Kind == pbp.KindNet || c.Kind == pbp.KindKMS
		if gated != (i >= 0) || gated && !strings.Contains(rows[i].Compose, "gate-"+c.Name) {
			t.Errorf("%s (%s): gate row %d %v", c.Name, c.Kind, i, rows)
		}
	}
}
