package doctor

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sharness-ai/sharness/internal/seal"
)

// engine is a healthy engine's facts, for the checks that need one.
var engine = Engine{Version: "26.1.4", Runtimes: []string{"runc"}, DefaultRuntime: "runc", SecurityOptions: []string{"name=seccomp,profile=builtin", "name=cgroupns"}}

func withEngine(f Facts) Facts {
	if f.Engine.Version == "" && f.Engine.Err == nil {
		f.Engine = engine
	}
	return f
}

func TestLeaky(t *testing.T) {
	for v, want := range map[string]bool{
		"20.10.24+dfsg1": true, "20.10.24": true, "19.03.15": true,
		"23.0.10": true, "23.0.11": false, "23.0.11-rc1": true, "23.0.12": false,
		"24.0.9": true, "25.0.0": true, "25.0.4": true, "25.0.5": false, "25.0.6": false,
		"26.0.0-rc3": true, "26.0.0": false, "26.1.4": false, "27.0.1": false, "28.2.2": false, "v29.0.0": false,
	} {
		got, ok := parseVersion(v)
		if !ok {
			t.Errorf("parseVersion(%q) failed", v)
			continue
		}
		if leaky(got) != want {
			t.Errorf("leaky(%s) = %v, want %v", v, !want, want)
		}
	}
	for _, v := range []string{"", "dev", "master-dockerproject-2024", "26"} {
		if _, ok := parseVersion(v); ok {
			t.Errorf("parseVersion(%q) ok, want a failure", v)
		}
	}
}

