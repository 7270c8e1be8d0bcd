package shim

import (
	"errors"
	"io/fs"
	"slices"
	"strings"
	"testing"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/sharness-ai/sharness/policies/compile"
)

func wantFields(t *testing.T, rs []Reason, want ...string) {
	t.Helper()
	got := fields(rs)
	want = slices.Compact(slices.Sorted(slices.Values(want)))
	if !slices.Equal(got, want) {
		t.Errorf("refused %q, want %q; reasons %+v", got, want, rs)
	}
}

// TestCheckNetworks: each way an edited compose file (or a network made beforehand under a
// SHarness name) attaches a component to more than its compiled edges is refused, naming the
// network; as compose makes them, and with none, the networks pass.
func TestCheckNetworks(t *testing.T) {
	agent, _ := compiled(t, "agent")
	net, _ := compiled(t, "net")
	launcher, _ := compiled(t, "launcher")
	policy := agent.Annotations[compile.AnnotationPolicy]
	edit := func(want *specs.Spec, f func(*EngineRecord)) EngineRecord {
		r := composeRecord(want, "sharness")
		f(&r)
		return r
	}
	egress := Network{Name: "sharness_egress", Driver: "bridge", Labels: map[string]string{labelProject: "sharness", labelComposeNetwork: "egress", labelPolicy: policy}}
	for _, tt := range []struct {
		name  string
		want  *specs.Spec
		rec   EngineRecord
		field string // "" allowed
		msg   string
	}{
		{name: "as compose makes them", want: agent, rec: composeRecord(agent, "sharness")},
		{name: "net on egress", want: net, rec: composeRecord(net, "sharness")},
		{name: "no network at all", want: launcher, rec: EngineRecord{Project: "sharness", Networks: []Network{{Name: "none", Driver: "null"}}}},
		{name: "fewer networks are narrower", want: agent, rec: edit(agent, func(r *EngineRecord) { r.Networks = r.Networks[:1] })},
		{name: "the agent on egress", want: agent, rec: edit(agent, func(r *EngineRecord) { r.Networks = append(r.Networks, egress) }),
			field: "network[sharness_egress]", msg: "one of edge-agent-bash"},
		{name: "the agent on the host's default bridge", want: agent, rec: edit(agent, func(r *EngineRecord) {
			r.Networks = append(r.Networks, Network{Name: "bridge", Driver: "bridge"})
		}), field: "network[bridge]"},
		{name: "an edge made not internal", want: agent, rec: edit(agent, func(r *EngineRecord) { r.Networks[0].Internal = false }),
			field: "network[sharness_edge-agent-bash]", msg: "internal"},
		{name: "an edge with an address on the host", want: agent, rec: edit(agent, func(r *EngineRecord) { r.Networks[0].Options = nil }),
			field: "network[sharness_edge-agent-bash]", msg: "inhibit_ipv4"},
		{name: "an edge of another policy", want: agent, rec: edit(agent, func(r *EngineRecord) { r.Networks[1].Labels[labelPolicy] = "sha256:" + strings.Repeat("9", 64) }),
			field: "network[sharness_edge-agent-fs]", msg: "a network of policy"},
		{name: "an edge of another project", want: agent, rec: edit(agent, func(r *EngineRecord) { r.Project = "other" }),
			field: "network[sharness_edge-agent-bash]", msg: `project "other"`},
		{name: "an edge under another name", want: agent, rec: edit(agent, func(r *EngineRecord) { r.Networks[2].Name = "x_edge-agent-llm" }),
			field: "network[x_edge-agent-llm]"},
		{name: "an edge on another driver", want: agent, rec: edit(agent, func(r *EngineRecord) { r.Networks[3].Driver = "macvlan" }),
			field: "network[sharness_edge-agent-net]", msg: "a bridge"},
		{name: "egress for a component that is not net", want: agent, rec: edit(agent, func(r *EngineRecord) {
			// Even if the compiled list named it, only net may join it.
			r.Networks = []Network{egress}
		}), field: "network[sharness_egress]"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rs := CheckNetworks(tt.want, tt.rec)
			if tt.field == "" {
				wantFields(t, rs)
				return
			}
			if len(rs) == 0 || rs[0].Field != tt.field || !strings.Contains(rs[0].Want+rs[0].Got, tt.msg) {
				t.Errorf("want a refusal of %s first, mentioning %q, got %+v", tt.field, tt.msg, rs)
			}
		})
	}
}

