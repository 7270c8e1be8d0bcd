package probe

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"golang.org/x/net/dns/dnsmessage"

	"github.com/sharness-ai/sharness/host/doctor"
	"github.com/sharness-ai/sharness/host/engine"
	"github.com/sharness-ai/sharness/testkit/enginetest"
)

// fakeEnv is a host whose engine is a fake Engine API (e) and whose docker CLI answers compose
// version with compose.
type fakeEnv struct {
	e       *enginetest.Engine
	compose string
	files   map[string]string
}

func (f *fakeEnv) env(t *testing.T) Env {
	return f.envOf(f.e.Start(t, f.cli))
}

func (f *fakeEnv) cli(_ context.Context, c engine.Command) error {
	if strings.Join(c.Args, " ") != "compose version" {
		return fmt.Errorf("docker %s: not faked", strings.Join(c.Args, " "))
	}
	fmt.Fprint(c.Stdout, f.compose)
	return nil
}

func (f *fakeEnv) envOf(d *engine.Docker) Env {
	return Env{
		Engine: d,
		ReadFile: func(name string) ([]byte, error) {
			if s, ok := f.files[name]; ok {
				return []byte(s), nil
			}
			return nil, fs.ErrNotExist
		},
		Landlock:    func() (int, error) { return 0, syscall.ENOSYS },
		MemfdSecret: func() error { return syscall.ENOSYS },
		Listen:      func(network, _ string) (net.PacketConn, error) { return net.ListenPacket(network, "127.0.0.1:0") },
	}
}

func TestGather(t *testing.T) {
	fe := &fakeEnv{
		e: &enginetest.Engine{Version: "20.10.24+dfsg1", Runtimes: []string{"runc", "io.containerd.runc.v2"}, DefaultRuntime: "runc",
			SecurityOptions: []string{"name=seccomp,profile=default"}},
		compose: "Docker Compose version v2.40.3\n",
		files:   map[string]string{doctor.PathMaxUserNS: "96364\n", doctor.PathResolv: "nameserver 10.255.255.53\n"},
	}
	f := Gather(context.Background(), fe.env(t), false)
	want := doctor.Engine{Version: "20.10.24+dfsg1", Runtimes: []string{"io.containerd.runc.v2", "runc"}, DefaultRuntime: "runc", SecurityOptions: []string{"name=seccomp,profile=default"}}
	if diff := cmp.Diff(want, f.Engine, cmp.Comparer(func(a, b error) bool { return (a == nil) == (b == nil) })); diff != "" {
		t.Errorf("engine (-want +got):\n%s", diff)
	}
	if f.Compose.Output != "Docker Compose version v2.40.3" || f.Compose.Err != nil {
		t.Errorf("compose = %+v", f.Compose)
	}
	if diff := cmp.Diff(fe.files, f.Files); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
	if !errors.Is(f.LandlockErr, syscall.ENOSYS) || !errors.Is(f.MemfdSecretErr, syscall.ENOSYS) || f.Live.Ran {
		t.Errorf("landlock %v, memfd_secret %v, live %+v", f.LandlockErr, f.MemfdSecretErr, f.Live)
	}

	// No engine at the socket: the version's error says so, and --live has nothing to probe.
	fe = &fakeEnv{compose: "Docker Compose version v2.40.3\n"}
	f = Gather(context.Background(), fe.envOf(enginetest.NoEngine(t, fe.cli)), true)
	if f.Engine.Version != "" || f.Engine.Err == nil || !strings.Contains(f.Engine.Err.Error(), "failed to connect to the docker API") {
		t.Errorf("engine = %+v, want no version and the reason", f.Engine)
	}
	if f.Live.Skip == "" {
		t.Errorf("live %+v: want a skip", f.Live)
	}

	// An engine that cannot say its version is asked nothing more.
	fe = &fakeEnv{e: &enginetest.Engine{}, compose: "Docker Compose version v2.40.3\n"}
	f = Gather(context.Background(), fe.env(t), true)
	if f.Engine.Version != "" || f.Engine.Err == nil || f.Live.Skip == "" || !cmp.Equal(fe.e.Requests(), []string{"GET /version"}) {
		t.Errorf("engine %+v, live %+v after requests %q: want no version, a skip and no request after the version", f.Engine, f.Live, fe.e.Requests())
	}
}

// query sends a DNS question for name to addr, as the probe container's resolver would.
func query(t *testing.T, addr, name string) {
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 7, RecursionDesired: true})
	b.StartQuestions()
	b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName(name + "."), Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET})
	msg, _ := b.Finish()
	c, err := net.Dial("udp4", addr)
	if err != nil {
		t.Error(err)
		return
	}
	defer c.Close()
	c.Write(msg)
	// The probe's resolver refuses: the reply must be a well-formed DNS response.
	buf := make([]byte, 512)
	n, err := c.Read(buf)
	var p dnsmessage.Parser
	if h, perr := p.Start(buf[:n]); err != nil || perr != nil || !h.Response || h.RCode != dnsmessage.RCodeRefused || h.ID != 7 {
		t.Errorf("reply to %s: %v %v %+v", name, err, perr, h)
	}
}

