package shim

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/sharness-ai/sharness/host/shim/runc"
	"github.com/sharness-ai/sharness/policies/compile"
	"github.com/sharness-ai/sharness/policies/landlock"
)

// fakeHost is the machine as a map; every access is recorded so that pass-through cases can
// show the shim read nothing.
type fakeHost struct {
	files   map[string]string
	bundles map[string]string // container id → bundle
	stdin   string
	strict  bool
	reads   []string
	// oldKernel: a kernel whose Landlock ABI (5) is below the enforced domain's; noHelper: the
	// Landlock helper is not installed.
	oldKernel, noHelper bool
	hashes              map[string]string // path in the root → "sha256:…"
	sources             map[string]Source // what Resolve says of a bind source, if not a folder
}

func (h *fakeHost) HashInRoot(root, path string) (string, error) {
	h.reads = append(h.reads, "hash "+filepath.Join(root, path))
	if s, ok := h.hashes[path]; ok {
		return s, nil
	}
	return "", &fs.PathError{Op: "open", Path: path, Err: fs.ErrNotExist}
}

// Resolve: every source is a folder on ext4 under its own name, unless sources says otherwise;
// every hook runs dockerd.
func (h *fakeHost) Resolve(sources, hooks []string) (map[string]Source, map[string]string) {
	h.reads = append(h.reads, "resolve")
	out, programs := map[string]Source{}, map[string]string{}
	for _, s := range sources {
		if x, ok := h.sources[s]; ok {
			out[s] = x
			continue
		}
		x := Source{Path: filepath.Clean(s), Type: fs.ModeDir, FS: 0xEF53}
		if b := filepath.Base(s); b == "hosts" || b == "hostname" || b == "resolv.conf" || b == "docker-init" {
			x.Type = 0 // Docker's own files: regular, root's, as Docker writes them for the agent
			x.Etc = dockerEtc(&specs.Spec{Hostname: "agent", Process: &specs.Process{Env: []string{EnvComponent + "=agent"}}}, "/etc/"+b)
		}
		if strings.Contains(s, "_identity-") {
			x.MountPoint, x.FS = true, tmpfsMagic // as compose makes an identity volume
		}
		out[s] = x
	}
	for _, p := range hooks {
		programs[p] = "/usr/sbin/dockerd"
	}
	return out, programs
}

func (h *fakeHost) LandlockABI() int {
	if h.oldKernel {
		return 5
	}
	return 7
}

func (h *fakeHost) ReadFile(path string) ([]byte, error) {
	h.reads = append(h.reads, path)
	if s, ok := h.files[path]; ok {
		return []byte(s), nil
	}
	return nil, &fs.PathError{Op: "open", Path: path, Err: fs.ErrNotExist}
}

func (h *fakeHost) ReadStdin() ([]byte, error) {
	h.reads = append(h.reads, "stdin")
	return []byte(h.stdin), nil
}

func (h *fakeHost) Exists(path string) (bool, error) {
	h.reads = append(h.reads, path)
	return h.strict && path == strictFile || !h.noHelper && path == DefaultHelper, nil
}

// Engine: the record files["engine:<id>"] holds (JSON), else files["engine:*"], as fixtureFiles
// makes them: the agent as compose attaches it.
func (h *fakeHost) Engine(id string) (EngineRecord, error) {
	h.reads = append(h.reads, "engine "+id)
	raw, ok := h.files["engine:"+id]
	if !ok {
		raw, ok = h.files["engine:*"]
	}
	if !ok || raw == "none" {
		return EngineRecord{}, &fs.PathError{Op: "open", Path: "config.v2.json of " + id, Err: fs.ErrNotExist}
	}
	var r EngineRecord
	err := json.Unmarshal([]byte(raw), &r)
	return r, err
}