// TestCheckVolumes: a policy volume is this project's own, of this policy.
func TestCheckVolumes(t *testing.T) {
	llm, _ := compiled(t, "llm")
	policy := llm.Annotations[compile.AnnotationPolicy]
	ok := composeRecord(llm, "sharness")
	if len(ok.Volumes) == 0 {
		t.Fatal("llm's compiled spec lists no policy volume")
	}
	wantFields(t, CheckVolumes(llm, ok))
	for _, tt := range []struct {
		name string
		f    func(*Volume)
	}{
		{"another project's volume of that name", func(v *Volume) { v.Name = "other_" + strings.TrimPrefix(v.Name, "sharness_") }},
		{"a volume of another policy", func(v *Volume) {
			v.Labels = map[string]string{labelProject: "sharness", labelPolicy: "sha256:" + strings.Repeat("9", 64)}
		}},
		{"a volume compose did not make", func(v *Volume) { v.Labels = nil }},
		{"a volume at a destination the policy binds no volume to", func(v *Volume) { v.Destination = "/tmp" }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := composeRecord(llm, "sharness")
			tt.f(&r.Volumes[0])
			if rs := CheckVolumes(llm, r); len(rs) != 1 || !strings.HasPrefix(rs[0].Field, "mounts[") {
				t.Errorf("want one refusal, got %+v (policy %s)", rs, policy)
			}
		})
	}
}

// TestCheckSession: a component runs only in a session the person started, under the policy they
// supplied, with the folders they named.
func TestCheckSession(t *testing.T) {
	agent := dockerFixture(t, "agent")
	want, _ := compiled(t, "agent")
	policy := want.Annotations[compile.AnnotationPolicy]
	f := fixtureFacts(agent)
	ws := sourceOf(agent, compile.WorkspaceMount)
	manifest := sourceOf(agent, compile.PolicyMount)
	s := &Session{Project: "sharness-e2e", Policy: policy, Workspace: ws, Manifest: manifest}
	wantFields(t, CheckSession(want, agent, f, s, "sharness-e2e"))

	wantFields(t, CheckSession(want, agent, f, nil, "sharness-e2e"), "session")
	other := *s
	other.Policy = "sha256:" + strings.Repeat("9", 64)
	wantFields(t, CheckSession(want, agent, f, &other, "sharness-e2e"), "session.policy", "process.env[SHARNESS_AI_POLICY_HASH]")
	other = *s
	other.Manifest = "/srv/another-manifest"
	wantFields(t, CheckSession(want, agent, f, &other, "sharness-e2e"), "mounts[/etc/sharness/policy]")
	// Another workspace: the workspace and every protected path below it are refused.
	other = *s
	other.Workspace = "/srv/the-recorded-workspace"
	rs := CheckSession(want, agent, f, &other, "sharness-e2e")
	if len(rs) < 2 || !slices.Contains(fields(rs), "mounts[/workspace]") || !slices.Contains(fields(rs), "mounts[/workspace/.git/hooks]") {
		t.Errorf("another workspace: refused %q", fields(rs))
	}
	// The person's inputs: the recorded value or nothing.
	keyed := *s
	keyed.OperatorKey = "ed25519:recorded"
	env := func(kv ...string) *specs.Spec {
		c := *agent
		p := *agent.Process
		p.Env = append(append([]string{}, p.Env...), kv...)
		c.Process = &p
		return &c
	}
	wantFields(t, CheckSession(want, env("SHARNESS_AI_OPERATOR_PUBKEY=ed25519:recorded", "SHARNESS_AI_GATE_TIMEOUT="), f, &keyed, "sharness-e2e"))
	wantFields(t, CheckSession(want, env("SHARNESS_AI_OPERATOR_PUBKEY=ed25519:another"), f, &keyed, "sharness-e2e"), "process.env[SHARNESS_AI_OPERATOR_PUBKEY]")
	wantFields(t, CheckSession(want, env("SHARNESS_AI_GATE_TIMEOUT=999h"), f, &keyed, "sharness-e2e"), "process.env[SHARNESS_AI_GATE_TIMEOUT]")
	wantFields(t, CheckSession(want, env("SHARNESS_AI_POLICY_HASH=sha256:"+strings.Repeat("9", 64)), f, &keyed, "sharness-e2e"), "process.env[SHARNESS_AI_POLICY_HASH]")
	wantFields(t, CheckSession(want, env("SHARNESS_AI_POLICY_KEY=ed25519:another"), f, &keyed, "sharness-e2e"), "process.env[SHARNESS_AI_POLICY_KEY]")
	// The source as the host resolved it is what counts: a name that leads elsewhere is refused.
	moved := fixtureFacts(agent)
	src := moved.Sources[ws]
	src.Path = "/etc"
	moved.Sources[ws] = src
	wantFields(t, CheckSession(want, agent, moved, s, "sharness-e2e"), "mounts[/workspace]")
}

