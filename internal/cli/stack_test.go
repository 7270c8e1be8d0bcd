package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// psLine is one line of `docker compose ps --all --format json` as compose v2.40 prints it.
func psLine(service, state, health string) string {
	status := map[string]string{"running": "Up 2 minutes", "exited": "Exited (1) 1 minute ago", "created": "Created"}[state]
	if health != "" {
		status += " (" + health + ")"
	}
	return fmt.Sprintf(`{"Command":"\"/sharness-%[1]s\"","CreatedAt":"2026-03-02 10:14:07 +0000 UTC","ExitCode":0,"Health":%[3]q,"ID":"id-%[1]s","Image":"sharness/%[1]s:dev","Labels":"com.docker.compose.project=sharness,com.docker.compose.service=%[1]s","LocalVolumes":"1","Mounts":"sharness_audit-%[1]s","Name":"sharness-%[1]s-1","Names":"sharness-%[1]s-1","Networks":"sharness_edge-agent-%[1]s","Ports":"","Project":"sharness","Publishers":null,"RunningFor":"2 minutes ago","Service":%[1]q,"Size":"0B","State":%[2]q,"Status":%[4]q}`,
		service, state, health, status)
}

// healthyPS is the stack after up: every component but the agent, and the offline world.
func healthyPS(except ...string) []string {
	var lines []string
	for _, s := range []string{"bash", "fs", "kms", "launcher", "llm", "net"} {
		if !slices.Contains(except, s) {
			health := ""
			if s == "bash" || s == "fs" || s == "launcher" {
				health = "healthy"
			}
			lines = append(lines, psLine(s, "running", health))
		}
	}
	return append(lines, psLine("world", "running", ""))
}

// fakeDocker stands in for the docker CLI and records every call.
type fakeDocker struct {
	calls    []dockerCmd
	services string            // what `compose config --services` prints
	ps       []string          // lines of `compose ps`
	runtime  map[string]string // container ID → runtime; default "sharness"
	volumes  []string
	upErr    error
}

func (f *fakeDocker) install(t *testing.T) {
	t.Helper()
	orig := runDocker
	t.Cleanup(func() { runDocker = orig })
	runDocker = func(_ context.Context, d dockerCmd) error {
		f.calls = append(f.calls, d)
		out := d.stdout
		if out == nil {
			out = io.Discard
		}
		switch {
		case d.args[0] == "inspect":
			rt, ok := f.runtime[d.args[len(d.args)-1]]
			if !ok {
				rt = "sharness"
			}
			fmt.Fprintln(out, rt)
		case d.args[0] == "volume":
			filter := strings.TrimPrefix(d.args[3], "name=")
			for _, v := range f.volumes {
				if strings.Contains(v, filter) {
					fmt.Fprintln(out, v)
				}
			}
		case slices.Contains(d.args, "config"):
			fmt.Fprint(out, f.services)
		case slices.Contains(d.args, "ps"):
			fmt.Fprint(out, strings.Join(f.ps, "\n")+"\n")
		case slices.Contains(d.args, "up"):
			fmt.Fprintln(d.stderr, " ✔ Container sharness-launcher-1  Healthy")
			return f.upErr
		}
		return nil
	}
}

// verbs is the docker calls as "compose up", "inspect", ... for a compact comparison.
func (f *fakeDocker) verbs() []string {
	var v []string
	for _, c := range f.calls {
		if c.args[0] == "compose" {
			v = append(v, "compose "+c.args[slices.IndexFunc(c.args[1:], func(s string) bool { return s == "config" || s == "up" || s == "ps" || s == "down" })+1])
		} else {
			v = append(v, c.args[0])
		}
	}
	return v
}

func (f *fakeDocker) call(verb string) *dockerCmd {
	for i, v := range f.verbs() {
		if v == verb {
			return &f.calls[i]
		}
	}
	return nil
}

