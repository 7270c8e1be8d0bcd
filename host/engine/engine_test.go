package engine_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/google/go-cmp/cmp"
	"github.com/moby/moby/client"

	"github.com/sharness-ai/sharness/host/engine"
	"github.com/sharness-ai/sharness/testkit/enginetest"
)

// failing is a docker CLI whose every command prints stdout and stderr and fails with exit
// status 1.
func failing(stdout, stderr string) engine.Runner {
	return func(_ context.Context, c engine.Command) error {
		fmt.Fprint(c.Stdout, stdout)
		fmt.Fprint(c.Stderr, stderr)
		return errors.New("exit status 1")
	}
}

// TestError: a failed command's error names it and quotes what docker printed on stderr (its
// first line under Brief), unless that went to the caller; a failed API call's names the call
// and says why: what the engine answered, that it cannot be reached, or that it did not answer
// in time.
func TestError(t *testing.T) {
	p := engine.Project{Name: "demo", Files: []string{"a.yml"}}
	ctx := context.Background()
	slow := &enginetest.Engine{Hook: func(w http.ResponseWriter, r *http.Request, path string) bool {
		<-r.Context().Done() // an engine that hangs
		return true
	}}
	twoLines := &enginetest.Engine{Hook: func(w http.ResponseWriter, r *http.Request, path string) bool {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprint(w, `{"message":"first line\nsecond line"}`)
		return true
	}}
	empty := &enginetest.Engine{}
	for _, tc := range []struct {
		name   string
		call   func(d *engine.Docker) error
		d      *engine.Docker
		want   string // the message, or with a trailing * its beginning
		isErr  bool   // an *Error
		isWhat func(error) bool
	}{
		{"captured", func(d *engine.Docker) error { _, err := d.ComposeLogs(ctx, p, "kms", 0); return err }, engine.With(failing("", "Error: no such service: kms\nmore\n")),
			"docker compose -p demo -f a.yml logs --no-log-prefix kms: exit status 1: Error: no such service: kms\nmore", true, nil},
		{"brief", func(d *engine.Docker) error { _, err := d.ComposeLogs(ctx, p, "kms", 0); return err }, engine.With(failing("", "Error: no such service: kms\nmore\n")).Brief(time.Second),
			"docker compose -p demo -f a.yml logs --no-log-prefix kms: exit status 1: Error: no such service: kms", true, nil},
		{"nothing on stderr", func(d *engine.Docker) error { _, err := d.ComposeLogs(ctx, p, "kms", 0); return err }, engine.With(failing("", "")),
			"docker compose -p demo -f a.yml logs --no-log-prefix kms: exit status 1: ", true, nil},
		{"streamed", func(d *engine.Docker) error { return d.ComposeDown(ctx, p, true, io.Discard) }, engine.With(failing("", "Removing")),
			"docker compose -p demo -f a.yml down --remove-orphans --volumes: exit status 1", true, nil},
		{"api: no such container", func(d *engine.Docker) error { _, err := d.ContainerRuntime(ctx, "0123abcd"); return err }, empty.Start(t, nil),
			"docker API inspect container 0123abcd: Error response from daemon: No such container: 0123abcd", true, cerrdefs.IsNotFound},
		{"api: no image", func(d *engine.Docker) error { _, err := d.Image(ctx, "me/x:1"); return err }, empty.Start(t, nil),
			"me/x:1: no such image on this engine", false, func(err error) bool { return errors.Is(err, engine.ErrNoImage) }},
		{"api: no engine", func(d *engine.Docker) error { _, err := d.ServerVersion(ctx); return err }, enginetest.NoEngine(t, nil),
			"docker API version: failed to connect to the docker API at unix://*", true, client.IsErrConnectionFailed},
		{"api: timeout", func(d *engine.Docker) error { _, err := d.Info(ctx); return err }, slow.Start(t, nil).Brief(50 * time.Millisecond),
			"docker API info: the engine did not answer within 50ms: context deadline exceeded", true, func(err error) bool { return errors.Is(err, context.DeadlineExceeded) }},
		{"api: two lines", func(d *engine.Docker) error { _, err := d.ProjectVolumes(ctx, "demo"); return err }, twoLines.Start(t, nil),
			"docker API list volumes labelled com.docker.compose.project=demo: Error response from daemon: first line\nsecond line", true, cerrdefs.IsInternal},
		{"api: two lines, brief", func(d *engine.Docker) error { _, err := d.ProjectVolumes(ctx, "demo"); return err }, twoLines.Start(t, nil).Brief(time.Second),
			"docker API list volumes labelled com.docker.compose.project=demo: Error response from daemon: first line", true, cerrdefs.IsInternal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call(tc.d)
			if prefix, ok := strings.CutSuffix(tc.want, "*"); err == nil || ok && !strings.HasPrefix(err.Error(), prefix) || !ok && err.Error() != tc.want {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
			if ee := (*engine.Error)(nil); errors.As(err, &ee) != tc.isErr {
				t.Errorf("%v: an *Error: %v, want %v", err, !tc.isErr, tc.isErr)
			}
			if tc.isWhat != nil && !tc.isWhat(err) {
				t.Errorf("%v does not say what kind of failure it is", err)
			}
		})
	}
}