func TestParseSession(t *testing.T) {
	good := `{"project":"sharness","policy":"sha256:` + strings.Repeat("a", 64) + `","workspace":"/w","manifest":"/m"}`
	if _, err := ParseSession([]byte(good)); err != nil {
		t.Fatalf("a valid record: %v", err)
	}
	for _, bad := range []string{
		strings.Replace(good, `"/w"`, `"w"`, 1),
		strings.Replace(good, `"/w"`, `"/w/../x"`, 1),
		strings.Replace(good, `"/m"`, `"/"`, 1),
		strings.Replace(good, `"sharness"`, `"Sharness"`, 1),
		strings.Replace(good, `sha256:a`, `sha256:`, 1),
		strings.Replace(good, `}`, `,"extra":1}`, 1),
		strings.Replace(good, `"workspace":"/w"`, `"workspace":"/w","Workspace":"/x"`, 1),
	} {
		if _, err := ParseSession([]byte(bad)); err == nil {
			t.Errorf("ParseSession(%s) accepted it", bad)
		}
	}
}

// TestCheckCodeRecord: a component's container runs the code recorded for it; the agent's code
// is the caller's.
func TestCheckCodeRecord(t *testing.T) {
	llm, _ := compiled(t, "llm")
	agent, _ := compiled(t, "agent")
	code := testCodeRecord.Components["llm"]
	hashes := func(m map[string]string) func(string) (string, error) {
		return func(p string) (string, error) {
			if s, ok := m[p]; ok {
				return s, nil
			}
			return "", &fs.PathError{Op: "open", Path: p, Err: fs.ErrNotExist}
		}
	}
	wantFields(t, CheckCodeRecord(llm, testCodeRecord, hashes(map[string]string{code.Path: code.SHA256})))
	wantFields(t, CheckCodeRecord(llm, testCodeRecord, hashes(map[string]string{code.Path: "sha256:" + strings.Repeat("3", 64)})), "code[/sharness-llm]")
	wantFields(t, CheckCodeRecord(llm, testCodeRecord, hashes(nil)), "code[/sharness-llm]")
	wantFields(t, CheckCodeRecord(llm, CodeRecord{}, hashes(nil)), "code")
	wantFields(t, CheckCodeRecord(agent, CodeRecord{}, hashes(nil)))
}

