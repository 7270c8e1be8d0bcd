package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sharness-ai/sharness/host/doctor"
	"github.com/sharness-ai/sharness/host/doctor/probe"
	"github.com/sharness-ai/sharness/host/engine"
	"github.com/sharness-ai/sharness/internal/seal"
	"github.com/sharness-ai/sharness/testkit/enginetest"
)

// fakeHost replaces what doctor learns about the host: the engine e (nil: none answers), whose
// docker CLI says compose is v2.40.3, files by path, and the kms logs.
func fakeHost(t *testing.T, e *enginetest.Engine, files map[string]string, kmsLogs string) *[]string {
	t.Helper()
	var projects []string
	origEnv, origLogs, origRun := doctorEnv, composeLogs, runDocker
	t.Cleanup(func() { doctorEnv, composeLogs, runDocker = origEnv, origLogs, origRun })
	useAPI(t, e)
	noEngine = e == nil
	doctorEnv = func(d *engine.Docker) probe.Env {
		return probe.Env{
			Engine: d,
			ReadFile: func(name string) ([]byte, error) {
				if s, ok := files[name]; ok {
					return []byte(s), nil
				}
				return nil, fs.ErrNotExist
			},
			Landlock:    func() (int, error) { return 7, nil },
			MemfdSecret: func() error { return syscall.ENOSYS },
			Listen: func(string, string) (net.PacketConn, error) {
				return nil, errors.New("listen udp4 127.0.0.1:53: bind: address already in use")
			},
		}
	}
	runDocker = func(_ context.Context, d dockerCmd) error {
		if strings.Join(d.args, " ") != "compose version" {
			return fmt.Errorf("unexpected docker %v", d.args)
		}
		fmt.Fprintln(d.stdout, "Docker Compose version v2.40.3")
		return nil
	}
	composeLogs = func(_ context.Context, project string, _ []string) ([]byte, error) {
		projects = append(projects, project)
		return []byte(kmsLogs), nil
	}
	return &projects
}

// healthyEngine is an engine with the CVE-2024-29018 fix and the sharness runtime as its
// default.
func healthyEngine() *enginetest.Engine {
	return &enginetest.Engine{Version: "26.1.4", Runtimes: []string{"runc", "sharness"}, DefaultRuntime: "sharness", SecurityOptions: []string{"name=seccomp,profile=builtin"}}
}

// launcher puts project demo's launcher on e: state is what the engine says of it, logs what it
// printed (on stderr, as the launcher logs there).
func launcher(e *enginetest.Engine, state, logs string) {
	e.Containers = append(e.Containers, enginetest.Container{ID: "0123abcd" + strings.Repeat("0", 56), Name: "demo-launcher-1", State: state, Stderr: logs,
		Labels: map[string]string{"com.docker.compose.project": "demo", "com.docker.compose.service": "launcher"}})
}

// containerRequests are e's requests about containers.
func containerRequests(e *enginetest.Engine) []string {
	return slices.DeleteFunc(e.Requests(), func(r string) bool { return !strings.Contains(r, " /containers/") })
}

// sessionStarted is the launcher's start line for policy m.
func sessionStarted(m string) string {
	return `{"time":"2026-05-01T09:00:00Z","level":"INFO","msg":"session started","policy":"` + m + `","session_ca_sha256":"` + strings.Repeat("9", 64) + `","ca_key":"destroyed"}` + "\n"
}