// TestNegotiation: the client asks the engine its API version and speaks that one, Engine
// 20.10's 1.41, not its own newest.
func TestNegotiation(t *testing.T) {
	e := &enginetest.Engine{Version: "20.10.24+dfsg1"}
	d := e.Start(t, nil)
	if v, err := d.ServerVersion(context.Background()); err != nil || v != "20.10.24+dfsg1" {
		t.Fatalf("ServerVersion = %q, %v", v, err)
	}
	if got := e.APIVersions(); len(got) == 0 || slices.ContainsFunc(got, func(v string) bool { return v != enginetest.APIVersion }) {
		t.Errorf("API versions asked for %q, want %s only", got, enginetest.APIVersion)
	}
}

// Engine 20.10's answers to GET /version, GET /info and GET /images/sharness/agent:dev/json
// (the last two trimmed to some of their fields), captured from Debian's docker.io 20.10.24 on
// this project's build machine: the client decodes these, not only what the moby api types
// encode.
const (
	realVersion = `{"Platform":{"Name":""},"Components":[{"Name":"Engine","Version":"20.10.24+dfsg1","Details":{"ApiVersion":"1.41","Arch":"amd64","BuildTime":"2026-05-07T21:09:36.000000000+00:00","Experimental":"false","GitCommit":"5d6db84","GoVersion":"go1.19.8","KernelVersion":"6.18.44-fc-v669","MinAPIVersion":"1.12","Os":"linux"}},{"Name":"containerd","Version":"1.6.20~ds1","Details":{"GitCommit":"1.6.20~ds1-1+deb12u3"}},{"Name":"sharness","Version":"1.1.5+ds1","Details":{"GitCommit":"1.1.5+ds1-1+deb12u1"}},{"Name":"docker-init","Version":"0.19.0","Details":{"GitCommit":""}}],"Version":"20.10.24+dfsg1","ApiVersion":"1.41","MinAPIVersion":"1.12","GitCommit":"5d6db84","GoVersion":"go1.19.8","Os":"linux","Arch":"amd64","KernelVersion":"6.18.44-fc-v669","BuildTime":"2026-05-07T21:09:36.000000000+00:00"}`
	realInfo    = `{"Containers":0,"Driver":"overlay2","CgroupDriver":"cgroupfs","CgroupVersion":"1","KernelVersion":"6.18.44-fc-v669","OSType":"linux","Architecture":"x86_64","NCPU":2,"ServerVersion":"20.10.24+dfsg1","Runtimes":{"io.containerd.runc.v2":{"path":"runc"},"io.containerd.runtime.v1.linux":{"path":"runc"},"runc":{"path":"runc"},"sharness":{"path":"/usr/local/bin/sharness-runtime"}},"DefaultRuntime":"sharness","Swarm":{"NodeID":"","NodeAddr":"","LocalNodeState":"inactive","ControlAvailable":false,"Error":"","RemoteManagers":null},"InitBinary":"docker-init","SecurityOptions":["name=seccomp,profile=default"],"Warnings":null}`
	realImage   = `{"Id":"sha256:9cd396ce4e1e79436a420ffd0a1e30a31202c5079bb6cb6b81002e6a89fd3579","RepoTags":["sharness/agent:dev"],"Size":86488539,"Os":"linux","Architecture":"amd64","Config":{"User":"65532:65532","Env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin","HOME=/tmp"],"Cmd":null,"Volumes":null,"WorkingDir":"/tmp","Entrypoint":["/sharness-agent"]}}`
)

