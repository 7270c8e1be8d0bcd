package cli

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/api/types/volume"

	"github.com/sharness-ai/sharness/host/stack"
	"github.com/sharness-ai/sharness/testkit/enginetest"
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

// psExit is psLine of a container that exited with code.
func psExit(service string, code int) string {
	l := strings.Replace(psLine(service, "exited", ""), `"ExitCode":0`, fmt.Sprintf(`"ExitCode":%d`, code), 1)
	return strings.Replace(l, "Exited (1)", fmt.Sprintf("Exited (%d)", code), 1)
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

// fakeDocker stands in for the docker CLI and records every call. It is safe for the
// concurrent calls of up (compose up runs while compose ps is polled).
type fakeDocker struct {
	mu       sync.Mutex
	calls    []dockerCmd
	services string            // the services `compose config` lists, one a line
	images   map[string]string // image → `docker image inspect` JSON; default: every sharness/<service>:dev, and absent ones missing
	missing  []string          // images the engine does not have
	ps       []string          // lines of `compose ps`
	psSeq    [][]string        // if set: what successive `compose ps` calls print; the last one repeats
	runtime  map[string]string // container ID → runtime; default "sharness"
	volumes  []string
	upErr    error
	logs     map[string]string // service → what `compose logs` prints
	nPS      int

	// What `docker ps` and `docker network ls` find by the project's label, as down sees them.
	containers     []fakeContainer
	networks       []string
	downErr        error // compose down's failure
	downKeepsNets  bool  // compose down leaves the networks, as when a run container held them
	downRemovesAll bool  // compose down removes run containers too (it does not)
}

// fakeContainer is a container of the project as `docker ps` lists it.
type fakeContainer struct {
	id, name, state, service string
	oneOff                   bool
	stuck                    bool // `docker rm -f` does not remove it
}

func (f *fakeDocker) install(t *testing.T) {
	t.Helper()
	orig, origPoll, origSettle := runDocker, pollInterval, downSettle
	t.Cleanup(func() { runDocker, pollInterval, downSettle = orig, origPoll, origSettle })
	pollInterval, downSettle = 5*time.Millisecond, 10*time.Millisecond
	useAPI(t, &enginetest.Engine{Hook: f.api})
	runDocker = func(_ context.Context, d dockerCmd) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.calls = append(f.calls, d)
		out := d.stdout
		if out == nil {
			out = io.Discard
		}
		switch {
		case d.args[0] == "compose" && slices.Contains(d.args, "down"):
			f.containers = slices.DeleteFunc(f.containers, func(c fakeContainer) bool { return !c.stuck && (!c.oneOff || f.downRemovesAll) })
			if !f.downKeepsNets {
				f.networks = nil
			}
			if slices.Contains(d.args, "--volumes") {
				f.volumes = slices.DeleteFunc(f.volumes, func(v string) bool { return strings.HasPrefix(v, "sharness_audit-") })
			}
			return f.downErr
		case slices.Contains(d.args, "config"):
			services := map[string]any{}
			for _, s := range strings.Fields(f.services) {
				services[s] = map[string]string{"image": "sharness/" + s + ":dev"}
			}
			for _, a := range d.args {
				if strings.HasSuffix(a, "agent.yml") {
					data, _ := os.ReadFile(a)
					img := regexp.MustCompile(`image: "([^"]+)"`).FindStringSubmatch(string(data))
					services["agent"] = map[string]string{"image": img[1]}
				}
			}
			json.NewEncoder(out).Encode(map[string]any{"name": "sharness", "services": services})
		case slices.Contains(d.args, "ps"):
			ps := f.ps
			if len(f.psSeq) > 0 {
				ps = f.psSeq[min(f.nPS, len(f.psSeq)-1)]
				f.nPS++
			}
			fmt.Fprint(out, strings.Join(ps, "\n")+"\n")
		case slices.Contains(d.args, "logs"):
			fmt.Fprint(out, f.logs[d.args[len(d.args)-1]])
		case slices.Contains(d.args, "up"):
			fmt.Fprintln(d.stderr, " ✔ Container sharness-launcher-1  Healthy")
			return f.upErr
		}
		return nil
	}
}