// TestDoctorPolicy: doctor compares the policy the running stack's launcher started its session
// with against the supplied hash (flag, else SHARNESS_AI_POLICY_HASH), asking the engine for the
// project's launcher by compose's labels.
func TestDoctorPolicy(t *testing.T) {
	m, other := "sha256:"+strings.Repeat("a", 64), "sha256:"+strings.Repeat("c", 64)
	for _, tc := range []struct {
		name        string
		args        []string
		env         string // SHARNESS_AI_POLICY_HASH
		state, logs string
		code        int
		line        string // the policy line, a regular expression
	}{
		{"equal", []string{"--policy-hash", m}, "", "running", sessionStarted(m), ExitOK, `(?m)^policy +ok +project demo runs policy ` + m + `, the supplied hash`},
		{"from the environment", nil, m, "running", sessionStarted(m), ExitOK, `(?m)^policy +ok +`},
		{"flag over environment", []string{"--policy-hash", m}, other, "running", sessionStarted(m), ExitOK, `(?m)^policy +ok +`},
		{"different", []string{"--policy-hash", other}, "", "running", sessionStarted(m), ExitRefused, `(?m)^policy +fail +project demo runs policy ` + m + `, not the supplied ` + other + `: .*sharness-ai down -p demo`},
		{"no hash supplied", nil, "", "running", sessionStarted(m), ExitOK, `(?m)^policy +degraded +project demo runs policy ` + m + ` \(session CA 9{64}\), and no hash was supplied`},
		{"no stack", []string{"--policy-hash", m}, "", "", "", ExitOK, `(?m)^policy +skipped +no launcher of project "demo" is running`},
		{"launcher exited", []string{"--policy-hash", m}, "", "exited", "", ExitOK, `(?m)^policy +skipped +.*its launcher is exited`},
		{"launcher running, no session line", []string{"--policy-hash", m}, "", "running", `{"msg":"refusing to start"}` + "\n", ExitRefused, `(?m)^policy +fail +the launcher of project "demo" runs, but its session line cannot be read`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("SHARNESS_AI_POLICY_HASH", tc.env)
			e := healthyEngine()
			if tc.state != "" {
				launcher(e, tc.state, tc.logs)
			}
			fakeHost(t, e, healthyFiles, "")
			code, out, errOut := run(t, append([]string{"doctor", "-p", "demo"}, tc.args...)...)
			if code != tc.code || !regexp.MustCompile(tc.line).MatchString(out) {
				t.Errorf("exit %d, want %d with %s\nstdout:\n%s\nstderr:\n%s", code, tc.code, tc.line, out, errOut)
			}
			calls := containerRequests(e)
			wantList := `GET /containers/json?all=1&filters={"label":{"com.docker.compose.project=demo":true,"com.docker.compose.service=launcher":true}}`
			if len(calls) == 0 || calls[0] != wantList {
				t.Errorf("container requests %q, want first %q", calls, wantList)
			}
			id := "0123abcd" + strings.Repeat("0", 56)
			if tc.state == "running" && !cmp.Equal(calls[1:], []string{"GET /containers/" + id + "/json", "GET /containers/" + id + "/logs?stderr=1&stdout=1"}) {
				t.Errorf("container requests %q, want the launcher's logs read", calls)
			}
		})
	}
	t.Run("json", func(t *testing.T) {
		t.Setenv("SHARNESS_AI_POLICY_HASH", "")
		e := healthyEngine()
		launcher(e, "running", sessionStarted(m))
		fakeHost(t, e, healthyFiles, "")
		code, out, _ := run(t, "doctor", "-p", "demo", "--json", "--policy-hash", other)
		var got struct {
			OK     bool
			Checks []doctor.Result
		}
		if err := json.Unmarshal([]byte(out), &got); err != nil || code != ExitRefused || got.OK {
			t.Fatalf("exit %d, %v, ok %v\n%s", code, err, got.OK, out)
		}
		i := slices.IndexFunc(got.Checks, func(r doctor.Result) bool { return r.Name == "policy" })
		if i < 0 || got.Checks[i].Status != doctor.Fail || !strings.Contains(got.Checks[i].Detail, "not the supplied "+other) {
			t.Errorf("policy check %+v", got.Checks)
		}
	})
	t.Run("malformed hash", func(t *testing.T) {
		fakeHost(t, healthyEngine(), healthyFiles, "")
		if code, _, errOut := run(t, "doctor", "--policy-hash", "sha256:abc"); code != ExitUsage || !strings.Contains(errOut, "--policy-hash") {
			t.Errorf("exit %d, %s; want %d naming --policy-hash", code, errOut, ExitUsage)
		}
	})
}