// TestFacts: what the engine says of itself, read from its real answers.
func TestFacts(t *testing.T) {
	e := &enginetest.Engine{Hook: func(w http.ResponseWriter, r *http.Request, path string) bool {
		body := map[string]string{"/version": realVersion, "/info": realInfo}[path]
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, body)
		return true
	}}
	d := e.Start(t, nil)
	ctx := context.Background()
	if v, err := d.ServerVersion(ctx); err != nil || v != "20.10.24+dfsg1" {
		t.Errorf("ServerVersion = %q, %v", v, err)
	}
	info, err := d.Info(ctx)
	want := engine.Info{Runtimes: []string{"io.containerd.runc.v2", "io.containerd.runtime.v1.linux", "runc", "sharness"}, DefaultRuntime: "sharness", SecurityOptions: []string{"name=seccomp,profile=default"}}
	if diff := cmp.Diff(want, info); err != nil || diff != "" {
		t.Errorf("Info: %v (-want +got):\n%s", err, diff)
	}
	if diff := cmp.Diff([]string{"GET /version", "GET /info"}, e.Requests()); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}

	// An engine that answers but names no version is no engine doctor can judge.
	e = &enginetest.Engine{Hook: func(w http.ResponseWriter, r *http.Request, path string) bool {
		fmt.Fprint(w, `{"Platform":{"Name":""}}`)
		return true
	}}
	if v, err := e.Start(t, nil).ServerVersion(ctx); err == nil || err.Error() != "docker API version: the engine names no version" {
		t.Errorf("ServerVersion = %q, %v; want the error that no version was named", v, err)
	}
}

// TestContainers: a container's runtime and logs (multiplexed, or one stream under a tty), the
// containers of a service by compose's labels.
func TestContainers(t *testing.T) {
	labels := func(service string) map[string]string {
		return map[string]string{"com.docker.compose.project": "demo", "com.docker.compose.service": service}
	}
	e := &enginetest.Engine{Containers: []enginetest.Container{
		{ID: strings.Repeat("a", 64), Name: "demo-launcher-1", State: "running", Labels: labels("launcher"), Runtime: "sharness", Stdout: "out\n", Stderr: `{"msg":"session started"}` + "\n"},
		{ID: strings.Repeat("b", 64), Name: "demo-launcher-2", State: "exited", Labels: labels("launcher"), Tty: true, Stdout: "tty line\r\n"},
		{ID: strings.Repeat("c", 64), Name: "demo-kms-1", State: "running", Labels: labels("kms")},
	}}
	d := e.Start(t, nil)
	ctx := context.Background()
	cs, err := d.ContainersOf(ctx, "demo", "launcher")
	want := []engine.Container{{ID: strings.Repeat("a", 64), State: "running", Service: "launcher"}, {ID: strings.Repeat("b", 64), State: "exited", Service: "launcher"}}
	if diff := cmp.Diff(want, cs); err != nil || diff != "" {
		t.Errorf("ContainersOf: %v (-want +got):\n%s", err, diff)
	}
	if rt, err := d.ContainerRuntime(ctx, "demo-launcher-1"); err != nil || rt != "sharness" {
		t.Errorf("ContainerRuntime = %q, %v", rt, err)
	}
	var logs bytes.Buffer
	if err := d.ContainerLogs(ctx, strings.Repeat("a", 64), &logs); err != nil || logs.String() != "out\n"+`{"msg":"session started"}`+"\n" {
		t.Errorf("ContainerLogs = %q, %v; want stdout and stderr, demultiplexed", logs.String(), err)
	}
	logs.Reset()
	if err := d.ContainerLogs(ctx, strings.Repeat("b", 64), &logs); err != nil || logs.String() != "tty line\r\n" {
		t.Errorf("ContainerLogs of a tty = %q, %v", logs.String(), err)
	}
	a, b := strings.Repeat("a", 64), strings.Repeat("b", 64)
	wantReqs := []string{
		`GET /containers/json?all=1&filters={"label":{"com.docker.compose.project=demo":true,"com.docker.compose.service=launcher":true}}`,
		"GET /containers/demo-launcher-1/json",
		"GET /containers/" + a + "/json",
		"GET /containers/" + a + "/logs?stderr=1&stdout=1",
		"GET /containers/" + b + "/json",
		"GET /containers/" + b + "/logs?stderr=1&stdout=1",
	}
	if diff := cmp.Diff(wantReqs, e.Requests()); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}