func TestDNSLeak(t *testing.T) {
	for _, tc := range []struct {
		name       string
		leak       bool
		listenErr  error
		noImage    bool
		exit       int
		fail       string // the API call the engine refuses: "create", "start"
		wantLeak   bool
		wantSkip   string
		wantErr    string
		wantCreate bool
	}{
		{name: "leaks", leak: true, exit: 1, wantLeak: true, wantCreate: true},
		{name: "does not leak", exit: 1, wantCreate: true},
		{name: "nslookup answered", wantCreate: true},
		{name: "port taken", listenErr: syscall.EADDRINUSE, wantSkip: "127.0.0.1:53"},
		{name: "no image", noImage: true, wantSkip: "hack/build-images.sh"},
		{name: "engine refused the container", fail: "create", wantErr: "run the probe container", wantCreate: true},
		{name: "engine could not start it", fail: "start", wantErr: "run the probe container", wantCreate: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var addr string
			var netsAtCreate []enginetest.Network
			var ran []enginetest.Created
			var e *enginetest.Engine
			e = &enginetest.Engine{
				Images: []enginetest.Image{{Refs: []string{Image}, ID: "sha256:" + strings.Repeat("a", 64)}},
				Run: func(c enginetest.Created) int {
					ran = append(ran, c)
					if tc.leak {
						query(t, addr, c.Cmd[len(c.Cmd)-1])
					}
					query(t, addr, "other.example") // the host's own lookups are not leaks
					return tc.exit
				},
				Hook: func(w http.ResponseWriter, r *http.Request, path string) bool {
					if r.Method == http.MethodPost && path == "/containers/create" {
						netsAtCreate = slices.Clone(e.Networks) // the hook runs under e's lock
					}
					if tc.fail != "" && r.Method == http.MethodPost && strings.HasPrefix(path, "/containers/") && strings.HasSuffix(path, "/"+tc.fail) {
						w.Header().Set("Content-Type", "application/json")
						w.WriteHeader(http.StatusInternalServerError)
						fmt.Fprint(w, `{"message":"OCI runtime create failed"}`)
						return true
					}
					return false
				},
			}
			if tc.noImage {
				e.Images = nil
			}
			fenv := &fakeEnv{e: e}
			env := fenv.env(t)
			env.Listen = func(network, a string) (net.PacketConn, error) {
				if a != "127.0.0.1:53" || tc.listenErr != nil {
					return nil, errors.Join(tc.listenErr, fmt.Errorf("listen on %s", a))
				}
				pc, err := net.ListenPacket(network, "127.0.0.1:0")
				if err == nil {
					addr = pc.LocalAddr().String()
				}
				return pc, err
			}
			l := DNSLeak(context.Background(), env, Image)
			if got := len(l.Leaked) > 0; got != tc.wantLeak || (got && !strings.HasSuffix(l.Leaked[0], ".sharness-doctor.invalid")) {
				t.Errorf("leaked %q, want a leak: %v", l.Leaked, tc.wantLeak)
			}
			if !strings.Contains(l.Skip, tc.wantSkip) || (tc.wantSkip == "") != (l.Skip == "") {
				t.Errorf("skip %q, want %q", l.Skip, tc.wantSkip)
			}
			if tc.wantErr != "" && (l.Err == nil || !strings.Contains(l.Err.Error(), tc.wantErr)) || tc.wantErr == "" && l.Err != nil {
				t.Errorf("err %v, want %q", l.Err, tc.wantErr)
			}
			// Everything it creates is named sharness-doctor-<random>, and removed.
			reqs := e.Requests()
			i := slices.IndexFunc(reqs, func(c string) bool { return strings.HasPrefix(c, "POST /containers/create?name=") })
			if (i >= 0) != tc.wantCreate {
				t.Fatalf("requests %q: container created = %v, want %v", reqs, i >= 0, tc.wantCreate)
			}
			if i < 0 {
				return
			}
			name := strings.TrimPrefix(reqs[i], "POST /containers/create?name=")
			if !strings.HasPrefix(name, "sharness-doctor-") {
				t.Errorf("container %q is not named sharness-doctor-*", name)
			}
			if len(netsAtCreate) != 1 || netsAtCreate[0].Name != name || !netsAtCreate[0].Internal || netsAtCreate[0].Labels["ai.sharness.doctor"] != "1" {
				t.Errorf("networks when the container was created: %+v, want one internal network %s", netsAtCreate, name)
			}
			if want := (enginetest.Created{Name: name, Image: Image, Entrypoint: []string{"/bin/busybox"}, Network: name, DNS: []string{"127.0.0.1"}}); tc.fail == "" &&
				(len(ran) != 1 || !cmp.Equal(ran[0], want, cmpopts.IgnoreFields(enginetest.Created{}, "Cmd"))) {
				t.Errorf("ran %+v, want one %+v", ran, want)
			}
			e.Lock()
			left := len(e.Containers) + len(e.Networks)
			created := e.Containers
			e.Unlock()
			if left != 0 {
				t.Errorf("%d containers and networks left: %+v", left, created)
			}
			if tail := reqs[len(reqs)-2:]; !cmp.Equal(tail, []string{"DELETE /containers/" + name + "?force=1", "DELETE /networks/" + name}) {
				t.Errorf("last requests %q, want the container and the network removed by name", tail)
			}
		})
	}
}