func TestUp(t *testing.T) {
	copyTree(t, "policies", "docker-compose.yml", "compiled")
	t.Setenv("SHARNESS_AI_POLICY_HASH", "")
	t.Setenv("COMPOSE_PROJECT_NAME", "")
	_, m, _ := run(t, "hash")
	m = strings.TrimSpace(m)
	other := "sha256:" + strings.Repeat("0", 64)
	started := []string{"compose config", "compose up", "compose ps", "inspect", "inspect", "inspect", "inspect", "inspect", "inspect"}
	tests := []struct {
		name      string
		args      []string
		env       string // SHARNESS_AI_POLICY_HASH
		stdin     string
		ps        []string
		drift     bool
		code      int
		calls     []string
		upArgs    []string
		errSubstr []string
	}{
		{name: "hash supplied and equal", args: []string{"--policy-hash", m}, code: ExitOK, calls: started,
			upArgs: []string{"compose", "-p", "sharness", "-f", "docker-compose.yml", "up", "--detach", "--wait", "--pull", "never", "bash", "fs", "kms", "launcher", "llm", "net"}},
		{name: "hash from the environment", env: m, code: ExitOK, calls: started},
		{name: "hash supplied and different", args: []string{"--policy-hash", other}, code: ExitRefused,
			errSubstr: []string{"the manifest is " + m, "the supplied hash is " + other, "nothing started"}},
		{name: "environment hash different", env: other, code: ExitRefused, errSubstr: []string{other}},
		{name: "malformed hash", args: []string{"--policy-hash", "sha256:abc"}, code: ExitUsage},
		{name: "confirmed by a person", stdin: m[7:19] + "\n", code: ExitOK, calls: started,
			errSubstr: []string{"up: policy " + m, "first 12 hex digits"}},
		{name: "wrong confirmation", stdin: "0123456789ab\n", code: ExitRefused, errSubstr: []string{"not the start of policy", "nothing started"}},
		{name: "whole hash is not the confirmation", stdin: m + "\n", code: ExitRefused},
		{name: "no confirmation", stdin: "", code: ExitRefused, errSubstr: []string{"no confirmation"}},
		{name: "--yes warns", args: []string{"--yes"}, code: ExitOK, calls: started, errSubstr: []string{"NOT confirmed by a person"}},
		{name: "drift", args: []string{"--policy-hash", m}, drift: true, code: ExitRefused,
			errSubstr: []string{"drift: compiled/agent/seccomp.json: differs", "nothing started"}},
		{name: "--agent is not built", args: []string{"--agent", "me/agent:1", "--yes"}, code: ExitUsage, errSubstr: []string{"not built yet"}},
		{name: "bad project", args: []string{"-p", "Bad Name", "--yes"}, code: ExitUsage},
		{name: "extra compose file", args: []string{"--yes", "-f", "compose/world.yml"}, code: ExitOK, calls: started,
			upArgs: []string{"compose", "-p", "sharness", "-f", "docker-compose.yml", "-f", "compose/world.yml", "up", "--detach", "--wait", "--pull", "never", "bash", "fs", "kms", "launcher", "llm", "net", "world", "model"}},
		{name: "unhealthy after up", args: []string{"--yes"}, ps: append(healthyPS("kms"), psLine("kms", "exited", "")), code: ExitRefused,
			calls: started, errSubstr: []string{"kms (state exited)"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("SHARNESS_AI_POLICY_HASH", tc.env)
			if tc.drift {
				orig, _ := os.ReadFile("compiled/agent/seccomp.json")
				os.WriteFile("compiled/agent/seccomp.json", []byte("{}\n"), 0o644)
				t.Cleanup(func() { os.WriteFile("compiled/agent/seccomp.json", orig, 0o644) })
			}
			origIn := confirmInput
			t.Cleanup(func() { confirmInput = origIn })
			confirmInput = strings.NewReader(tc.stdin)
			f := &fakeDocker{services: "agent\nbash\nfs\nkms\nlauncher\nllm\nnet\n", ps: tc.ps}
			if slices.Contains(tc.args, "compose/world.yml") {
				f.services += "world\nmodel\n"
			}
			if f.ps == nil {
				f.ps = healthyPS()
			}
			f.install(t)
			code, out, errOut := run(t, append([]string{"up"}, tc.args...)...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.code, out, errOut)
			}
			if diff := cmp.Diff(tc.calls, f.verbs()); diff != "" {
				t.Errorf("docker calls (-want +got):\n%s", diff)
			}
			for _, s := range tc.errSubstr {
				if !strings.Contains(errOut, s) {
					t.Errorf("stderr lacks %q:\n%s", s, errOut)
				}
			}
			up := f.call("compose up")
			if up == nil {
				return
			}
			if tc.upArgs != nil {
				if diff := cmp.Diff(tc.upArgs, up.args); diff != "" {
					t.Errorf("up args (-want +got):\n%s", diff)
				}
			}
			if !slices.Contains(up.env, "SHARNESS_AI_POLICY_HASH="+m) || slices.Contains(up.env, "SHARNESS_AI_POLICY_HASH=") {
				t.Errorf("compose up's environment lacks SHARNESS_AI_POLICY_HASH=%s alone", m)
			}
			if !slices.ContainsFunc(up.env, func(kv string) bool { return strings.HasPrefix(kv, "PATH=") }) {
				t.Error("compose up did not get the process environment")
			}
			if !strings.Contains(errOut, "Container sharness-launcher-1  Healthy") {
				t.Errorf("compose's progress did not reach stderr:\n%s", errOut)
			}
			if !strings.Contains(out, "SERVICE") || !strings.Contains(out, "launcher") {
				t.Errorf("no status table on stdout:\n%s", out)
			}
		})
	}
}