var healthyFiles = map[string]string{
	doctor.PathStatus:    "Name:\tsharness-ai\nSeccomp:\t0\n",
	doctor.PathMaxUserNS: "15000\n",
	doctor.PathCgroup2:   "cpu io memory pids\n",
	doctor.PathRoutes:    "Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\tMTU\tWindow\tIRTT\n",
	doctor.PathResolv:    "nameserver 192.0.2.53\n",
}

func TestDoctor(t *testing.T) {
	sk, _ := seal.GenerateKey()
	b, err := seal.NewBundle(sk.PublicKey(), "sha256:"+strings.Repeat("b", 64), time.Now(),
		map[string]string{"mlockall": "degraded: memlock limit 8388608 bytes and no CAP_IPC_LOCK", "not_dumpable": "ok"})
	if err != nil {
		t.Fatal(err)
	}
	logs := seal.BundleLogPrefix + string(b.Marshal()) + "\n"

	t.Run("text", func(t *testing.T) {
		projects := fakeHost(t, healthyEngine(), healthyFiles, logs)
		code, out, errOut := run(t, "doctor", "-p", "demo")
		if code != ExitOK || errOut != "" {
			t.Fatalf("exit %d, stderr %q, want 0: degraded is reported, not fatal\n%s", code, errOut, out)
		}
		for _, want := range []string{
			`(?m)^CHECK +STATUS +DETAIL$`,
			`(?m)^engine +ok +Docker Engine 26\.1\.4 \(has the CVE-2024-29018 fix\)$`,
			`(?m)^runtime +ok +the sharness runtime is registered and is the default runtime`,
			`(?m)^memfd_secret +degraded +ENOSYS`,
			`(?m)^kms/mlockall +degraded +kms \S+ \(project demo\): degraded: memlock limit`,
			`(?m)^kms/not_dumpable +ok +`,
			`(?m)^dns-leak +skipped +run with --live`,
			`(?m)^9 ok, 2 degraded, 0 failed, 2 skipped$`,
		} {
			if !regexp.MustCompile(want).MatchString(out) {
				t.Errorf("output lacks %s:\n%s", want, out)
			}
		}
		if strings.Join(*projects, ",") != "demo" {
			t.Errorf("kms logs read for projects %q, want demo", *projects)
		}
	})

	t.Run("json, no engine, live", func(t *testing.T) {
		t.Setenv("COMPOSE_PROJECT_NAME", "fromenv")
		projects := fakeHost(t, nil, healthyFiles, "")
		code, out, errOut := run(t, "doctor", "--json", "--live")
		if code != ExitRefused || !strings.Contains(errOut, "doctor: failed: engine") {
			t.Fatalf("exit %d, stderr %q; want 1 naming the failed check", code, errOut)
		}
		var got struct {
			OK     bool
			Checks []doctor.Result
		}
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("--json output: %v\n%s", err, out)
		}
		status := map[string]doctor.Status{}
		for _, r := range got.Checks {
			status[r.Name] = r.Status
		}
		if got.OK || status["engine"] != doctor.Fail || status["runtime"] != doctor.Skipped || status["kms"] != doctor.Skipped || status["dns-leak"] != doctor.Skipped {
			t.Errorf("ok %v, statuses %v", got.OK, status)
		}
		if strings.Join(*projects, ",") != "fromenv" {
			t.Errorf("kms logs read for projects %q, want COMPOSE_PROJECT_NAME's", *projects)
		}
	})

	t.Run("live leak", func(t *testing.T) {
		var addr string
		e := healthyEngine()
		e.Images = []enginetest.Image{{Refs: []string{probe.Image}, ID: "sha256:" + strings.Repeat("a", 64)}}
		e.Run = func(c enginetest.Created) int { // a leaky engine: the container's query reaches the host
			conn, _ := net.Dial("udp4", addr)
			conn.Write(dnsQuery(t, c.Cmd[len(c.Cmd)-1]))
			conn.Close()
			time.Sleep(100 * time.Millisecond)
			return 0
		}
		fakeHost(t, e, healthyFiles, logs)
		env := doctorEnv
		doctorEnv = func(d *engine.Docker) probe.Env {
			e := env(d)
			e.Listen = func(network, _ string) (net.PacketConn, error) {
				pc, err := net.ListenPacket(network, "127.0.0.1:0")
				if err == nil {
					addr = pc.LocalAddr().String()
				}
				return pc, err
			}
			return e
		}
		code, out, errOut := run(t, "doctor", "--live")
		if code != ExitRefused || !strings.Contains(errOut, "failed: dns-leak") || !regexp.MustCompile(`(?m)^dns-leak +fail +a container on an internal network asked for [0-9a-f]+\.sharness-doctor\.invalid`).MatchString(out) {
			t.Errorf("exit %d, stderr %q, want 1 with dns-leak failed:\n%s", code, errOut, out)
		}
	})

	t.Run("bad input", func(t *testing.T) {
		fakeHost(t, healthyEngine(), healthyFiles, logs)
		for _, args := range [][]string{{"doctor", "-p", "Not A Project"}, {"doctor", "extra"}, {"doctor", "--nope"}} {
			if code, _, errOut := run(t, args...); code != ExitUsage {
				t.Errorf("%q: exit %d (%s), want %d", args, code, errOut, ExitUsage)
			}
		}
	})
}