// TestVolumes: only names that begin with the prefix, whatever else the engine's name filter
// matched; a volume's mountpoint, which must be an absolute path.
func TestVolumes(t *testing.T) {
	e := &enginetest.Engine{Volumes: []enginetest.Volume{{Name: "demo_audit-net"}, {Name: "old-demo_audit-kms"}, {Name: "demo_audit-kms"}, {Name: "demo_gate-fs", Mountpoint: "relative/_data"}}}
	d := e.Start(t, nil)
	ctx := context.Background()
	got, err := d.Volumes(ctx, "demo_audit-")
	if err != nil || !cmp.Equal(got, []string{"demo_audit-kms", "demo_audit-net"}) {
		t.Errorf("Volumes = %q, %v", got, err)
	}
	if dir, err := d.VolumeMountpoint(ctx, "demo_audit-kms"); err != nil || dir != "/var/lib/docker/volumes/demo_audit-kms/_data" {
		t.Errorf("VolumeMountpoint = %q, %v", dir, err)
	}
	if dir, err := d.VolumeMountpoint(ctx, "demo_gate-fs"); err == nil || !strings.Contains(err.Error(), `mountpoint "relative/_data" is not an absolute path`) {
		t.Errorf("VolumeMountpoint of a relative path = %q, %v", dir, err)
	}
	_, err = d.VolumeMountpoint(ctx, "nope")
	if ee := (*engine.Error)(nil); !errors.As(err, &ee) || err.Error() != "docker API inspect volume nope: Error response from daemon: get nope: no such volume" {
		t.Errorf("VolumeMountpoint of no volume: %v, want an *Error", err)
	}
	want := []string{`GET /volumes?filters={"name":{"demo_audit-":true}}`, "GET /volumes/demo_audit-kms", "GET /volumes/demo_gate-fs", "GET /volumes/nope"}
	if diff := cmp.Diff(want, e.Requests()); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}

// TestProjectObjects: a project's containers, networks and volumes are found by compose's
// project label, run containers included, and removed by name; a container the engine lists
// without a name is an error, not a container fewer.
func TestProjectObjects(t *testing.T) {
	project := func(extra ...string) map[string]string {
		l := map[string]string{"com.docker.compose.project": "demo"}
		for i := 0; i+1 < len(extra); i += 2 {
			l[extra[i]] = extra[i+1]
		}
		return l
	}
	kms, agent := "0123abcd"+strings.Repeat("0", 56), "fedc9876"+strings.Repeat("0", 56)
	e := &enginetest.Engine{
		Containers: []enginetest.Container{
			{ID: kms, Name: "demo-kms-1", State: "running", Labels: project("com.docker.compose.service", "kms", "com.docker.compose.oneoff", "False")},
			{ID: agent, Name: "demo-agent-run-1a2b3c", State: "exited", Labels: project("com.docker.compose.service", "agent", "com.docker.compose.oneoff", "True")},
			{ID: strings.Repeat("9", 64), Name: "other-kms-1", State: "running", Labels: map[string]string{"com.docker.compose.project": "other"}},
		},
		Networks: []enginetest.Network{{Name: "demo_edge-agent-fs", Labels: project()}, {Name: "demo_edge-agent-bash", Labels: project()}, {Name: "bridge"}},
		Volumes:  []enginetest.Volume{{Name: "demo_gate-fs", Labels: project()}, {Name: "demo_audit-kms", Labels: project()}, {Name: "other_audit-kms", Labels: map[string]string{"com.docker.compose.project": "other"}}},
	}
	d := e.Start(t, nil)
	ctx := context.Background()
	cs, err := d.ProjectContainers(ctx, "demo")
	want := []engine.Container{{ID: kms, Name: "demo-kms-1", State: "running", Service: "kms"}, {ID: agent, Name: "demo-agent-run-1a2b3c", State: "exited", Service: "agent", OneOff: true}}
	if diff := cmp.Diff(want, cs); err != nil || diff != "" {
		t.Errorf("ProjectContainers: %v (-want +got):\n%s", err, diff)
	}
	nets, err := d.ProjectNetworks(ctx, "demo")
	if err != nil || !cmp.Equal(nets, []string{"demo_edge-agent-bash", "demo_edge-agent-fs"}) {
		t.Errorf("ProjectNetworks: %q, %v", nets, err)
	}
	vols, err := d.ProjectVolumes(ctx, "demo")
	if err != nil || !cmp.Equal(vols, []string{"demo_audit-kms", "demo_gate-fs"}) {
		t.Errorf("ProjectVolumes: %q, %v", vols, err)
	}
	if err := d.StopContainers(ctx, 10*time.Second, kms); err != nil {
		t.Error(err)
	}
	for _, err := range []error{d.RemoveContainer(ctx, kms, agent), d.RemoveNetwork(ctx, nets...), d.RemoveVolumes(ctx, vols...),
		d.StopContainers(ctx, time.Second), d.RemoveContainer(ctx), d.RemoveNetwork(ctx), d.RemoveVolumes(ctx)} {
		if err != nil {
			t.Error(err)
		}
	}
	label := `filters={"label":{"com.docker.compose.project=demo":true}}`
	reqs := e.Requests()
	slices.Sort(reqs[4:6]) // the two removals run at once
	wantReqs := []string{
		"GET /containers/json?all=1&" + label,
		"GET /networks?" + label,
		"GET /volumes?" + label,
		"POST /containers/" + kms + "/stop?t=10",
		"DELETE /containers/" + kms + "?force=1",
		"DELETE /containers/" + agent + "?force=1",
		"DELETE /networks/demo_edge-agent-bash",
		"DELETE /networks/demo_edge-agent-fs",
		"DELETE /volumes/demo_audit-kms",
		"DELETE /volumes/demo_gate-fs",
	} // and nothing for an empty list
	if diff := cmp.Diff(wantReqs, reqs); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
	e.Lock()
	left := len(e.Containers) + len(e.Networks) + len(e.Volumes)
	e.Unlock()
	if left != 3 {
		t.Errorf("%d objects left, want other's container, the bridge network and other's volume", left)
	}

	// Removing what is not there names each failure.
	err = d.RemoveNetwork(ctx, "gone-1", "gone-2")
	if err == nil || !strings.Contains(err.Error(), "docker API remove network gone-1: ") || !strings.Contains(err.Error(), "docker API remove network gone-2: ") {
		t.Errorf("RemoveNetwork of absent networks: %v", err)
	}

	nameless := &enginetest.Engine{Hook: func(w http.ResponseWriter, r *http.Request, path string) bool {
		fmt.Fprint(w, `[{"Id":"0123abcd","Names":[],"State":"running","Labels":{}}]`)
		return true
	}}
	if _, err := nameless.Start(t, nil).ProjectContainers(ctx, "demo"); err == nil {
		t.Error("a container listed without a name was not an error")
	}
}

