package compile

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/opencontainers/runtime-tools/validate"

	"github.com/sharness-ai/sharness/policies/pbp"
)

func loadFull(t testing.TB) *pbp.Manifest {
	t.Helper()
	m, err := pbp.Load(os.DirFS("../testdata/full"), "manifest.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func compiledSpecs(t *testing.T) (*pbp.Manifest, map[string]*specs.Spec) {
	t.Helper()
	m := loadFull(t)
	files, err := Compile(m)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*specs.Spec{}
	for _, c := range m.Components {
		var s specs.Spec
		if err := json.Unmarshal(files[SpecPath(c.Name)], &s); err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		out[c.Name] = &s
	}
	return m, out
}

// TestSpecsPassOCIValidation runs opencontainers/runtime-tools' validator on every compiled spec
// in a bundle with an empty rootfs. CheckJSONSchema is left out: it fetches the schema over the
// network; the Go types already fix the shape.
func TestSpecsPassOCIValidation(t *testing.T) {
	_, all := compiledSpecs(t)
	for name, s := range all {
		t.Run(name, func(t *testing.T) {
			bundle := t.TempDir()
			if err := os.Mkdir(filepath.Join(bundle, "rootfs"), 0o755); err != nil {
				t.Fatal(err)
			}
			v, err := validate.NewValidator(s, bundle, false, "linux")
			if err != nil {
				t.Fatal(err)
			}
			checks := map[string]func() error{
				"root": v.CheckRoot, "semver": v.CheckSemVer, "mounts": v.CheckMounts, "process": v.CheckProcess,
				"capabilities": v.CheckCapabilities, "rlimits": v.CheckRlimits, "platform": v.CheckPlatform,
				"resources": v.CheckLinuxResources, "annotations": v.CheckAnnotations, "mandatory": v.CheckMandatoryFields,
				"hooks": v.CheckHooks,
			}
			for what, check := range checks {
				err := check()
				if me, ok := err.(interface{ ErrorOrNil() error }); ok {
					err = me.ErrorOrNil() // runtime-tools returns empty *multierror.Error values
				}
				if err != nil {
					t.Errorf("%s: %v", what, err)
				}
			}
		})
	}
}

func TestSpecDecisions(t *testing.T) {
	m, all := compiledSpecs(t)
	for _, c := range m.Components {
		s := all[c.Name]
		l := s.Linux
		for _, ns := range l.Namespaces {
			if ns.Path != "" {
				t.Errorf("%s: joins host namespace %s at %s", c.Name, ns.Type, ns.Path)
			}
		}
		caps := s.Process.Capabilities
		checks := []struct {
			what string
			ok   bool
		}{
			{"read-only root", s.Root.Readonly},
			{"no_new_privs", s.Process.NoNewPrivileges},
			{"non-root", s.Process.User.UID != 0 && s.Process.User.GID != 0},
			{"caps = policy", slices.Equal(caps.Bounding, c.Capabilities) && slices.Equal(caps.Effective, c.Capabilities) && len(caps.Ambient) == 0 && len(caps.Inheritable) == 0},
			{"pids limit", l.Resources.Pids != nil && l.Resources.Pids.Limit != nil && *l.Resources.Pids.Limit == c.MaxPIDs},
			{"memory limit", l.Resources.Memory != nil && *l.Resources.Memory.Limit == c.MaxMemory && *l.Resources.Memory.Swap == c.MaxMemory},
			{"devices denied", len(l.Devices) == 0 && len(l.Resources.Devices) == 1 && !l.Resources.Devices[0].Allow},
			{"seccomp", l.Seccomp != nil && l.Seccomp.DefaultAction == specs.ActErrno},
			// bash's sandboxes mount their own /proc, which the kernel refuses while the
			// container's is partly masked: bash alone has it unmasked.
			{"/proc/kcore masked (bash: unmasked)", slices.Contains(l.MaskedPaths, "/proc/kcore") == (c.Kind != pbp.KindBash)},
			{"/proc/sys read-only (bash: not)", slices.Contains(l.ReadonlyPaths, "/proc/sys") == (c.Kind != pbp.KindBash)},
			{"six new namespaces", len(l.Namespaces) == 6},
			{"annotations", s.Annotations[AnnotationPolicy] == m.Hash && s.Annotations[AnnotationComponent] == c.Name},
			{"ping sockets closed", l.Sysctl["net.ipv4.ping_group_range"] == "1 0"},
			{"no core files", slices.ContainsFunc(s.Process.Rlimits, func(r specs.POSIXRlimit) bool { return r.Type == "RLIMIT_CORE" && r.Hard == 0 })},
		}
		for _, ch := range checks {
			if !ch.ok {
				t.Errorf("%s: %s does not hold", c.Name, ch.what)
			}
		}
		for _, mnt := range s.Mounts {
			if mnt.Type == "tmpfs" && !slices.ContainsFunc(mnt.Options, func(o string) bool { return len(o) > 5 && o[:5] == "size=" }) {
				t.Errorf("%s: tmpfs %s has no size", c.Name, mnt.Destination)
			}
		}
	}
}

// TestSpecRefusals covers the compiler's own last line of defence, for a component that somehow
// reached it without the loader's checks.
func TestSpecRefusals(t *testing.T) {
	m := loadFull(t)
	base := *m.Component("agent")
	cases := []struct {
		name    string
		edit    func(c *pbp.Component)
		seccomp bool
	}{
		{"root uid", func(c *pbp.Component) { c.UID = 0 }, true},
		{"no pids limit", func(c *pbp.Component) { c.MaxPIDs = 0 }, true},
		{"no memory limit", func(c *pbp.Component) { c.MaxMemory = 0 }, true},
		{"tmpfs without size", func(c *pbp.Component) { c.Tmpfs = []pbp.TmpfsMount{{Path: "/tmp"}} }, true},
		{"no seccomp", func(c *pbp.Component) {}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := base
			tc.edit(&c)
			var sc *specs.LinuxSeccomp
			if tc.seccomp {
				sc = &specs.LinuxSeccomp{DefaultAction: specs.ActErrno}
			}
			if _, err := Spec(m, &c, sc); err == nil {
				t.Fatal("Spec accepted it; want a refusal")
			}
		})
	}
}

func BenchmarkCompileDefault(b *testing.B) {
	m, err := pbp.Load(os.DirFS("../default"), "manifest.yaml")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Compile(m); err != nil {
			b.Fatal(err)
		}
	}
}