func dnsQuery(t *testing.T, name string) []byte {
	t.Helper()
	// A minimal RFC 1035 query: header (one question), the name's labels, type A, class IN.
	msg := []byte{0, 7, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0}
	for _, l := range strings.Split(name, ".") {
		msg = append(append(msg, byte(len(l))), l...)
	}
	return append(msg, 0, 0, 1, 0, 1)
}

// TestDoctorEngine: the engine line judges the engine by what the stack needs. Debian's 20.10,
// which predates the CVE-2024-29018 fix, is ok (the stack's DNS design closes it, e2e TestWall)
// and asks for no upgrade, with or without a loopback resolver on the host; a fixed engine is
// ok; an old engine whose live probe sees a leak is degraded and dns-leak fails.
func TestDoctorEngine(t *testing.T) {
	withVersion := func(v string) *enginetest.Engine {
		e := healthyEngine()
		e.Version = v
		return e
	}
	loopback := maps.Clone(healthyFiles)
	loopback[doctor.PathResolv] = "nameserver 127.0.0.1\n"
	for _, tc := range []struct {
		name    string
		docker  *enginetest.Engine
		files   map[string]string
		code    int
		want    string // the engine line, a regular expression
		notWant string
	}{
		{"debian 20.10", withVersion("20.10.24+dfsg1"), healthyFiles, ExitOK,
			`(?m)^engine +ok +Docker Engine 20\.10\.24\+dfsg1 predates the CVE-2024-29018 fix \(26\.0\.0, 25\.0\.5, 23\.0\.11\): ok for the stack, closed by its own DNS design: .*\(e2e TestWall, on Engine 20\.10 with the leak's condition in place\)$`, "upgrade"},
		{"debian 20.10, a loopback resolver", withVersion("20.10.24+dfsg1"), loopback, ExitOK,
			`(?m)^engine +ok +Docker Engine 20\.10\.24\+dfsg1 predates .* ok for the stack, .*Other containers on this engine's internal networks with default DNS do reach the host's loopback resolver \(127\.0\.0\.1\)$`, "upgrade"},
		{"engine 29, fixed", withVersion("29.1.2"), loopback, ExitOK, `(?m)^engine +ok +Docker Engine 29\.1\.2 \(has the CVE-2024-29018 fix\)$`, "upgrade"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fakeHost(t, tc.docker, tc.files, "")
			code, out, errOut := run(t, "doctor")
			if code != tc.code || !regexp.MustCompile(tc.want).MatchString(out) {
				t.Errorf("exit %d (want %d), output lacks %s:\n%s%s", code, tc.code, tc.want, out, errOut)
			}
			engineLine := regexp.MustCompile(`(?m)^engine .*$`).FindString(out)
			if strings.Contains(engineLine, tc.notWant) {
				t.Errorf("engine line has %q: %s", tc.notWant, engineLine)
			}
		})
	}
}