// TestCheckUnmarked: a container that claims no component must not be one, nor sit on a
// SHarness network or volume; a fixture the policy lists may sit on its own networks.
func TestCheckUnmarked(t *testing.T) {
	plain := &specs.Spec{Process: &specs.Process{Args: []string{"/sbin/docker-init", "--", "/bin/tool"}}}
	world, _ := compiled(t, "net")
	policy := world.Annotations[compile.AnnotationPolicy]
	egress := Network{Name: "sharness_egress", Driver: "bridge", Labels: map[string]string{labelProject: "sharness", labelComposeNetwork: "egress", labelPolicy: policy}}
	edge := Network{Name: "sharness_edge-agent-llm", Driver: "bridge", Internal: true, Labels: map[string]string{labelProject: "sharness", labelComposeNetwork: "edge-agent-llm", labelPolicy: policy}}
	llm := testCodeRecord.Components["llm"]
	hash := func(m map[string]string) func(string) (string, error) {
		return func(p string) (string, error) {
			if s, ok := m[p]; ok {
				return s, nil
			}
			return "", errors.New("no such file")
		}
	}
	fx := &Fixtures{}
	if err := jsonInto(`{"fixtures":{"world":{"networks":["egress"]}}}`, fx); err != nil {
		t.Fatal(err)
	}
	records := []CodeRecord{testCodeRecord}
	for _, tt := range []struct {
		name    string
		rec     EngineRecord
		hashes  map[string]string
		fixture string
		fields  []string
	}{
		{name: "a container of its own", rec: EngineRecord{Image: "sha256:" + strings.Repeat("c", 64)}},
		{name: "a component's image", rec: EngineRecord{Image: llm.Image}, fields: []string{"image"}},
		{name: "a component's code as its entrypoint", hashes: map[string]string{"/bin/tool": llm.SHA256}, fields: []string{"code[/bin/tool]"}},
		{name: "a component's code at its path", hashes: map[string]string{llm.Path: llm.SHA256}, fields: []string{"code[/sharness-llm]"}},
		{name: "a look-alike file at a component's path", hashes: map[string]string{llm.Path: "sha256:" + strings.Repeat("4", 64)}},
		{name: "on an edge network", rec: EngineRecord{Project: "sharness", Networks: []Network{edge}}, fields: []string{"network[sharness_edge-agent-llm]"}},
		{name: "on egress", rec: EngineRecord{Project: "sharness", Networks: []Network{egress}}, fields: []string{"network[sharness_egress]"}},
		{name: "with a SHarness volume", rec: EngineRecord{Volumes: []Volume{{Destination: "/id", Name: "sharness_identity-llm", Labels: map[string]string{labelPolicy: policy}}}},
			fields: []string{"mounts[/id]"}},
		{name: "a listed fixture on its network", rec: EngineRecord{Project: "sharness", Networks: []Network{egress}}, fixture: "world"},
		{name: "a listed fixture on another network", rec: EngineRecord{Project: "sharness", Networks: []Network{egress, edge}}, fixture: "world",
			fields: []string{"network[sharness_edge-agent-llm]"}},
		{name: "a fixture the policy does not list", rec: EngineRecord{Project: "sharness", Networks: []Network{egress}}, fixture: "model",
			fields: []string{"env[SHARNESS_AI_FIXTURE]"}},
		{name: "a listed fixture running a component's code", hashes: map[string]string{llm.Path: llm.SHA256}, fixture: "world",
			fields: []string{"code[/sharness-llm]"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			wantFields(t, CheckUnmarked(plain, tt.rec, records, tt.fixture, fx, policy, hash(tt.hashes)), tt.fields...)
		})
	}
}

func jsonInto(s string, v *Fixtures) error {
	f, err := ParseFixtures([]byte(s))
	if err == nil {
		*v = *f
	}
	return err
}