// TestImage: what the engine holds of an image, and its ID; an absent one is ErrNoImage.
func TestImage(t *testing.T) {
	e := &enginetest.Engine{Images: []enginetest.Image{{Refs: []string{"sharness/kms:dev"}, ID: "sha256:" + strings.Repeat("1", 64), Size: 12345678,
		Entrypoint: []string{"/sharness-kms"}, Volumes: []string{"/var/lib/sharness/gate", "/var/lib/sharness/audit"}}}}
	d := e.Start(t, nil)
	ctx := context.Background()
	img, err := d.Image(ctx, "sharness/kms:dev")
	want := &engine.Image{ID: "sha256:" + strings.Repeat("1", 64), Size: 12345678, Entrypoint: []string{"/sharness-kms"}, Volumes: []string{"/var/lib/sharness/audit", "/var/lib/sharness/gate"}}
	if diff := cmp.Diff(want, img); err != nil || diff != "" {
		t.Errorf("Image: %v (-want +got):\n%s", err, diff)
	}
	if id, err := d.ImageID(ctx, "sharness/kms:dev"); err != nil || id != want.ID {
		t.Errorf("ImageID = %q, %v", id, err)
	}
	if id, err := d.ImageID(ctx, "sharness/agent:dev"); !errors.Is(err, engine.ErrNoImage) || id != "" {
		t.Errorf("ImageID of no image = %q, %v; want ErrNoImage", id, err)
	}
	if diff := cmp.Diff([]string{"GET /images/sharness/kms:dev/json", "GET /images/sharness/kms:dev/json", "GET /images/sharness/agent:dev/json"}, e.Requests()); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}

	// The real engine's answer, and its 404 for an image it does not have.
	e = &enginetest.Engine{Hook: func(w http.ResponseWriter, r *http.Request, path string) bool {
		w.Header().Set("Content-Type", "application/json")
		if path != "/images/sharness/agent:dev/json" {
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"message":"no such image: nope:1: No such image: nope:1"}`)
			return true
		}
		fmt.Fprint(w, realImage)
		return true
	}}
	d = e.Start(t, nil)
	img, err = d.Image(ctx, "sharness/agent:dev")
	want = &engine.Image{ID: "sha256:9cd396ce4e1e79436a420ffd0a1e30a31202c5079bb6cb6b81002e6a89fd3579", Size: 86488539, Entrypoint: []string{"/sharness-agent"}}
	if diff := cmp.Diff(want, img); err != nil || diff != "" {
		t.Errorf("Image of the real answer: %v (-want +got):\n%s", err, diff)
	}
	if _, err := d.Image(ctx, "nope:1"); !errors.Is(err, engine.ErrNoImage) {
		t.Errorf("Image of the real 404: %v, want ErrNoImage", err)
	}
}

// TestRun: a network is made as asked; a container runs with the entrypoint, arguments, network
// and resolver asked for, never pulled, and is removed after; its exit code is an error that
// says it; an engine that cannot create it is an error without one.
func TestRun(t *testing.T) {
	var ran []enginetest.Created
	e := &enginetest.Engine{
		Images: []enginetest.Image{{Refs: []string{"sharness/agent:dev"}, ID: "sha256:" + strings.Repeat("2", 64)}},
		Run: func(c enginetest.Created) int {
			ran = append(ran, c)
			return map[string]int{"fail": 1}[c.Cmd[len(c.Cmd)-1]]
		},
	}
	d := e.Start(t, nil)
	ctx := context.Background()
	if err := d.CreateNetwork(ctx, engine.Network{Name: "probe", Internal: true, Labels: []string{"ai.sharness.doctor=1"}}); err != nil {
		t.Fatal(err)
	}
	e.Lock()
	nets := slices.Clone(e.Networks)
	e.Unlock()
	if len(nets) != 1 || !nets[0].Internal || !cmp.Equal(nets[0].Labels, map[string]string{"ai.sharness.doctor": "1"}) {
		t.Errorf("networks %+v, want one internal network labelled ai.sharness.doctor=1", nets)
	}
	spec := engine.RunSpec{Name: "probe", Image: "sharness/agent:dev", Network: "probe", DNS: "127.0.0.1", Entrypoint: "/bin/busybox", Args: []string{"nslookup", "ok"}}
	if err := d.Run(ctx, spec); err != nil {
		t.Errorf("Run: %v", err)
	}
	want := enginetest.Created{Name: "probe", Image: "sharness/agent:dev", Entrypoint: []string{"/bin/busybox"}, Cmd: []string{"nslookup", "ok"}, Network: "probe", DNS: []string{"127.0.0.1"}}
	if len(ran) != 1 || !cmp.Equal(ran[0], want) {
		t.Errorf("ran %+v, want %+v", ran, want)
	}
	spec.Args = []string{"nslookup", "fail"}
	err := d.Run(ctx, spec)
	var exit interface{ ExitCode() int }
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || err.Error() != "docker API run container probe: exited with code 1" {
		t.Errorf("Run of a container that exits 1: %v", err)
	}
	spec.Image = "sharness/nope:dev"
	if err := d.Run(ctx, spec); err == nil || errors.As(err, &exit) || !strings.Contains(err.Error(), "No such image: sharness/nope:dev") {
		t.Errorf("Run of no image: %v, want an error without an exit code", err)
	}
	spec.DNS = "localhost"
	if err := d.Run(ctx, spec); err == nil || !strings.Contains(err.Error(), `dns "localhost"`) {
		t.Errorf("Run with a resolver that is not an address: %v", err)
	}
	e.Lock()
	left := len(e.Containers)
	e.Unlock()
	if left != 0 {
		t.Errorf("%d containers left after Run", left)
	}
	reqs := e.Requests()
	for _, want := range []string{"POST /networks/create", "POST /containers/create?name=probe", "POST /containers/" + fmt.Sprintf("%064x", 2) + "/start",
		"POST /containers/" + fmt.Sprintf("%064x", 2) + "/wait?condition=not-running", "DELETE /containers/" + fmt.Sprintf("%064x", 2) + "?force=1"} {
		if !slices.Contains(reqs, want) {
			t.Errorf("no %q in %q", want, reqs)
		}
	}
	if slices.ContainsFunc(reqs, func(r string) bool { return strings.HasPrefix(r, "POST /images/create") }) {
		t.Errorf("Run pulled: %q", reqs)
	}
}