func TestUpFailureShowsStatus(t *testing.T) {
	copyTree(t, "policies", "docker-compose.yml", "compiled")
	t.Setenv("SHARNESS_AI_POLICY_HASH", "")
	f := &fakeDocker{services: "agent\nlauncher\n", ps: healthyPS(), upErr: errors.New("exit status 1")}
	f.install(t)
	code, out, errOut := run(t, "up", "--yes")
	if code != ExitRefused || !strings.Contains(errOut, "compose -p sharness -f docker-compose.yml up") || !strings.Contains(out, "SERVICE") {
		t.Errorf("exit %d, want %d naming the compose call, with the table\nstdout:\n%s\nstderr:\n%s", code, ExitRefused, out, errOut)
	}
}

func TestParsePS(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []psRow
		wantErr bool
	}{
		{name: "lines (compose 2.21 on)", in: psLine("kms", "running", "") + "\n" + psLine("fs", "running", "unhealthy") + "\n",
			want: []psRow{{ID: "id-kms", Name: "sharness-kms-1", Service: "kms", State: "running"}, {ID: "id-fs", Name: "sharness-fs-1", Service: "fs", State: "running", Health: "unhealthy"}}},
		{name: "array (older compose)", in: "[" + psLine("net", "exited", "") + "]\n",
			want: []psRow{{ID: "id-net", Name: "sharness-net-1", Service: "net", State: "exited"}}},
		{name: "no containers", in: "", want: nil},
		{name: "garbage", in: "{\"Service\":", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parsePS([]byte(tc.in))
			if (err != nil) != tc.wantErr {
				t.Fatalf("err %v, want error %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); !tc.wantErr && diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func FuzzParsePS(f *testing.F) {
	f.Add([]byte(psLine("kms", "running", "healthy") + "\n"))
	f.Add([]byte("[" + psLine("net", "exited", "") + "]"))
	f.Fuzz(func(t *testing.T, data []byte) { parsePS(data) })
}

func TestStatus(t *testing.T) {
	copyTree(t, "policies")
	t.Setenv("COMPOSE_PROJECT_NAME", "")
	tests := []struct {
		name    string
		ps      []string
		runtime map[string]string
		code    int
		bad     []string // substrings of the refusal
	}{
		{name: "all healthy", ps: healthyPS(), code: ExitOK},
		{name: "agent running too", ps: append(healthyPS(), psLine("agent", "running", "")), code: ExitOK},
		{name: "agent exited is fine", ps: append(healthyPS(), psLine("agent", "exited", "")), code: ExitOK},
		{name: "unhealthy", ps: append(healthyPS("fs"), psLine("fs", "running", "unhealthy")), code: ExitRefused, bad: []string{"fs (health unhealthy)"}},
		{name: "starting", ps: append(healthyPS("bash"), psLine("bash", "running", "starting")), code: ExitRefused, bad: []string{"bash (health starting)"}},
		{name: "missing", ps: healthyPS("kms", "llm"), code: ExitRefused, bad: []string{"kms (not created)", "llm (not created)"}},
		{name: "wrong runtime", ps: healthyPS(), runtime: map[string]string{"id-net": "runc"}, code: ExitRefused, bad: []string{`net (runtime "runc", not sharness)`}},
		{name: "agent under runc", ps: append(healthyPS(), psLine("agent", "exited", "")), runtime: map[string]string{"id-agent": "runc"}, code: ExitRefused, bad: []string{"agent (runtime"}},
		{name: "world is not judged", ps: healthyPS(), runtime: map[string]string{"id-world": "runc"}, code: ExitOK},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeDocker{ps: tc.ps, runtime: tc.runtime}
			f.install(t)
			code, out, errOut := run(t, "status")
			if code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.code, out, errOut)
			}
			for _, s := range tc.bad {
				if !strings.Contains(errOut, s) {
					t.Errorf("stderr lacks %q:\n%s", s, errOut)
				}
			}
			if c := f.call("compose ps"); c == nil || !slices.Equal(c.args, []string{"compose", "-p", "sharness", "ps", "--all", "--format", "json"}) {
				t.Errorf("compose ps call: %v", c)
			}
			if f.call("inspect") == nil || f.calls[1].args[2] != "{{.HostConfig.Runtime}}" {
				t.Errorf("no runtime inspection: %v", f.verbs())
			}
		})
	}
}