// TestDecideBelonging: through decide, a component's container is refused when the engine cannot
// be asked, when its project has no session, and when it is on a network its edges do not name;
// a fixture is admitted only as its policy lists it.
func TestDecideBelonging(t *testing.T) {
	files := fixtureFiles(t)
	_, _, _, policy := fixture(t)
	agent, _ := compiled(t, "agent")
	widened := composeRecord(agent, "sharness")
	widened.Networks = append(widened.Networks, Network{Name: "sharness_egress", Driver: "bridge",
		Labels: map[string]string{labelProject: "sharness", labelComposeNetwork: "egress", labelPolicy: policy}})
	noSession := composeRecord(agent, "nosession")
	with := func(extra map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range files {
			out[k] = v
		}
		for k, v := range extra {
			out[k] = v
		}
		return out
	}
	fixtureSpec := worldLike() // within FixtureCeiling
	fixtureSpec.Version, fixtureSpec.Process.Env = "1.0.2", []string{EnvFixture + "=world", EnvPolicy + "=" + policy}
	fixtureSpec.Linux.Namespaces[1].Path, fixtureSpec.Linux.CgroupsPath = "", "" // runc's default cgroup
	for _, tt := range []struct {
		name  string
		files map[string]string
		args  []string
		field string
		keep  bool // a refused exec that does not cut the container
	}{
		{name: "as compose makes it", files: files, args: []string{"create", "-b", "/ok", "abc"}},
		{name: "on egress", files: with(map[string]string{"engine:abc": encode(t, widened)}), args: []string{"create", "-b", "/ok", "abc"},
			field: "network[sharness_egress]"},
		{name: "an exec after a network was connected", files: with(map[string]string{"engine:abc": encode(t, widened)}),
			args: []string{"exec", "-p", "/proc-ok.json", "abc"}, field: "network[sharness_egress]"},
		{name: "an exec on the compiled networks", files: files, args: []string{"exec", "-p", "/proc-ok.json", "abc"}},
		{name: "no session", files: with(map[string]string{"engine:abc": encode(t, noSession)}), args: []string{"create", "-b", "/ok", "abc"},
			field: "session"},
		{name: "no engine record", files: with(nil), args: []string{"create", "-b", "/ok", "gone"}, field: "engine"},
		// runc by hand (a conformance suite): an unmarked container no engine made passes; one
		// Docker made (its network hook) must have the engine's record.
		{name: "unmarked, made by hand", files: with(map[string]string{"engine:byhand": "none"}), args: []string{"create", "-b", "/plain", "byhand"}},
		{name: "unmarked, made by Docker, no record", files: with(map[string]string{"engine:byhand": "none", "/plain-docker/config.json": plainDocker(t)}),
			args: []string{"create", "-b", "/plain-docker", "byhand"}, field: "engine"},
		{name: "a fixture its policy does not list", files: with(map[string]string{"/fx/config.json": encode(t, fixtureSpec)}),
			args: []string{"create", "-b", "/fx", "plain"}, field: "fixtures"},
		{name: "a fixture its policy lists", files: with(map[string]string{"/fx/config.json": encode(t, fixtureSpec),
			PolicyDir(policyRoot, policy) + "/" + FixturesFile: `{"fixtures":{"world":{"networks":["egress"]}}}`}),
			args: []string{"create", "-b", "/fx", "plain"}},
		// The attack on the running stack (W1, W3, W4, W6): an unmarked container or a lying
		// fixture binding a component's identity volume by its host path, the host's root, or
		// joining a component's namespaces.
		{name: "unmarked, a SHarness volume by its host path", files: with(map[string]string{
			"/pv/config.json":         encode(t, plainWith(bindOf("/var/lib/docker/volumes/atk_identity-llm/_data", "/id"))),
			"volume:atk_identity-llm": `{"` + labelPolicy + `":"` + policy + `"}`,
			"engine:pv":               encode(t, EngineRecord{Image: "sha256:" + strings.Repeat("c", 64)})}),
			args: []string{"create", "-b", "/pv", "pv"}, field: "mounts[/id]"},
		{name: "unmarked, the host's root", files: with(map[string]string{"/pr/config.json": encode(t, plainWith(bindOf("/", "/host"))),
			"engine:pr": encode(t, EngineRecord{Image: "sha256:" + strings.Repeat("c", 64)})}),
			args: []string{"create", "-b", "/pr", "pr"}, field: "mounts[/host]"},
		{name: "unmarked, another volume by its host path", files: with(map[string]string{"/po/config.json": encode(t, plainWith(bindOf("/var/lib/docker/volumes/mine/_data", "/data"))),
			"engine:po": encode(t, EngineRecord{Image: "sha256:" + strings.Repeat("c", 64)})}),
			args: []string{"create", "-b", "/po", "po"}},
		{name: "a fixture with a capability", files: with(map[string]string{"/fc/config.json": encode(t, withCaps(fixtureSpec, "CAP_SYS_ADMIN")),
			PolicyDir(policyRoot, policy) + "/" + FixturesFile: `{"fixtures":{"world":{"networks":["egress"]}}}`}),
			args: []string{"create", "-b", "/fc", "plain"}, field: "process.capabilities.bounding"},
		{name: "a fixture binding a host folder", files: with(map[string]string{"/fh/config.json": encode(t, withBind(fixtureSpec, bindOf("/srv", "/host"))),
			PolicyDir(policyRoot, policy) + "/" + FixturesFile: `{"fixtures":{"world":{"networks":["egress"]}}}`}),
			args: []string{"create", "-b", "/fh", "plain"}, field: "mounts[/host]"},
		{name: "unmarked, in a component's network namespace", files: with(map[string]string{
			"/pn/config.json":                   encode(t, plainJoining("/proc/4242/ns/net")),
			"/proc/4242/cgroup":                 "0::/system.slice/docker-" + strings.Repeat("d", 64) + ".scope\n",
			"engine:" + strings.Repeat("d", 64): encode(t, EngineRecord{Sharness: true}),
			"engine:pn":                         encode(t, EngineRecord{Image: "sha256:" + strings.Repeat("c", 64)})}),
			args: []string{"create", "-b", "/pn", "pn"}, field: "linux.namespaces.network"},
		{name: "unmarked, in another container's network namespace", files: with(map[string]string{
			"/pn/config.json":                   encode(t, plainJoining("/proc/4242/ns/net")),
			"/proc/4242/cgroup":                 "0::/system.slice/docker-" + strings.Repeat("e", 64) + ".scope\n",
			"engine:" + strings.Repeat("e", 64): encode(t, EngineRecord{}),
			"engine:pn":                         encode(t, EngineRecord{Image: "sha256:" + strings.Repeat("c", 64)})}),
			args: []string{"create", "-b", "/pn", "pn"}},
		// The model's health check: an exec into a fixture is the caller's.
		{name: "an exec into a fixture", files: with(map[string]string{"/fx/config.json": encode(t, fixtureSpec),
			"/proc-fx.json": encode(t, &specs.Process{Args: []string{"/sharness-model", "health"}, Cwd: "/", User: fixtureSpec.Process.User, NoNewPrivileges: true})}),
			args: []string{"exec", "-p", "/proc-fx.json", "fx"}},
		// docker exec --privileged, or -u 0, into a fixture: its process ceiling holds the exec too.
		{name: "a privileged exec into a fixture", files: with(map[string]string{"/fx/config.json": encode(t, fixtureSpec),
			"/proc-fx.json": encode(t, withCaps(&specs.Spec{Process: &specs.Process{Args: []string{"/bin/sh"}, Cwd: "/", User: fixtureSpec.Process.User, NoNewPrivileges: true}}, "CAP_SYS_ADMIN").Process)}),
			args: []string{"exec", "-p", "/proc-fx.json", "fx"}, field: "process.capabilities.bounding", keep: true},
		{name: "an exec as root into a fixture", files: with(map[string]string{"/fx/config.json": encode(t, fixtureSpec),
			"/proc-fx.json": encode(t, &specs.Process{Args: []string{"/bin/sh"}, Cwd: "/", NoNewPrivileges: true})}),
			args: []string{"exec", "-p", "/proc-fx.json", "fx"}, field: "process.user", keep: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := &fakeHost{files: tt.files, bundles: map[string]string{"abc": "/bundle", "fx": "/fx"}}
			if tt.name == "no engine record" {
				delete(h.files, "engine:*")
			}
			_, r := decide(tt.args, getenv, h)
			switch {
			case tt.field == "" && r != nil:
				t.Fatalf("refused: %s", r.Error())
			case tt.field != "" && (r == nil || r.first().Field != tt.field):
				t.Fatalf("want a refusal of %s, got %v", tt.field, r)
			}
			// Only a running container wider than its policy is cut.
			if want := tt.args[0] == "exec" && tt.field != "" && !tt.keep; r != nil && r.Cut != want {
				t.Errorf("cut %v, want %v", r.Cut, want)
			}
		})
	}
}