// api answers the Engine API's requests from f's containers, networks, volumes, runtimes and
// images, and records them.
func (f *fakeDocker) api(w http.ResponseWriter, r *http.Request, path string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	q, _ := url.QueryUnescape(r.URL.Query().Encode())
	f.calls = append(f.calls, dockerCmd{api: strings.TrimSuffix(r.Method+" "+path+"?"+q, "?")})
	reply := func(status int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(v)
	}
	refuse := func(status int, format string, args ...any) {
		reply(status, map[string]string{"message": fmt.Sprintf(format, args...)})
	}
	var filters map[string]map[string]bool
	json.Unmarshal([]byte(r.URL.Query().Get("filters")), &filters)
	id, _ := strings.CutPrefix(path, "/containers/")
	switch name, _ := strings.CutPrefix(path, "/networks/"); {
	case r.Method == http.MethodGet && path == "/containers/json":
		items := []container.Summary{}
		for _, c := range f.containers {
			items = append(items, container.Summary{ID: c.id, Names: []string{"/" + c.name}, State: container.ContainerState(c.state),
				Labels: map[string]string{"com.docker.compose.service": c.service, "com.docker.compose.oneoff": map[bool]string{true: "True", false: "False"}[c.oneOff]}})
		}
		reply(200, items)
	case r.Method == http.MethodPost && strings.HasSuffix(path, "/stop"):
		for i, c := range f.containers {
			if c.id == strings.TrimSuffix(id, "/stop") {
				f.containers[i].state = "exited"
			}
		}
		w.WriteHeader(http.StatusNoContent)
	case r.Method == http.MethodDelete && strings.HasPrefix(path, "/containers/"):
		f.containers = slices.DeleteFunc(f.containers, func(c fakeContainer) bool { return !c.stuck && c.id == id })
		w.WriteHeader(http.StatusNoContent)
	case r.Method == http.MethodGet && strings.HasPrefix(path, "/containers/") && strings.HasSuffix(path, "/json"):
		rt, ok := f.runtime[strings.TrimSuffix(id, "/json")]
		if !ok {
			rt = "sharness"
		}
		reply(200, container.InspectResponse{ID: strings.TrimSuffix(id, "/json"), HostConfig: &container.HostConfig{Runtime: rt}})
	case r.Method == http.MethodGet && path == "/networks":
		items := []network.Summary{}
		for _, n := range f.networks {
			items = append(items, network.Summary{Network: network.Network{Name: n}})
		}
		reply(200, items)
	case r.Method == http.MethodDelete && strings.HasPrefix(path, "/networks/"):
		if slices.ContainsFunc(f.containers, func(c fakeContainer) bool { return c.stuck }) {
			refuse(http.StatusForbidden, "error while removing network: network %s has active endpoints", name)
			return true
		}
		f.networks = slices.DeleteFunc(f.networks, func(n string) bool { return n == name })
		w.WriteHeader(http.StatusNoContent)
	case r.Method == http.MethodGet && path == "/volumes":
		items := []volume.Volume{}
		for _, v := range f.volumes {
			for l := range filters["label"] {
				if project, ok := strings.CutPrefix(l, "com.docker.compose.project="); ok && strings.HasPrefix(v, project+"_") {
					items = append(items, volume.Volume{Name: v})
				}
			}
			for n := range filters["name"] {
				if strings.Contains(v, n) {
					items = append(items, volume.Volume{Name: v})
				}
			}
		}
		reply(200, volume.ListResponse{Volumes: items})
	case r.Method == http.MethodDelete && strings.HasPrefix(path, "/volumes/"):
		f.volumes = slices.DeleteFunc(f.volumes, func(v string) bool { return v == strings.TrimPrefix(path, "/volumes/") })
		w.WriteHeader(http.StatusNoContent)
	case r.Method == http.MethodGet && strings.HasPrefix(path, "/images/"):
		img := strings.TrimSuffix(strings.TrimPrefix(path, "/images/"), "/json")
		if j, ok := f.images[img]; ok {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintln(w, j)
			return true
		}
		if slices.Contains(f.missing, img) || !strings.HasPrefix(img, "sharness/") {
			refuse(http.StatusNotFound, "No such image: %s", img)
			return true
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"Id":"sha256:%x","Size":12345678,"Config":{"Entrypoint":["/sharness-x"],"Cmd":null}}`+"\n", sha256.Sum256([]byte(img)))
	default:
		refuse(http.StatusNotFound, "page not found")
	}
	return true
}

// apiVerbs names the Engine API's requests as the docker CLI's verbs that made the same ones.
var apiVerbs = []struct{ method, prefix, suffix, verb string }{
	{"GET", "/containers/json", "", "ps"},
	{"POST", "/containers/", "/stop", "stop"},
	{"DELETE", "/containers/", "", "rm"},
	{"GET", "/containers/", "/json", "inspect"},
	{"GET", "/networks", "", "network ls"},
	{"DELETE", "/networks/", "", "network rm"},
	{"GET", "/volumes", "", "volume ls"},
	{"DELETE", "/volumes/", "", "volume rm"},
	{"GET", "/images/", "/json", "image"},
}

// verbs is the docker calls as "compose up", "inspect", ... for a compact comparison: the
// Engine API's requests named as apiVerbs says.
func (f *fakeDocker) verbs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var v []string
	for _, c := range f.calls {
		if c.api != "" {
			method, rest, _ := strings.Cut(c.api, " ")
			path, _, _ := strings.Cut(rest, "?")
			i := slices.IndexFunc(apiVerbs, func(a struct{ method, prefix, suffix, verb string }) bool {
				return a.method == method && strings.HasPrefix(path, a.prefix) && strings.HasSuffix(path, a.suffix)
			})
			v = append(v, apiVerbs[i].verb)
		} else if c.args[0] == "compose" {
			v = append(v, "compose "+c.args[slices.IndexFunc(c.args[1:], func(s string) bool {
				return s == "config" || s == "up" || s == "ps" || s == "down" || s == "logs"
			})+1])
		} else if c.args[0] == "network" || c.args[0] == "volume" {
			v = append(v, c.args[0]+" "+c.args[1])
		} else {
			v = append(v, c.args[0])
		}
	}
	return v
}

// verbsBut is verbs without the given ones (compose ps, polled a varying number of times).
func (f *fakeDocker) verbsBut(skip string) []string {
	return slices.DeleteFunc(f.verbs(), func(v string) bool { return v == skip })
}

func (f *fakeDocker) call(verb string) *dockerCmd {
	for i, v := range f.verbs() {
		if v == verb {
			return &f.calls[i]
		}
	}
	return nil
}

// images is what up inspects: one image per service, the agent's included.
func images(n int) []string { return slices.Repeat([]string{"image"}, n) }

func TestUp(t *testing.T) {
	upTree(t)
	t.Setenv("SHARNESS_AI_POLICY_HASH", "")
	t.Setenv("COMPOSE_PROJECT_NAME", "")
	_, m, _ := run(t, "hash")
	m = strings.TrimSpace(m)
	other := "sha256:" + strings.Repeat("0", 64)
	// The docker calls but compose ps, which is polled: the config, each image, compose up, and
	// status's runtime inspections.
	started := slices.Concat([]string{"compose config"}, images(7), []string{"compose up"}, slices.Repeat([]string{"inspect"}, 6))
	tests := []struct {
		name      string
		args      []string
		env       string // SHARNESS_AI_POLICY_HASH
		stdin     string
		ps        []string
		missing   []string
		drift     bool
		code      int
		calls     []string
		upArgs    []string
		errSubstr []string
	}{
		{name: "hash supplied and equal", args: []string{"--policy-hash", m}, code: ExitOK, calls: started,
			upArgs: []string{"compose", "-p", "sharness", "-f", "docker-compose.yml", "up", "--detach", "--pull", "never", "bash", "fs", "kms", "launcher", "llm", "net"}},
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
		{name: "bad project", args: []string{"-p", "Bad Name", "--yes"}, code: ExitUsage},
		{name: "bad timeout", args: []string{"--timeout", "0s", "--yes"}, code: ExitUsage},
		{name: "extra compose file", args: []string{"--yes", "-f", "compose/world.yml"}, code: ExitOK,
			calls:  slices.Concat([]string{"compose config"}, images(9), []string{"compose up"}, slices.Repeat([]string{"inspect"}, 6)),
			upArgs: []string{"compose", "-p", "sharness", "-f", "docker-compose.yml", "-f", "compose/world.yml", "up", "--detach", "--pull", "never", "bash", "fs", "kms", "launcher", "llm", "model", "net", "world"}},
		{name: "missing images", args: []string{"--yes"}, missing: []string{"sharness/kms:dev", "sharness/agent:dev"}, code: ExitRefused,
			calls: slices.Concat([]string{"compose config"}, images(7)),
			errSubstr: []string{"up: image sharness/kms:dev (kms): MISSING", "up: image sharness/agent:dev (agent): MISSING", "up: image sharness/net:dev (net): present, sha256:",
				"2 images missing on this engine (sharness/agent:dev, sharness/kms:dev): nothing started; build them with hack/build-images.sh"}},
		{name: "unhealthy after up", args: []string{"--yes"}, ps: append(healthyPS("kms"), psLine("kms", "exited", "")), code: ExitRefused,
			calls:     slices.Concat([]string{"compose config"}, images(7), []string{"compose up", "compose logs"}, slices.Repeat([]string{"inspect"}, 6)),
			errSubstr: []string{"up: kms (sharness-kms-1): exited after", "up: last lines of kms:\n    kms: refusing to start\n", "sharness-ai: kms (exited)"}},
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
			f := &fakeDocker{services: "agent\nbash\nfs\nkms\nlauncher\nllm\nnet\n", ps: tc.ps, missing: tc.missing, logs: map[string]string{"kms": "kms: refusing to start\n"}}
			if slices.Contains(tc.args, "compose/world.yml") {
				f.services += "world\nmodel\n"
				f.ps = append(healthyPS(), psLine("model", "running", ""))
			}
			if f.ps == nil {
				f.ps = healthyPS()
			}
			f.install(t)
			code, out, errOut := run(t, append([]string{"up"}, tc.args...)...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.code, out, errOut)
			}
			if diff := cmp.Diff(tc.calls, f.verbsBut("compose ps")); diff != "" {
				t.Errorf("docker calls but compose ps (-want +got):\n%s", diff)
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
			if !strings.Contains(out, "SERVICE") || !strings.Contains(out, "launcher") {
				t.Errorf("no status table on stdout:\n%s", out)
			}
			if tc.code != ExitOK {
				return
			}
			for _, want := range []string{
				"up: image sharness/launcher:dev (launcher): present, sha256:",
				"up: image sharness/agent:dev (agent): present",
				"up: launcher (sharness-launcher-1): running, healthy after ",
				"up: net (sharness-net-1): running after ",
				"start the agent with:\n  SHARNESS_AI_POLICY_HASH=" + m + " docker compose -p sharness -f docker-compose.yml",
				// kms made a new identity: one line says how to seal the key to it, reading it into
				// the shell, never in argv.
				"\nup: kms has a new identity this session: seal the key to it before you start the agent: " +
					`sharness-ai kms bundle -p sharness --wait 30s --out /tmp/kms.json && read -rsp 'anthropic-api-key: ' KEY && echo && printf %s "$KEY" | sharness-ai secret seal --to /tmp/kms.json anthropic-api-key; unset KEY` + "\nup: sharness is up",
			} {
				if !strings.Contains(errOut, want) {
					t.Errorf("stderr lacks %q:\n%s", want, errOut)
				}
			}
			if strings.Contains(errOut, "Container sharness-launcher-1  Healthy") {
				t.Errorf("compose's own progress reached stderr although up succeeded:\n%s", errOut)
			}
		})
	}
}

// TestUpProgress: a line per container as its state or health changes, while compose runs and
// after; a timeout names what is not ready and shows its last log lines.
func TestUpProgress(t *testing.T) {
	upTree(t)
	t.Setenv("SHARNESS_AI_POLICY_HASH", "")
	starting := append(healthyPS("launcher"), psLine("launcher", "running", "starting"))
	t.Run("becomes healthy", func(t *testing.T) {
		f := &fakeDocker{services: "agent\nlauncher\nnet\n", psSeq: [][]string{nil, {psLine("launcher", "created", "")}, starting, starting, healthyPS()}}
		f.install(t)
		code, out, errOut := run(t, "up", "--yes")
		if code != ExitOK {
			t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
		}
		var lines []string
		for l := range strings.Lines(errOut) {
			if strings.HasPrefix(l, "up: launcher ") {
				lines = append(lines, l[:strings.Index(l, " after ")])
			}
		}
		want := []string{"up: launcher (sharness-launcher-1): created", "up: launcher (sharness-launcher-1): running, health starting", "up: launcher (sharness-launcher-1): running, healthy"}
		if diff := cmp.Diff(want, lines); diff != "" {
			t.Errorf("launcher's progress (-want +got):\n%s\n%s", diff, errOut)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		f := &fakeDocker{services: "agent\nlauncher\nnet\n", ps: starting, logs: map[string]string{"launcher": "l1\nl2\n"}}
		f.install(t)
		code, out, errOut := run(t, "up", "--yes", "--timeout", "50ms")
		for _, want := range []string{"up: last lines of launcher:\n    l1\n    l2\n", "sharness-ai: not running and healthy after 50ms: launcher (running, health starting)"} {
			if code != ExitRefused || !strings.Contains(errOut, want) {
				t.Errorf("exit %d, want %d with %q\n%s\n%s", code, ExitRefused, want, out, errOut)
			}
		}
		if c := f.call("compose logs"); c == nil || !slices.Equal(c.args[len(c.args)-5:], []string{"logs", "--no-log-prefix", "--tail", "20", "launcher"}) {
			t.Errorf("logs call %v", c)
		}
	})
}

// TestUpAgent: --agent runs a local image as the agent through a compose file of its own, with
// the image's entrypoint and command; a missing image, one whose entrypoint the agent's policy
// does not let run, or a malformed name is refused before anything starts.
func TestUpAgent(t *testing.T) {
	upTree(t)
	t.Setenv("SHARNESS_AI_POLICY_HASH", "")
	inspect := func(entrypoint, cmd string) string {
		return `{"Id":"sha256:` + strings.Repeat("e", 64) + `","Size":2000000,"Config":{"Entrypoint":` + entrypoint + `,"Cmd":` + cmd + `,"Volumes":null}}`
	}
	for _, tc := range []struct {
		name, image, inspect string
		code                 int
		want                 []string // in stderr
		file                 string   // the override's services section
	}{
		{"claude code", "me/claude:1", inspect(`["/usr/local/bin/sharness-claude"]`, `["--model","x"]`), ExitOK,
			[]string{"up: agent image me/claude:1 runs /usr/local/bin/sharness-claude --model x", "up: image me/claude:1 (agent): present, sha256:eeeeeeeeeeee, 2.0 MB", "-f AGENT run --rm agent"},
			`services:
  agent:
    image: "me/claude:1"
    entrypoint: ["/usr/local/bin/sharness-claude"]
    command: ["--model","x"]
`},
		{"command only", "me/agent@sha256:" + strings.Repeat("1", 64), inspect(`null`, `["/sharness-agent","-v"]`), ExitOK, nil,
			`    entrypoint: ["/sharness-agent"]
    command: ["-v"]
`},
		{"missing", "me/none:1", "", ExitRefused, []string{"up: agent image me/none:1: MISSING", "--agent me/none:1: no such image on this engine: nothing started; build it (docker build) or load it (docker load) first"}, ""},
		{"entrypoint not allowed to run", "me/sh:1", inspect(`["/bin/sh","-c"]`, `["run"]`), ExitRefused, []string{"its entrypoint /bin/sh is not in the agent policy's process.exec", "Landlock would refuse to run it"}, ""},
		{"nothing to run", "me/empty:1", inspect(`null`, `null`), ExitRefused, []string{"names no entrypoint nor command"}, ""},
		{"an option, not an image", "--privileged", "", ExitUsage, []string{"not an image reference"}, ""},
		{"declares a volume", "me/vol:1", strings.Replace(inspect(`["/sharness-agent"]`, `null`), `"Volumes":null`, `"Volumes":{"/data":{}}`, 1), ExitOK,
			[]string{"declares volumes [/data]", "the runtime shim refuses"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeDocker{services: "agent\nlauncher\nnet\n", ps: healthyPS(), images: map[string]string{}}
			if tc.inspect != "" {
				f.images[tc.image] = tc.inspect
			}
			f.install(t)
			code, out, errOut := run(t, "up", "--yes", "--agent="+tc.image)
			i := strings.Index(errOut, "/agent.yml")
			file := ""
			if i > 0 {
				start := strings.LastIndex(errOut[:i], " ") + 1
				file = errOut[start : i+len("/agent.yml")]
				t.Cleanup(func() { os.RemoveAll(filepath.Dir(file)) })
				errOut = strings.ReplaceAll(errOut, file, "AGENT")
			}
			if code != tc.code {
				t.Fatalf("exit %d, want %d\n%s\n%s", code, tc.code, out, errOut)
			}
			for _, w := range tc.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr lacks %q:\n%s", w, errOut)
				}
			}
			if tc.code != ExitOK {
				if f.call("compose up") != nil || f.call("compose config") != nil {
					t.Errorf("a refused --agent went on: %v", f.verbs())
				}
				return
			}
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatalf("the agent's compose file: %v\n%s", err, errOut)
			}
			if !strings.Contains(string(data), tc.file) {
				t.Errorf("agent.yml:\n%s\nwant it to contain:\n%s", data, tc.file)
			}
			up := f.call("compose up")
			if up == nil || up.args[6] != file || slices.Contains(up.args, "agent") {
				t.Errorf("compose up %v: want the agent's file, and the agent not started", up)
			}
		})
	}
}

func TestUpFailureShowsStatus(t *testing.T) {
	upTree(t)
	t.Setenv("SHARNESS_AI_POLICY_HASH", "")
	f := &fakeDocker{services: "agent\nlauncher\n", ps: healthyPS(), upErr: errors.New("exit status 1")}
	f.install(t)
	code, out, errOut := run(t, "up", "--yes")
	for _, want := range []string{"up: docker compose up failed:\n     ✔ Container sharness-launcher-1  Healthy\n", "sharness-ai: docker compose -p sharness -f docker-compose.yml up --detach --pull never launcher: exit status 1"} {
		if code != ExitRefused || !strings.Contains(errOut, want) || !strings.Contains(out, "SERVICE") {
			t.Errorf("exit %d, want %d with %q, with the table\nstdout:\n%s\nstderr:\n%s", code, ExitRefused, want, out, errOut)
		}
	}
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
		out     []string // substrings of the table
	}{
		{name: "all healthy", ps: healthyPS(), code: ExitOK},
		{name: "agent running too", ps: append(healthyPS(), psLine("agent", "running", "")), code: ExitOK},
		{name: "agent exited 0 is fine", ps: append(healthyPS(), psLine("agent", "exited", "")), code: ExitOK, out: []string{"agent     exited (0)"}},
		{name: "agent exited 1 failed", ps: append(healthyPS(), psExit("agent", 1)), code: ExitRefused,
			bad: []string{"sharness-ai: failed: agent (exited with code 1)"}, out: []string{"exited (1)", "FAIL: exited with code 1"}},
		{name: "a run agent exited 3 failed", ps: append(healthyPS(), strings.ReplaceAll(psExit("agent", 3), "sharness-agent-1", "sharness-agent-run-1a2b3c")), code: ExitRefused,
			bad: []string{"agent (exited with code 3)"}},
		{name: "any service exited non-zero failed", ps: append(healthyPS("world"), psExit("world", 2)), code: ExitRefused, bad: []string{"world (exited with code 2)"}},
		{name: "a component killed", ps: append(healthyPS("kms"), psExit("kms", 137)), code: ExitRefused, bad: []string{"kms (exited with code 137)"}},
		{name: "a component exited 0 is still down", ps: append(healthyPS("kms"), psLine("kms", "exited", "")), code: ExitRefused, bad: []string{"kms (state exited)"}},
		{name: "agent under runc and exited 1", ps: append(healthyPS(), psExit("agent", 1)), runtime: map[string]string{"id-agent": "runc"}, code: ExitRefused,
			bad: []string{`agent (exited with code 1; runtime "runc", not sharness)`}},
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
			for _, s := range tc.out {
				if !strings.Contains(out, s) {
					t.Errorf("stdout lacks %q:\n%s", s, out)
				}
			}
			if c := f.call("compose ps"); c == nil || !slices.Equal(c.args, []string{"compose", "-p", "sharness", "ps", "--all", "--format", "json"}) {
				t.Errorf("compose ps call: %v", c)
			}
			if c := f.call("inspect"); c == nil || !strings.HasPrefix(c.api, "GET /containers/id-") {
				t.Errorf("no runtime inspection: %v", f.verbs())
			}
		})
	}
}

func TestStatusJSON(t *testing.T) {
	copyTree(t, "policies")
	f := &fakeDocker{ps: append(healthyPS("fs"), psLine("fs", "running", "unhealthy"), psExit("agent", 1))}
	f.install(t)
	code, out, _ := run(t, "status", "-p", "demo", "--json")
	if code != ExitRefused {
		t.Fatalf("exit %d, want %d", code, ExitRefused)
	}
	var rows []stack.Row
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("--json output: %v\n%s", err, out)
	}
	byService := map[string]stack.Row{}
	for _, r := range rows {
		byService[r.Service] = r
	}
	want := map[string]stack.Row{
		"fs":    {Service: "fs", Container: "sharness-fs-1", State: "running", Health: "unhealthy", Runtime: "sharness", Component: true, Problem: "health unhealthy"},
		"kms":   {Service: "kms", Container: "sharness-kms-1", State: "running", Runtime: "sharness", Component: true},
		"agent": {Service: "agent", Container: "sharness-agent-1", State: "exited", ExitCode: ptr(1), Runtime: "sharness", Component: true, Problem: "exited with code 1"},
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

// TestDown: down removes every container and network of the project, the ones `docker compose
// run` started (which compose's down leaves, with the networks they hold) too, stopping the run
// agent before compose stops the components, and lists the volumes it kept; it refuses, naming
// it, when something of the project is still there.
func TestDown(t *testing.T) {
	t.Setenv("COMPOSE_PROJECT_NAME", "")
	vols := []string{"sharness_audit-kms", "sharness_audit-net", "sharness_gate-fs", "old-sharness_audit-kms"}
	edges := []string{"sharness_edge-agent-bash", "sharness_edge-agent-fs", "sharness_edge-agent-llm", "sharness_edge-agent-net"}
	stack := []fakeContainer{{id: "c-kms", name: "sharness-kms-1", state: "running", service: "kms"}, {id: "c-net", name: "sharness-net-1", state: "running", service: "net"}}
	runAgent := fakeContainer{id: "c-run", name: "sharness-agent-run-1a2b3c", state: "running", service: "agent", oneOff: true}
	label := `"label":{"com.docker.compose.project=sharness":true}`
	tests := []struct {
		name       string
		args       []string
		f          *fakeDocker
		code       int
		calls      []string
		down       []string // compose down's arguments
		stop       string   // the first stop request
		out, warn  []string
		unexpected []string // in stdout
	}{
		{name: "keeps volumes", f: &fakeDocker{containers: stack, networks: edges}, code: ExitOK,
			calls: []string{"ps", "compose down", "ps", "network ls", "volume ls", "volume ls", "volume ls"},
			down:  []string{"compose", "-p", "sharness", "down", "--remove-orphans"},
			out: []string{"down: sharness is down: no container nor network of it is left\n",
				"down: kept 3 volumes on purpose: the audit record (sharness_audit-*) and the gate's state (sharness_gate-*) outlive the stack",
				"  sharness_audit-kms\n", "  sharness_audit-net\n", "  sharness_gate-fs\n"},
			unexpected: []string{"old-sharness", "removed by their labels"}},
		{name: "a compose run agent and its four networks", f: &fakeDocker{containers: append(slices.Clone(stack), runAgent), networks: edges, downKeepsNets: true}, code: ExitOK,
			calls: slices.Concat([]string{"ps", "stop", "rm", "compose down", "ps", "network ls"}, slices.Repeat([]string{"network rm"}, 4), []string{"ps", "network ls", "volume ls", "volume ls", "volume ls"}),
			stop:  "POST /containers/c-run/stop?t=10",
			out: []string{"down: sharness is down: no container nor network of it is left (removed by their labels, as docker compose down leaves them: sharness-agent-run-1a2b3c, sharness_edge-agent-bash, sharness_edge-agent-fs, sharness_edge-agent-llm, sharness_edge-agent-net)\n",
				"  sharness_audit-kms\n"},
			warn: []string{"down: stopping and removing container sharness-agent-run-1a2b3c (service agent, running, started by docker compose run)\n",
				"down: removing network sharness_edge-agent-bash, which docker compose down left\n"}},
		{name: "an exited run agent", f: &fakeDocker{containers: []fakeContainer{{id: "c-run", name: "sharness-agent-run-9f", state: "exited", service: "agent", oneOff: true}}}, code: ExitOK,
			stop: "POST /containers/c-run/stop?t=10", out: []string{"as docker compose down leaves them: sharness-agent-run-9f)"}},
		{name: "compose down fails: the labels do the work", f: &fakeDocker{containers: stack, networks: edges, downErr: errors.New("exit status 1"), downKeepsNets: true}, code: ExitOK,
			warn: []string{"down: docker compose -p sharness down --remove-orphans: exit status 1: removing what is left of sharness by its labels\n"},
			out:  []string{"sharness is down"}},
		{name: "something stays", f: &fakeDocker{containers: []fakeContainer{{id: "c-run", name: "sharness-agent-run-1a", state: "running", service: "agent", oneOff: true, stuck: true}}, networks: edges[:1], downKeepsNets: true},
			code: ExitRefused, warn: []string{"sharness-ai: down: sharness is not gone: container sharness-agent-run-1a, network sharness_edge-agent-bash still there after 10ms",
				"network sharness_edge-agent-bash has active endpoints"}},
		{name: "other project", args: []string{"-p", "demo"}, f: &fakeDocker{}, code: ExitOK, down: []string{"compose", "-p", "demo", "down", "--remove-orphans"}},
		{name: "--volumes is explicit", args: []string{"--volumes"}, f: &fakeDocker{networks: edges}, code: ExitOK,
			down: []string{"compose", "-p", "sharness", "down", "--remove-orphans", "--volumes"},
			out:  []string{"its volumes, the audit record with them, are deleted"}, warn: []string{"WARNING", "audit record"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.f
			f.volumes, f.containers, f.networks = slices.Clone(vols), slices.Clone(f.containers), slices.Clone(f.networks)
			f.install(t)
			code, out, errOut := run(t, append([]string{"down"}, tc.args...)...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\n%s%s", code, tc.code, out, errOut)
			}
			if tc.calls != nil {
				if diff := cmp.Diff(tc.calls, f.verbs()); diff != "" {
					t.Errorf("docker calls (-want +got):\n%s", diff)
				}
			}
			if c := f.call("ps"); c == nil || !strings.Contains(c.api, label) && !slices.Contains(tc.args, "demo") {
				t.Errorf("container list %v: want the project's label", c)
			}
			if tc.down != nil {
				if c := f.call("compose down"); c == nil || !cmp.Equal(tc.down, c.args) {
					t.Errorf("compose down %v, want %v", c, tc.down)
				}
			}
			if tc.stop != "" {
				if c := f.call("stop"); c == nil || c.api != tc.stop {
					t.Errorf("stop %v, want %s", c, tc.stop)
				}
			}
			for _, c := range f.calls {
				if strings.HasPrefix(c.api, "DELETE /volumes/") && !slices.Contains(tc.args, "--volumes") {
					t.Errorf("%s removes volumes", c.api)
				}
			}
			if slices.Contains(tc.args, "--volumes") && len(f.volumes) != 1 { // old-sharness_audit-kms is another project's
				t.Errorf("volumes left after down --volumes: %q", f.volumes)
			}
			for _, s := range tc.out {
				if !strings.Contains(out, s) {
					t.Errorf("stdout lacks %q:\n%s", s, out)
				}
			}
			for _, s := range tc.unexpected {
				if strings.Contains(out, s) {
					t.Errorf("stdout has %q:\n%s", s, out)
				}
			}
			for _, s := range tc.warn {
				if !strings.Contains(errOut, s) {
					t.Errorf("stderr lacks %q:\n%s", s, errOut)
				}
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// upTree is the repository's stack in a fresh working folder, as up needs it: the policies, the
// compose file and compiled specs, a workspace, and a policies root of its own, so that the
// session record up writes lands in the test's folder.
func upTree(t *testing.T) string {
	t.Helper()
	dir := copyTree(t, "policies", "docker-compose.yml", "compiled")
	if err := os.Mkdir(filepath.Join(dir, "workspace"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SHARNESS_RUNTIME_POLICIES", filepath.Join(dir, "etc", "policies"))
	t.Setenv("SHARNESS_AI_WORKSPACE", "")
	return dir
}