func TestStatusJSON(t *testing.T) {
	copyTree(t, "policies")
	f := &fakeDocker{ps: append(healthyPS("fs"), psLine("fs", "running", "unhealthy"))}
	f.install(t)
	code, out, _ := run(t, "status", "-p", "demo", "--json")
	if code != ExitRefused {
		t.Fatalf("exit %d, want %d", code, ExitRefused)
	}
	var rows []stackRow
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("--json output: %v\n%s", err, out)
	}
	byService := map[string]stackRow{}
	for _, r := range rows {
		byService[r.Service] = r
	}
	want := map[string]stackRow{
		"fs":    {Service: "fs", Container: "sharness-fs-1", State: "running", Health: "unhealthy", Runtime: "sharness", Component: true, Problem: "health unhealthy"},
		"kms":   {Service: "kms", Container: "sharness-kms-1", State: "running", Runtime: "sharness", Component: true},
		"agent": {Service: "agent", State: "absent", Component: true},
		"world": {Service: "world", Container: "sharness-world-1", State: "running"},
	}
	for s, w := range want {
		if diff := cmp.Diff(w, byService[s]); diff != "" {
			t.Errorf("%s (-want +got):\n%s", s, diff)
		}
	}
	if got := f.calls[0].args[2]; got != "demo" {
		t.Errorf("project %q, want demo", got)
	}
}

func TestDown(t *testing.T) {
	t.Setenv("COMPOSE_PROJECT_NAME", "")
	vols := []string{"sharness_audit-kms", "sharness_audit-net", "sharness_gate-fs", "sharness_identity-kms", "old-sharness_audit-kms"}
	tests := []struct {
		name      string
		args      []string
		down      []string
		out, warn []string
	}{
		{name: "keeps volumes", down: []string{"compose", "-p", "sharness", "down"},
			out: []string{"kept its audit and gate volumes", "  sharness_audit-kms\n", "  sharness_audit-net\n", "  sharness_gate-fs\n"}},
		{name: "other project", args: []string{"-p", "demo"}, down: []string{"compose", "-p", "demo", "down"}},
		{name: "--volumes is explicit", args: []string{"--volumes"}, down: []string{"compose", "-p", "sharness", "down", "--volumes"},
			out: []string{"deleted"}, warn: []string{"WARNING", "audit record"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeDocker{volumes: vols}
			f.install(t)
			code, out, errOut := run(t, append([]string{"down"}, tc.args...)...)
			if code != ExitOK {
				t.Fatalf("exit %d\n%s%s", code, out, errOut)
			}
			if diff := cmp.Diff(tc.down, f.calls[0].args); diff != "" {
				t.Errorf("down args (-want +got):\n%s", diff)
			}
			for _, c := range f.calls {
				if slices.Contains(c.args, "-v") || (slices.Contains(c.args, "--volumes") && !slices.Contains(tc.args, "--volumes")) {
					t.Errorf("docker %v removes volumes", c.args)
				}
			}
			for _, s := range tc.out {
				if !strings.Contains(out, s) {
					t.Errorf("stdout lacks %q:\n%s", s, out)
				}
			}
			if strings.Contains(out, "old-sharness") || strings.Contains(out, "identity") {
				t.Errorf("stdout lists a volume that is not the project's audit or gate:\n%s", out)
			}
			for _, s := range tc.warn {
				if !strings.Contains(errOut, s) {
					t.Errorf("stderr lacks %q:\n%s", s, errOut)
				}
			}
		})
	}
}