// VolumeLabels: files["volume:<name>"] holds them (JSON); a volume not there has none.
func (h *fakeHost) VolumeLabels(name string) (map[string]string, error) {
	h.reads = append(h.reads, "volume "+name)
	var l map[string]string
	if raw, ok := h.files["volume:"+name]; ok {
		return l, json.Unmarshal([]byte(raw), &l)
	}
	return nil, nil
}

// Record: the record Engine gives, networks by name alone.
func (h *fakeHost) Record(id string) (EngineRecord, error) {
	r, err := h.Engine(id)
	for i, n := range r.Networks {
		r.Networks[i] = Network{Name: n.Name, ID: n.ID}
	}
	return r, err
}

func (h *fakeHost) Glob(pattern string) ([]string, error) {
	h.reads = append(h.reads, "glob "+pattern)
	var out []string
	for p := range h.files {
		if ok, _ := filepath.Match(pattern, p); ok {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out, nil
}

func (h *fakeHost) Bundle(root, id string) (string, error) {
	h.reads = append(h.reads, "state "+id)
	if b, ok := h.bundles[id]; ok {
		return b, nil
	}
	return "", errors.New("container " + id + " does not exist")
}

const policyRoot = "/policies"

func getenv(name string) string {
	if name == EnvPolicies {
		return policyRoot
	}
	return ""
}

// fixture is the compiled agent policy of the offline world's stack (compose/world/compiled,
// which testdata/docker-20.10 was captured from; compiled() in check_test.go), and its marker.
func fixture(tb testing.TB) (spec *specs.Spec, raw, component, policy string) {
	tb.Helper()
	_, data := compiled(tb, "agent")
	s, err := LoadSpec(data)
	if err != nil {
		tb.Fatal(err)
	}
	component, policy, marked := Identify(s)
	if !marked || component == "" || policy == "" {
		tb.Fatalf("compiled/agent/config.json: marker %q %q %v", component, policy, marked)
	}
	return s, string(data), component, policy
}

func encode(tb testing.TB, v any) string {
	tb.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

// fixtureFiles: /ok and the cwd hold the policy itself without its binds (none of the host paths
// exists here), /wide adds CAP_NET_ADMIN, /plain is unmarked, /nopolicy names a policy that is
// not installed; /docker is what Docker 20.10 wrote for the agent (testdata/docker-20.10);
// /bundle is the running container's.
func fixtureFiles(tb testing.TB) map[string]string {
	s, raw, component, policy := fixture(tb)
	var ok, wide, plain, nopolicy specs.Spec
	for _, dst := range []*specs.Spec{&ok, &wide, &plain, &nopolicy} {
		if err := json.Unmarshal([]byte(raw), dst); err != nil {
			tb.Fatal(err)
		}
		dst.Mounts = slices.DeleteFunc(dst.Mounts, func(m specs.Mount) bool { return mountKind(m) == "bind" })
		dst.Annotations = nil // Docker 20.10 copies no labels into them: the marker is the environment
	}
	wide.Process.Capabilities.Bounding = append(wide.Process.Capabilities.Bounding, "CAP_NET_ADMIN")
	plain.Annotations = nil
	plain.Process.Env = []string{"PATH=/bin"}
	nopolicy.Annotations = nil
	nopolicy.Process.Env = []string{EnvComponent + "=agent", EnvPolicy + "=sha256:" + strings.Repeat("0", 64)}
	widerProc := *s.Process
	widerProc.Capabilities = &specs.LinuxCapabilities{Bounding: []string{"CAP_SYS_ADMIN"}, Effective: []string{"CAP_SYS_ADMIN"}}
	docker := dockerFixture(tb, "agent")
	dockerID := fixtureFacts(docker).ID
	session := func(project, workspace, manifest string) string {
		return encode(tb, Session{Project: project, Policy: policy, Workspace: workspace, Manifest: manifest, Secrets: compile.SecretsRoot})
	}
	return map[string]string{
		PolicyPath(policyRoot, policy, component): raw,
		"engine:*":                    encode(tb, composeRecord(s, "sharness")),
		"engine:plain":                encode(tb, EngineRecord{Image: "sha256:" + strings.Repeat("c", 64)}),
		"engine:" + dockerID:          encode(tb, composeRecord(s, "sharness-e2e")),
		"/sessions/sharness.json":     session("sharness", compile.WorkspaceRoot, compile.PolicyRoot),
		"/sessions/sharness-e2e.json": session("sharness-e2e", sourceOf(docker, compile.WorkspaceMount), sourceOf(docker, compile.PolicyMount)),
		filepath.Join(PolicyDir(policyRoot, policy), CodeFile): encode(tb, testCodeRecord),
		"/ok/config.json":            encode(tb, &ok),
		"config.json":                encode(tb, &ok),
		"/docker/config.json":        encode(tb, dockerFixture(tb, "agent")),
		"/unknown/config.json":       strings.Replace(encode(tb, &ok), "{", `{"x-engine":{"a":1},`, 1),
		"/plain-unknown/config.json": strings.Replace(encode(tb, &plain), "{", `{"x-engine":{"a":1},`, 1),
		"/bundle/config.json":        raw,
		"/wide/config.json":          encode(tb, &wide),
		"/plain/config.json":         encode(tb, &plain),
		"/nopolicy/config.json":      encode(tb, &nopolicy),
		"/proc-ok.json":              encode(tb, s.Process),
		"/proc-wide.json":            encode(tb, &widerProc),
		"/res-ok.json":               encode(tb, s.Linux.Resources),
		"/res-wide.json":             `{"pids":{"limit":-1}}`,
	}
}

// testCodeRecord is what `sharness-ai install` would record: llm's code, by a made-up digest.
var testCodeRecord = CodeRecord{Components: map[string]Code{
	"llm": {Image: "sha256:" + strings.Repeat("1", 64), Path: "/sharness-llm", SHA256: "sha256:" + strings.Repeat("2", 64)},
}}

// composeRecord is what the engine records of a container of want's component as compose makes
// it in project: each compiled network, internal but egress, labelled by compose and the policy,
// and each policy volume as <project>_<name>.
func composeRecord(want *specs.Spec, project string) EngineRecord {
	policy := want.Annotations[compile.AnnotationPolicy]
	r := EngineRecord{Image: "sha256:" + strings.Repeat("a", 64), Project: project, Service: want.Annotations[compile.AnnotationComponent]}
	for _, n := range splitList(want.Annotations[compile.AnnotationNetworks]) {
		nw := Network{Name: project + "_" + n, ID: strings.Repeat("b", 64), Driver: "bridge", Internal: n != "egress",
			Labels: map[string]string{labelProject: project, labelComposeNetwork: n, labelPolicy: policy}}
		if nw.Internal {
			nw.Options = map[string]string{inhibitIPv4: "true"}
		}
		r.Networks = append(r.Networks, nw)
	}
	var health []string
	if json.Unmarshal([]byte(want.Annotations[compile.AnnotationHealth]), &health) == nil && len(health) > 0 {
		r.Health, r.HealthEvery = append([]string{"CMD"}, health...), time.Second
	}
	for _, m := range want.Mounts {
		if name, ok := policyVolume(m.Source); ok {
			r.Volumes = append(r.Volumes, Volume{Destination: m.Destination, Name: project + "_" + name,
				Labels: map[string]string{labelProject: project, labelPolicy: policy}})
		}
	}
	return r
}

// sourceOf is the source of s's mount at dest.
func sourceOf(s *specs.Spec, dest string) string {
	for _, m := range s.Mounts {
		if m.Destination == dest {
			return m.Source
		}
	}
	return ""
}

func TestDecide(t *testing.T) {
	files := fixtureFiles(t)
	dockerID := fixtureFacts(dockerFixture(t, "agent")).ID
	tests := []struct {
		name      string
		args      []string
		strict    bool
		stdin     string
		wantField string // "" when allowed
		wantMsg   string
		wantStdin bool
	}{
		{name: "create --bundle", args: []string{"create", "--bundle", "/ok", "abc"}},
		{name: "what Docker wrote", args: []string{"create", "--bundle", "/docker", dockerID}},
		{name: "a field runtime-spec does not have", args: []string{"create", "--bundle", "/unknown", "abc"},
			wantField: "config.json", wantMsg: `unknown field "x-engine"`},
		{name: "an unmarked one passes with it", args: []string{"create", "--bundle", "/plain-unknown", "plain"}},
		{name: "what Docker wrote, under another container's id", args: []string{"create", "--bundle", "/docker", "abc"},
			wantField: "mounts[/etc/hostname]", wantMsg: "linux.cgroupsPath"},
		{name: "create -b", args: []string{"create", "-b", "/ok", "abc"}},
		{name: "create --bundle=", args: append(append([]string{}, containerdGlobals...), "create", "--bundle=/ok", "abc")},
		{name: "run -b=", args: []string{"run", "-b=/ok", "-d", "abc"}},
		{name: "create in the cwd", args: []string{"create", "abc"}},
		{name: "restore is a create", args: []string{"restore", "--image-path", "/i", "-b", "/wide", "abc"},
			wantField: "process.capabilities", wantMsg: "CAP_NET_ADMIN"},
		{name: "restore of a confined container", args: []string{"restore", "--image-path", "/i", "-b", "/ok", "abc"},
			wantField: "restore", wantMsg: "lose its Landlock domain"},
		{name: "widened create", args: []string{"create", "--bundle", "/wide", "abc"},
			wantField: "process.capabilities", wantMsg: "sharness-runtime: refused agent: process.capabilities"},
		{name: "unmarked passes", args: []string{"create", "-b", "/plain", "plain"}},
		{name: "unmarked in strict mode", args: []string{"create", "-b", "/plain", "abc"}, strict: true,
			wantField: "marker", wantMsg: "refused container abc: marker"},
		{name: "marked without a compiled policy", args: []string{"create", "-b", "/nopolicy", "abc"},
			wantField: "policy", wantMsg: "refused agent: policy"},
		{name: "missing bundle", args: []string{"create", "-b", "/nowhere", "abc"}, wantField: "config.json"},
		{name: "unknown flag", args: []string{"create", "--privileged", "abc"}, wantField: "argv"},
		{name: "exec -p", args: []string{"exec", "-p", "/proc-ok.json", "-d", "abc"}},
		{name: "exec -p widened", args: []string{"exec", "-p", "/proc-wide.json", "abc"},
			wantField: "process.capabilities", wantMsg: "CAP_SYS_ADMIN"},
		{name: "exec on the command line", args: []string{"exec", "-t", "--env", "A=b", "--cwd", "/tmp", "abc", "sh"},
			wantField: "exec", wantMsg: "want --process"},
		{name: "exec --cap", args: []string{"exec", "--cap", "CAP_NET_RAW", "abc", "sh"},
			wantField: "process.capabilities", wantMsg: "CAP_NET_RAW"},
		{name: "exec --user 0", args: []string{"exec", "-u", "0:0", "abc", "sh"}, wantField: "process.user"},
		{name: "exec --no-new-privs=false", args: []string{"exec", "--no-new-privs=false", "abc", "sh"},
			wantField: "process.noNewPrivileges"},
		{name: "exec bad user", args: []string{"exec", "-u", "root", "abc", "sh"}, wantField: "process"},
		{name: "exec unknown container", args: []string{"exec", "-p", "/proc-ok.json", "nope"}, wantField: "bundle"},
		{name: "exec id that is a flag", args: []string{"exec", "--", "-x"}, wantField: "container id"},
		{name: "update -r file", args: []string{"update", "-r", "/res-ok.json", "abc"}},
		{name: "update -r file widened", args: []string{"update", "-r", "/res-wide.json", "abc"},
			wantField: "linux.resources.pids"},
		{name: "update -r -", args: []string{"update", "-r", "-", "abc"}, stdin: files["/res-ok.json"], wantStdin: true},
		{name: "update -r - widened", args: []string{"update", "--resources=-", "abc"},
			stdin: `{"memory":{"limit":-1}}`, wantField: "linux.resources.memory"},
		{name: "update -r - duplicate key", args: []string{"update", "-r", "-", "abc"},
			stdin: `{"pids":{"limit":1,"Limit":-1}}`, wantField: "linux.resources"},
		{name: "update --pids-limit", args: []string{"update", "--pids-limit", "100000", "abc"},
			wantField: "linux.resources.pids"},
		{name: "update --memory", args: []string{"update", "--memory", "-1", "abc"}, wantField: "linux.resources.memory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := &fakeHost{files: files, bundles: map[string]string{"abc": "/bundle"}, strict: tt.strict, stdin: tt.stdin}
			act, r := decide(tt.args, getenv, h)
			if tt.wantField == "" {
				if r != nil {
					t.Fatalf("decide(%q) refused: %s", tt.args, r.Error())
				}
			} else {
				if r == nil {
					t.Fatalf("decide(%q) allowed, want a refusal of %s", tt.args, tt.wantField)
				}
				if !strings.HasPrefix(r.first().Field, tt.wantField) || !strings.Contains(r.Error(), tt.wantMsg) {
					t.Errorf("decide(%q) refused %q: %s; want field %s… and %q", tt.args, r.first().Field, r.Error(), tt.wantField, tt.wantMsg)
				}
			}
			if act.PipeStdin != tt.wantStdin || (tt.wantStdin && string(act.Stdin) != tt.stdin) {
				t.Errorf("decide(%q) action %+v, want stdin piped=%v", tt.args, act, tt.wantStdin)
			}
		})
	}
}

// Commands that create nothing pass through without the shim reading anything.
func TestDecidePassesThrough(t *testing.T) {
	for _, args := range [][]string{
		{"state", "abc"}, {"start", "abc"}, {"kill", "abc", "9"}, {"delete", "--force", "abc"},
		{"features"}, {"--version"}, {"-v"}, {"--help"}, {}, {"events", "--stats", "abc"},
		{"checkpoint", "--image-path", "/i", "abc"}, {"ps", "abc"}, {"pause", "abc"},
		append(append([]string{}, containerdGlobals...), "delete", "abc"),
	} {
		h := &fakeHost{strict: true}
		act, r := decide(args, getenv, h)
		if r != nil || act.PipeStdin || len(h.reads) != 0 {
			t.Errorf("decide(%q) = %+v, %v; read %q; want a plain pass-through", args, act, r, h.reads)
		}
	}
}

func TestMain(m *testing.M) {
	switch filepath.Base(os.Args[0]) {
	case fakeRuncName:
		fakeRunc()
	case shimName: // what cmd/sharness-runtime's main does
		args := os.Args[1:]
		if err := Run(context.Background(), args, os.Getenv, os.Stderr); err != nil {
			os.Exit(runc.FailureStatus(args))
		}
		os.Exit(0)
	}
	os.Exit(runTests(m))
}

// A bundle the engine wrote with fewer masked paths than the policy (Docker 20.10 masks neither
// /proc/interrupts nor /sys/devices/virtual/powercap) is allowed once the shim adds them back:
// the action carries the narrowed spec, which the handover writes before runc reads it (runc's
// TestWriteJSON).
func TestDecideNarrowsMaskedPaths(t *testing.T) {
	files := fixtureFiles(t)
	var unmasked specs.Spec
	if err := json.Unmarshal([]byte(files["/ok/config.json"]), &unmasked); err != nil {
		t.Fatal(err)
	}
	want := slices.Clone(unmasked.Linux.MaskedPaths)
	if len(want) == 0 {
		t.Fatal("the fixture policy masks nothing: nothing to test")
	}
	unmasked.Linux.MaskedPaths = want[:len(want)-1]
	files["/unmasked/config.json"] = encode(t, &unmasked)
	act, r := decide([]string{"create", "-b", "/unmasked", "abc"}, getenv, &fakeHost{files: files})
	if r != nil {
		t.Fatalf("refused: %s", r.Error())
	}
	if act.Spec == nil || act.SpecPath != "/unmasked/config.json" || !slices.Contains(act.Spec.Linux.MaskedPaths, want[len(want)-1]) {
		t.Fatalf("action %+v: want the spec rewritten with %s masked", act, want[len(want)-1])
	}
	if act, _ := decide([]string{"create", "-b", "/ok", "abc"}, getenv, &fakeHost{files: files}); act.Spec == nil ||
		!slices.Equal(act.Spec.Linux.MaskedPaths, want) {
		t.Errorf("a bundle that already masks everything: masked %v, want %v", act.Spec, want)
	}
}

// TestDecideConfines: a create puts the container under its policy's Landlock domain (the helper
// bound read-only, the process wrapped), an exec through --process joins it, and every way the
// domain cannot be applied is a refusal, never a container without it.
func TestDecideConfines(t *testing.T) {
	files := fixtureFiles(t)
	want, _, component, policy := fixture(t)
	d, _ := Domain(want)
	nodomain := *want
	nodomain.Annotations = maps.Clone(want.Annotations)
	delete(nodomain.Annotations, landlock.Annotation)
	old := maps.Clone(files)
	old[PolicyPath(policyRoot, policy, component)] = encode(t, &nodomain)

	act, r := decide([]string{"create", "-b", "/ok", "abc"}, getenv, &fakeHost{files: files})
	if r != nil {
		t.Fatalf("refused: %s", r.Error())
	}
	got := act.Spec
	if got == nil || !slices.Equal(got.Process.Args, []string{HelperMount, helperDomain(d).Encode(), "--", "/sharness-agent"}) {
		t.Fatalf("create: process %v, want it wrapped in the helper", got)
	}
	m := got.Mounts[len(got.Mounts)-1]
	if m.Destination != HelperMount || m.Source != DefaultHelper || !slices.Contains(m.Options, "ro") {
		t.Errorf("create: last mount %+v, want the helper bound read-only", m)
	}
	if !unwrap(got) || len(Check(want, got, fixtureFacts(got))) != 0 {
		t.Errorf("create: the unwrapped spec does not pass the policy: %v", Check(want, got, fixtureFacts(got)))
	}

	act, r = decide([]string{"exec", "-p", "/proc-ok.json", "abc"}, getenv, &fakeHost{files: files, bundles: map[string]string{"abc": "/bundle"}})
	var wrapped specs.Process
	if r != nil || act.ProcessPath != "/proc-ok.json" || json.Unmarshal(act.Process, &wrapped) != nil || wrapped.Args[0] != HelperMount {
		t.Errorf("exec -p: action %+v, refusal %v; want the process wrapped", act, r)
	}

	for _, tc := range []struct {
		name      string
		h         *fakeHost
		wantField string
	}{
		{"a kernel below the ABI", &fakeHost{files: files, oldKernel: true}, "landlock"},
		{"no helper installed", &fakeHost{files: files, noHelper: true}, "landlock"},
		{"a policy compiled without a domain", &fakeHost{files: old}, "annotations." + landlock.Annotation},
	} {
		if _, r := decide([]string{"create", "-b", "/ok", "abc"}, getenv, tc.h); r == nil || r.first().Field != tc.wantField {
			t.Errorf("%s: refusal %v, want one of %s", tc.name, r, tc.wantField)
		}
	}
}

// TestDecideCode: a policy that pins its entrypoint's code (subject.code_sha256) admits only a
// container that runs that entrypoint with that hash, read from the bundle's root file system.
func TestDecideCode(t *testing.T) {
	files := fixtureFiles(t)
	want, _, component, policy := fixture(t)
	pin := "sha256:" + strings.Repeat("a", 64)
	want.Annotations[compile.AnnotationCodeSHA256] = pin
	files[PolicyPath(policyRoot, policy, component)] = encode(t, want)
	other := *want
	other.Process = &specs.Process{}
	*other.Process = *want.Process
	other.Process.Args = []string{"/bin/busybox", "sh"}
	other.Annotations = nil // the bundle's own annotations are not the policy's
	files["/other/config.json"] = encode(t, &other)
	for _, tc := range []struct {
		name, bundle string
		hashes       map[string]string
		wantField    string
	}{
		{"the pinned binary", "/ok", map[string]string{"/sharness-agent": pin}, ""},
		{"another binary", "/ok", map[string]string{"/sharness-agent": "sha256:" + strings.Repeat("b", 64)}, "subject.code_sha256"},
		{"no binary", "/ok", nil, "subject.code_sha256"},
		{"another entrypoint", "/other", map[string]string{"/sharness-agent": pin}, "process.args[0]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &fakeHost{files: files, hashes: tc.hashes}
			_, r := decide([]string{"create", "-b", tc.bundle, "abc"}, getenv, h)
			switch {
			case tc.wantField == "" && r != nil:
				t.Fatalf("refused: %s", r.Error())
			case tc.wantField != "" && (r == nil || r.first().Field != tc.wantField):
				t.Fatalf("refusal %v, want one of %s", r, tc.wantField)
			}
			if tc.bundle == "/ok" && !slices.Contains(h.reads, "hash /ok/rootfs/sharness-agent") {
				t.Errorf("hashed %v, want /sharness-agent in the bundle's rootfs", h.reads)
			}
		})
	}
}

// TestHelpPassesThrough: with a help or version flag runc reads no bundle and starts nothing, so
// the shim hands over without reading one either (it used to refuse `runc create -h` for want of
// a config.json; found by runc's help.bats in hack/conformance.sh).
func TestHelpPassesThrough(t *testing.T) {
	tests := []struct {
		name string
		args []string
	}{
		{"create -h", []string{"create", "-h", "--bundle", "/missing", "abc"}},
		{"exec -h", []string{"exec", "-h", "missing"}},
		{"update --help", []string{"update", "--help", "-r", "-", "missing"}},
		{"global -v", []string{"-v", "run", "abc"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := &fakeHost{} // no files, no containers, no stdin: any read would be a refusal
			if _, r := decide(tt.args, func(string) string { return "/policies" }, h); r != nil {
				t.Errorf("decide(%q) refused: %s", tt.args, r.Error())
			}
		})
	}
	// A help flag that does not end up true polices as before.
	if _, r := decide([]string{"create", "-h", "-h=false", "--bundle", "/missing", "abc"},
		func(string) string { return "/policies" }, &fakeHost{}); r == nil {
		t.Errorf("decide(create -h -h=false) with no bundle: allowed, want a refusal")
	}
}

// containerd's go-runc writes argv in this shape (global flags first, then the command).
var containerdGlobals = []string{"--root", "/var/run/docker/runtime-runc/moby",
	"--log", "/run/containerd/io.containerd.runtime.v2.task/moby/abc/log.json", "--log-format", "json"}

func FuzzDecide(f *testing.F) {
	seeds := [][]string{
		append(append([]string{}, containerdGlobals...), "create", "--bundle", "/b", "abc"),
		{"exec", "-p", "/p.json", "abc"}, {"exec", "--cap=CAP_SYS_ADMIN", "-u", "0", "abc", "sh"},
		{"update", "-r", "-", "abc"}, {"update", "--memory", "1g", "abc"}, {"--version"}, {"kill", "abc"},
		{"run", "-b=", "--", "abc"}, {"-", "create"},
	}
	for _, s := range seeds {
		f.Add(strings.Join(s, "\x00"))
	}
	h := &fakeHost{files: fixtureFiles(f), bundles: map[string]string{"abc": "/bundle"}, stdin: "{}"}
	f.Fuzz(func(t *testing.T, joined string) {
		args := strings.Split(joined, "\x00")
		_, err := runc.Parse(args)
		act, r := decide(args, func(string) string { return "/policies" }, h)
		if r != nil && (act.PipeStdin || r.Error() == "") {
			t.Fatalf("decide(%q) refused with action %+v and message %q", args, act, r.Error())
		}
		if r == nil && err != nil {
			t.Fatalf("decide(%q) allowed what runc.Parse refused: %v", args, err)
		}
	})
}

// TestDecideResolvesSources: a create judges each bind source by what the host opened, and
// hands runc the resolved name, so that runc follows no link the shim did not see; a link to the
// Docker socket at a listed destination is refused with both names.
func TestDecideResolvesSources(t *testing.T) {
	files := fixtureFiles(t)
	docker := dockerFixture(t, "agent")
	id := fixtureFacts(docker).ID
	var claude string
	for _, m := range docker.Mounts {
		if m.Destination == "/workspace/.claude" {
			claude = m.Source
		}
	}
	// The workspace's name is a symbolic link to /srv/real, which the session recorded (resolved).
	ws := sourceOf(docker, compile.WorkspaceMount)
	resolved := map[string]Source{}
	for _, m := range docker.Mounts {
		if rest, ok := strings.CutPrefix(m.Source, ws); ok && mountKind(m) == "bind" {
			resolved[m.Source] = Source{Path: "/srv/real" + rest, Type: fs.ModeDir, FS: 0xEF53}
		}
	}
	files = maps.Clone(files)
	var sess Session
	if err := json.Unmarshal([]byte(files["/sessions/sharness-e2e.json"]), &sess); err != nil {
		t.Fatal(err)
	}
	sess.Workspace = "/srv/real"
	files["/sessions/sharness-e2e.json"] = encode(t, sess)
	h := &fakeHost{files: files, sources: resolved}
	act, r := decide([]string{"create", "--bundle", "/docker", id}, getenv, h)
	if r != nil {
		t.Fatalf("refused: %s", r.Error())
	}
	i := slices.IndexFunc(act.Spec.Mounts, func(m specs.Mount) bool { return m.Destination == "/workspace/.claude" })
	if i < 0 || act.Spec.Mounts[i].Source != "/srv/real/.claude" {
		t.Errorf("the handover's .claude mount is %+v, want the resolved source", act.Spec.Mounts[i])
	}
	// A protected path that leads out of the recorded workspace is not the session's.
	resolved[claude] = Source{Path: "/srv/elsewhere/.claude", Type: fs.ModeDir, FS: 0xEF53}
	if _, r := decide([]string{"create", "--bundle", "/docker", id}, getenv, &fakeHost{files: files, sources: resolved}); r == nil ||
		!strings.Contains(r.Error(), "mounts[/workspace/.claude]: want source /srv/real/.claude (the session's)") {
		t.Errorf(".claude leading out of the workspace: %v, want the session's refusal", r)
	}
	h = &fakeHost{files: files, sources: map[string]Source{claude: {Path: "/run/docker.sock", Type: fs.ModeSocket, FS: 0x01021994}}}
	if _, r := decide([]string{"create", "--bundle", "/docker", id}, getenv, h); r == nil ||
		!strings.Contains(r.Error(), "mounts[/workspace/.claude]: want no engine socket or state got source "+claude+" → /run/docker.sock") {
		t.Errorf("a link to the Docker socket: %v, want the refusal naming both", r)
	}
}