func TestChecks(t *testing.T) {
	status := "Name:\tdoctor\nSeccomp:\t0\nSeccomp_filters:\t0\n"
	v2 := "cpuset cpu io memory hugetlb pids rdma misc\n"
	v1 := "#subsys_name\thierarchy\tnum_cgroups\tenabled\ncpuset\t4\t1\t1\nmemory\t6\t80\t1\npids\t9\t80\t1\n"
	route := "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n" +
		"eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n" +
		"docker0\t000011AC\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0\n"
	type check func(Facts) (Status, string)
	for _, tc := range []struct {
		name  string
		check check
		facts Facts
		want  Status
		in    string // the detail must contain it
	}{
		{"engine fixed", engineCheck, Facts{Engine: Engine{Version: "26.0.0"}}, OK, "has the CVE-2024-29018 fix"},
		{"engine 23.0.11", engineCheck, Facts{Engine: Engine{Version: "23.0.11"}}, OK, "fix"},
		{"engine 25.0.4, loopback resolver", engineCheck, Facts{Engine: Engine{Version: "25.0.4"}, Files: map[string]string{PathResolv: "nameserver 127.0.0.1\n"}}, OK, "ok for the stack, closed by its own DNS design"},
		{"engine 25.0.4, other containers leak", engineCheck, Facts{Engine: Engine{Version: "25.0.4"}, Files: map[string]string{PathResolv: "nameserver 127.0.0.1\n"}}, OK, "Other containers on this engine's internal networks with default DNS do reach the host's loopback resolver (127.0.0.1)"},
		{"engine 20.10, no loopback resolver", engineCheck, Facts{Engine: Engine{Version: "20.10.24+dfsg1"}, Files: map[string]string{PathResolv: "nameserver 10.255.255.53\n"}}, OK,
			"Docker Engine 20.10.24+dfsg1 predates the CVE-2024-29018 fix (26.0.0, 25.0.5, 23.0.11): ok for the stack, closed by its own DNS design: its containers on internal networks get dns 0.0.0.0, which the engine never forwards from the host's namespace (e2e TestWall, on Engine 20.10 with the leak's condition in place)"},
		{"engine 20.10, loopback resolver", engineCheck, Facts{Engine: Engine{Version: "20.10.24+dfsg1"}, Files: map[string]string{PathResolv: "nameserver 127.0.0.1\n"}}, OK, "e2e TestWall"},
		{"engine 20.10, the live probe saw a leak", engineCheck, Facts{Engine: Engine{Version: "20.10.24+dfsg1"}, Live: Live{Ran: true, Leaked: []string{"abc.sharness-doctor.invalid"}}}, Degraded, "the live probe saw it forward a query to the host's loopback (the dns-leak line)"},
		{"engine 20.10, the live probe saw none", engineCheck, Facts{Engine: Engine{Version: "20.10.24+dfsg1"}, Live: Live{Ran: true}}, OK, "ok for the stack"},
		{"engine fixed, no upgrade asked", engineCheck, Facts{Engine: Engine{Version: "29.1.0"}, Files: map[string]string{PathResolv: "nameserver 127.0.0.1\n"}}, OK, "Docker Engine 29.1.0 (has the CVE-2024-29018 fix)"},
		{"engine 24, systemd-resolved stub, loopback upstream", engineCheck, Facts{Engine: Engine{Version: "24.0.7"}, Files: map[string]string{PathResolv: "nameserver 127.0.0.53\n", PathResolvUpstream: "nameserver 127.0.1.1\nnameserver 192.0.2.1\n"}}, OK, "(127.0.1.1)"},
		{"engine 24, systemd-resolved stub, real upstream", engineCheck, Facts{Engine: Engine{Version: "24.0.7"}, Files: map[string]string{PathResolv: "nameserver 127.0.0.53\n", PathResolvUpstream: "nameserver 192.0.2.1\n"}}, OK, "ok for the stack"},
		{"engine unparsable", engineCheck, Facts{Engine: Engine{Version: "dev"}}, Degraded, "not a version"},
		{"engine missing", engineCheck, Facts{Engine: Engine{Err: errors.New("Cannot connect to the Docker daemon")}}, Fail, "start one (hack/engine.sh start)"},

		{"compose v2", composeCheck, Facts{Compose: Compose{Output: "Docker Compose version v2.40.3"}}, OK, "v2.40.3"},
		{"compose v5", composeCheck, Facts{Compose: Compose{Output: "Docker Compose version v5.0.0"}}, OK, "v5.0.0"},
		{"compose v1", composeCheck, Facts{Compose: Compose{Output: "docker-compose version 1.29.2, build 5becea4c"}}, Fail, "1.29.2 is v1"},
		{"compose garbage", composeCheck, Facts{Compose: Compose{Output: "hello"}}, Fail, `output "hello"`},
		{"compose missing", composeCheck, Facts{Compose: Compose{Err: errors.New("docker: 'compose' is not a docker command")}}, Fail, "hack/engine.sh install builds it"},

		{"runtime absent", runtimeCheck, Facts{Engine: engine}, Fail, "will not start"},
		{"runtime registered", runtimeCheck, Facts{Engine: Engine{Version: "26.1.4", Runtimes: []string{"runc", "sharness"}, DefaultRuntime: "runc"}}, Degraded, "make it the default"},
		{"runtime default", runtimeCheck, Facts{Engine: Engine{Version: "26.1.4", Runtimes: []string{"runc", "sharness"}, DefaultRuntime: "sharness"}}, OK, "default runtime"},
		{"runtime no engine", runtimeCheck, Facts{Engine: Engine{Err: errors.New("down")}}, Skipped, "no engine"},

		{"seccomp ok", seccompCheck, withEngine(Facts{Files: map[string]string{PathStatus: status}}), OK, "profile=builtin"},
		{"seccomp kernel lacks", seccompCheck, withEngine(Facts{Files: map[string]string{PathStatus: "Name:\tdoctor\nNoNewPrivs:\t0\n"}}), Fail, "no seccomp"},
		{"seccomp engine lacks", seccompCheck, Facts{Engine: Engine{Version: "26.1.4", SecurityOptions: []string{"name=apparmor"}}, Files: map[string]string{PathStatus: status}}, Fail, "security options"},
		{"seccomp no engine", seccompCheck, Facts{Files: map[string]string{PathStatus: status}}, Skipped, "no engine"},
		{"seccomp unreadable", seccompCheck, withEngine(Facts{}), Skipped, "cannot read"},

		{"userns ok", usernsCheck, Facts{Files: map[string]string{PathMaxUserNS: "96364\n"}}, OK, "96364"},
		{"userns zero", usernsCheck, Facts{Files: map[string]string{PathMaxUserNS: "0\n"}}, Degraded, "max_user_namespaces = 0"},
		{"userns absent", usernsCheck, Facts{}, Degraded, "without user namespaces"},
		{"userns clone off", usernsCheck, Facts{Files: map[string]string{PathMaxUserNS: "15000\n", PathUsernsClone: "0\n"}}, Degraded, "unprivileged_userns_clone = 0"},
		{"userns clone on", usernsCheck, Facts{Files: map[string]string{PathMaxUserNS: "15000\n", PathUsernsClone: "1\n"}}, OK, "allowed"},
		{"userns apparmor", usernsCheck, Facts{Files: map[string]string{PathMaxUserNS: "15000\n", PathAppArmorUserns: "1\n"}}, Degraded, "apparmor"},

		{"landlock 7", landlockCheck, Facts{Landlock: 7}, OK, "ABI 7"},
		{"landlock 5", landlockCheck, Facts{Landlock: 5}, OK, "signal scoping needs ABI 6"},
		{"landlock 3", landlockCheck, Facts{Landlock: 3}, Degraded, "no TCP port rules"},
		{"landlock none", landlockCheck, Facts{LandlockErr: syscall.ENOSYS}, Degraded, "no Landlock"},
		{"landlock off", landlockCheck, Facts{LandlockErr: syscall.EOPNOTSUPP}, Degraded, "lsm="},
		{"landlock other", landlockCheck, Facts{LandlockErr: syscall.EPERM}, Degraded, "landlock_create_ruleset"},

		{"cgroup v2", cgroupsCheck, Facts{Files: map[string]string{PathCgroup2: v2, PathCgroups: v1}}, OK, "v2"},
		{"cgroup v2 without pids", cgroupsCheck, Facts{Files: map[string]string{PathCgroup2: "cpu io memory\n"}}, Fail, "no pids cgroup controller"},
		{"cgroup v1", cgroupsCheck, Facts{Files: map[string]string{PathCgroups: v1}}, Degraded, "cgroup v1"},
		{"cgroup v1 without memory", cgroupsCheck, Facts{Files: map[string]string{PathCgroups: strings.Replace(v1, "memory\t6\t80\t1", "memory\t0\t1\t0", 1)}}, Fail, "no memory cgroup controller"},
		{"cgroup unreadable", cgroupsCheck, Facts{}, Skipped, "cannot read"},

		{"memfd_secret ok", memfdSecretCheck, Facts{}, OK, "works"},
		{"memfd_secret ENOSYS", memfdSecretCheck, Facts{MemfdSecretErr: syscall.ENOSYS}, Degraded, "secretmem.enable=1"},
		{"memfd_secret EPERM", memfdSecretCheck, Facts{MemfdSecretErr: syscall.EPERM}, Degraded, "seccomp"},
		{"memfd_secret other", memfdSecretCheck, Facts{MemfdSecretErr: syscall.ENOMEM}, Degraded, "memfd_secret:"},

		{"edge pool free", edgePoolCheck, Facts{Files: map[string]string{PathRoutes: route}}, OK, "10.213.0.0/16"},
		{"edge pool docker bridge", edgePoolCheck, Facts{Files: map[string]string{PathRoutes: route + "br-0123456789ab\t0000D50A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n"}}, OK, "besides Docker's bridges"},
		{"edge pool routed", edgePoolCheck, Facts{Files: map[string]string{PathRoutes: route + "wg0\t0000000A\t00000000\t0001\t0\t0\t0\t000000FF\t0\t0\t0\n"}}, Fail, "10.0.0.0/8 via wg0"},
		{"edge pool unreadable", edgePoolCheck, Facts{}, Skipped, "cannot read"},

		{"dns-leak not asked", dnsLeakCheck, Facts{}, Skipped, "--live"},
		{"dns-leak port taken", dnsLeakCheck, Facts{Live: Live{Skip: "127.0.0.1:53 taken"}}, Skipped, "taken"},
		{"dns-leak none", dnsLeakCheck, Facts{Live: Live{Ran: true}}, OK, "no query reached"},
		{"dns-leak leaked", dnsLeakCheck, Facts{Live: Live{Ran: true, Leaked: []string{"abc.sharness-doctor.invalid"}}}, Fail, "abc.sharness-doctor.invalid"},
		{"dns-leak error", dnsLeakCheck, Facts{Live: Live{Ran: true, Err: errors.New("network create: boom")}}, Fail, "boom"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, detail := tc.check(tc.facts)
			if got == OK && strings.Contains(detail, "upgrade") { // an ok line asks nothing of the person
				t.Errorf("ok, but asks for an upgrade: %q", detail)
			}
			if got != tc.want || !strings.Contains(detail, tc.in) {
				t.Errorf("got %s %q, want %s containing %q", got, detail, tc.want, tc.in)
			}
		})
	}
}