func FuzzParseRecord(f *testing.F) {
	f.Add([]byte(`{"ID":"abc","Image":"sha256:1","Config":{"Labels":{"com.docker.compose.project":"p"}},"NetworkSettings":{"Networks":{"p_a":{"NetworkID":""}}},"MountPoints":{"/x":{"Destination":"/x","Name":"p_v","Type":"volume"}}}`), "abc")
	f.Fuzz(func(t *testing.T, data []byte, id string) {
		r, nets, err := ParseRecord(data, id)
		if err != nil {
			return
		}
		for _, v := range r.Volumes {
			if v.Name == "" {
				t.Fatalf("a volume without a name: %+v", v)
			}
		}
		_ = nets
	})
}

func FuzzParseSession(f *testing.F) {
	f.Add([]byte(`{"project":"sharness","policy":"sha256:` + strings.Repeat("a", 64) + `","workspace":"/w","manifest":"/m"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseSession(data)
		if err != nil {
			return
		}
		if s.Valid() != nil || SessionPath("/s", s.Project) == "" {
			t.Fatalf("accepted an invalid record %+v", s)
		}
	})
}

func FuzzParseCodeRecord(f *testing.F) {
	f.Add([]byte(encodeCode(testCodeRecord)))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := ParseCodeRecord(data)
		if err != nil {
			return
		}
		for name, c := range r.Components {
			if !validDigest(c.SHA256) || !strings.HasPrefix(c.Path, "/") {
				t.Fatalf("accepted %s: %+v", name, c)
			}
		}
	})
}

func encodeCode(r CodeRecord) string {
	var b strings.Builder
	b.WriteString(`{"components":{`)
	first := true
	for name, c := range r.Components {
		if !first {
			b.WriteString(",")
		}
		first = false
		b.WriteString(`"` + name + `":{"image":"` + c.Image + `","path":"` + c.Path + `","sha256":"` + c.SHA256 + `"}`)
	}
	b.WriteString("}}")
	return b.String()
}

// plainDocker is an unmarked spec with Docker's network hook.
func plainDocker(t *testing.T) string {
	s := &specs.Spec{Version: "1.0.2", Process: &specs.Process{Args: []string{"/bin/tool"}}, Hooks: &specs.Hooks{}}
	//lint:ignore SA1019 prestart is what Docker 20.10 writes
	s.Hooks.Prestart = []specs.Hook{{Path: "/proc/1/exe", Args: []string{"libnetwork-setkey", "-exec-root=/var/run/docker", "byhand", "0123456789ab"}}}
	return encode(t, s)
}

// TestCheckHealth: a component with a compiled health check runs exactly it, every second at most:
// each run is an exec, at which the shim sees a network connected since the start.
func TestCheckHealth(t *testing.T) {
	bash, _ := compiled(t, "bash")
	agent, _ := compiled(t, "agent")
	ok := composeRecord(bash, "sharness")
	if ok.Health == nil {
		t.Fatal("bash's compiled spec lists no health command")
	}
	wantFields(t, CheckHealth(bash, ok))
	// The agent, net, llm and kms run the Landlock helper's check: the agent too is watched.
	wantFields(t, CheckHealth(agent, composeRecord(agent, "sharness")))
	wantFields(t, CheckHealth(agent, EngineRecord{}), "healthcheck")
	for name, f := range map[string]func(*EngineRecord){
		"none":             func(r *EngineRecord) { r.Health = nil },
		"disabled":         func(r *EngineRecord) { r.Health = []string{"NONE"} },
		"another command":  func(r *EngineRecord) { r.Health = []string{"CMD", "/bin/true"} },
		"as a shell line":  func(r *EngineRecord) { r.Health = []string{"CMD-SHELL", strings.Join(r.Health[1:], " ")} },
		"every 30 seconds": func(r *EngineRecord) { r.HealthEvery = 30 * time.Second },
		"the default":      func(r *EngineRecord) { r.HealthEvery = 0 },
	} {
		t.Run(name, func(t *testing.T) {
			r := composeRecord(bash, "sharness")
			f(&r)
			wantFields(t, CheckHealth(bash, r), "healthcheck")
		})
	}
}

func bindOf(src, dst string) specs.Mount {
	return specs.Mount{Destination: dst, Type: "bind", Source: src, Options: []string{"rbind", "rw"}}
}

func plainWith(mounts ...specs.Mount) *specs.Spec {
	return &specs.Spec{Version: "1.0.2", Process: &specs.Process{Args: []string{"/bin/tool"}}, Mounts: mounts}
}

func withBind(s *specs.Spec, m specs.Mount) *specs.Spec {
	c := *s
	c.Mounts = append(append([]specs.Mount{}, s.Mounts...), m)
	return &c
}

func plainJoining(netns string) *specs.Spec {
	s := plainWith()
	s.Linux = &specs.Linux{Namespaces: []specs.LinuxNamespace{{Type: specs.NetworkNamespace, Path: netns}, {Type: specs.PIDNamespace}}}
	return s
}

// TestCheckNetworkNames: at an exec the record's names alone decide: the compiled networks of
// the container's project, and "none", pass; any other name (egress, another project's edge, the
// default bridge) is a network connected since the start.
func TestCheckNetworkNames(t *testing.T) {
	agent, _ := compiled(t, "agent")
	names := func(project string, ns ...string) EngineRecord {
		r := EngineRecord{Project: project}
		for _, n := range ns {
			r.Networks = append(r.Networks, Network{Name: n})
		}
		return r
	}
	wantFields(t, CheckNetworkNames(agent, names("p", "p_edge-agent-llm", "p_edge-agent-net")))
	wantFields(t, CheckNetworkNames(agent, names("p", "none")))
	wantFields(t, CheckNetworkNames(agent, names("p", "p_edge-agent-llm", "p_egress")), "network[p_egress]")
	wantFields(t, CheckNetworkNames(agent, names("p", "q_edge-agent-llm")), "network[q_edge-agent-llm]")
	wantFields(t, CheckNetworkNames(agent, names("p", "bridge")), "network[bridge]")
	wantFields(t, CheckNetworkNames(agent, names("", "_edge-agent-llm")), "network[_edge-agent-llm]")
}