func bundle(t *testing.T, hygiene map[string]string) *seal.Bundle {
	t.Helper()
	sk, err := seal.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	b, err := seal.NewBundle(sk.PublicKey(), "sha256:"+strings.Repeat("b", 64), time.Now(), hygiene)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestKMS(t *testing.T) {
	const mlock = "degraded: memlock limit 8388608 bytes and no CAP_IPC_LOCK (set the container's memlock ulimit to unlimited)"
	b := bundle(t, map[string]string{"not_dumpable": "ok", "mlockall": mlock, "memfd_secret": "ok"})
	fp := b.Fingerprint()
	for _, tc := range []struct {
		name string
		kms  KMS
		want []Result
	}{
		{"degraded mlockall", KMS{Project: "sharness", Bundle: b}, []Result{
			{"kms/memfd_secret", OK, fmt.Sprintf("kms %s (project sharness): ok", fp)},
			{"kms/mlockall", Degraded, fmt.Sprintf("kms %s (project sharness): %s", fp, mlock)},
			{"kms/not_dumpable", OK, fmt.Sprintf("kms %s (project sharness): ok", fp)},
		}},
		{"no stack", KMS{Project: "sharness", Err: ErrNoStack}, []Result{
			{"kms", Skipped, `no kms bundle in the logs of project "sharness" (no stack running): start the stack to see its memory hygiene`},
		}},
		{"no stack, compose failed", KMS{Project: "demo", Err: fmt.Errorf("%w: docker compose: exit status 1", ErrNoStack)}, []Result{
			{"kms", Skipped, `no kms bundle in the logs of project "demo" (no stack running: docker compose: exit status 1): start the stack to see its memory hygiene`},
		}},
		{"invalid bundle", KMS{Project: "sharness", Err: errors.New("kms bundle: version 2, want 1")}, []Result{
			{"kms", Fail, `the kms of project "sharness" printed a bundle doctor cannot read: kms bundle: version 2, want 1`},
		}},
		{"no hygiene", KMS{Project: "sharness", Bundle: bundle(t, nil)}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := kmsCheck(Facts{KMS: tc.kms})
			if tc.want == nil { // a bundle without a report: one degraded line
				if len(got) != 1 || got[0].Status != Degraded {
					t.Errorf("got %v, want one degraded line", got)
				}
				return
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("kms lines (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCheck runs the whole report: every check once, in order, and Failed names the failures.
func TestCheck(t *testing.T) {
	rs := Check(Facts{Engine: Engine{Err: errors.New("down")}, Compose: Compose{Output: "Docker Compose version v2.40.3"}, KMS: KMS{Err: ErrNoStack}})
	var names []string
	for _, r := range rs {
		names = append(names, r.Name)
		if r.Detail == "" || r.Status == "" {
			t.Errorf("%s: empty verdict %+v", r.Name, r)
		}
	}
	want := []string{"engine", "compose", "runtime", "seccomp", "userns", "landlock", "cgroups", "memfd_secret", "edge-pool", "kms", "policy", "dns-leak"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("checks (-want +got):\n%s", diff)
	}
	if got := Failed(rs); !cmp.Equal(got, []string{"engine"}) {
		t.Errorf("Failed = %q, want [engine]", got)
	}
}

// sessionLine is the launcher's canonical start line, as images/launcher prints it.
func sessionLine(policy, ca string) string {
	return fmt.Sprintf(`{"time":"2026-05-01T09:00:00Z","level":"INFO","msg":"session started","policy":%q,"session_ca_sha256":%q,"ca_key":"destroyed","not_after":"2026-05-02T09:00:00Z","identity_root":"/run/sharness/identity","roles":["agent","net"]}`, policy, ca)
}

var (
	hashM  = "sha256:" + strings.Repeat("a", 64)
	hashX  = "sha256:" + strings.Repeat("c", 64)
	caHash = strings.Repeat("9", 64)
)

func TestParseSession(t *testing.T) {
	for _, tc := range []struct {
		name, logs string
		want       Session
		err        string
	}{
		{"one session", `{"level":"INFO","msg":"identities minted"}` + "\n" + sessionLine(hashM, caHash) + "\n", Session{hashM, caHash}, ""},
		{"restarted: the last session runs", sessionLine(hashX, strings.Repeat("1", 64)) + "\nlauncher: restarting\n" + sessionLine(hashM, caHash) + "\n", Session{hashM, caHash}, ""},
		{"CRLF and noise", "not json\n{broken\n" + sessionLine(hashM, caHash) + "\r\n", Session{hashM, caHash}, ""},
		{"refused start", `{"level":"ERROR","msg":"refusing to start","error":"the supplied hash is sha256:0000"}` + "\n", Session{}, `no "session started" line`},
		{"empty", "", Session{}, `no "session started" line`},
		{"malformed policy", sessionLine("sha256:abc", caHash), Session{}, "not a policy hash"},
		{"malformed CA hash", sessionLine(hashM, "XYZ"), Session{}, "not a policy hash and a session CA hash"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseSession([]byte(tc.logs))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func FuzzParseSession(f *testing.F) {
	f.Add([]byte(sessionLine(hashM, caHash) + "\n"))
	f.Add([]byte("x\n" + sessionLine("sha256:abc", caHash)))
	f.Fuzz(func(t *testing.T, logs []byte) {
		s, err := ParseSession(logs)
		if err == nil && (!strings.HasPrefix(s.Policy, "sha256:") || len(s.SessionCA) != 64) {
			t.Fatalf("accepted %+v", s)
		}
	})
}

func TestPolicyCheck(t *testing.T) {
	running := Session{hashM, caHash}
	for _, tc := range []struct {
		name  string
		stack Stack
		want  Status
		in    []string
	}{
		{"equal", Stack{Project: "demo", Supplied: hashM, Session: running}, OK, []string{"project demo runs policy " + hashM + ", the supplied hash (session CA " + caHash + ")"}},
		{"different", Stack{Project: "demo", Supplied: hashX, Session: running}, Fail, []string{"runs policy " + hashM + ", not the supplied " + hashX, "sharness-ai down -p demo", "sharness-ai up -p demo --policy-hash " + hashX}},
		{"no hash supplied", Stack{Project: "demo", Session: running}, Degraded, []string{"runs policy " + hashM, "no hash was supplied", "SHARNESS_AI_POLICY_HASH"}},
		{"no stack", Stack{Project: "demo", Supplied: hashM, Err: fmt.Errorf("%w: launcher is exited", ErrNoStack)}, Skipped, []string{`project "demo" is running (no stack running: launcher is exited)`}},
		{"no stack, no hash", Stack{Project: "demo", Err: ErrNoStack}, Skipped, []string{"no stack's policy to compare"}},
		{"zero facts", Stack{}, Skipped, []string{"no stack running"}},
		{"launcher runs, no session line", Stack{Project: "demo", Supplied: hashM, Err: errors.New(`no "session started" line in the launcher's logs`)}, Fail, []string{"cannot be read", "sharness-ai status -p demo"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, detail := policyCheck(Facts{Stack: tc.stack})
			if got != tc.want {
				t.Errorf("status %s, want %s: %s", got, tc.want, detail)
			}
			for _, s := range tc.in {
				if !strings.Contains(detail, s) {
					t.Errorf("detail %q lacks %q", detail, s)
				}
			}
		})
	}
}
