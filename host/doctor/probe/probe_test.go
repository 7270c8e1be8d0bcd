package probe

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/net/dns/dnsmessage"

	"github.com/sharness-ai/sharness/host/doctor"
	"github.com/sharness-ai/sharness/host/engine"
)

// What Engine 20.10 and compose v2.40.3 print on the machines we build on (trimmed).
const (
	versionJSON = `{"Client":{"Version":"28.2.2","ApiVersion":"1.41"},"Server":{"Platform":{"Name":""},"Version":"20.10.24+dfsg1","ApiVersion":"1.41","KernelVersion":"6.18.44"}}`
	downJSON    = `{"Client":{"Version":"28.2.2","ApiVersion":"1.41"},"Server":null}`
	infoJSON    = `{"ServerVersion":"20.10.24+dfsg1","CgroupVersion":"1","Runtimes":{"io.containerd.runc.v2":{"path":"runc"},"runc":{"path":"runc"}},"DefaultRuntime":"runc","SecurityOptions":["name=seccomp,profile=default"]}`
)

// exitErr is a command that ran and exited with a code, as *exec.ExitError is.
type exitErr int

func (e exitErr) Error() string { return fmt.Sprintf("exit status %d", int(e)) }
func (e exitErr) ExitCode() int { return int(e) }

// fakeEnv answers docker calls from a table keyed by the joined arguments and records them.
type fakeEnv struct {
	mu      sync.Mutex
	calls   []string
	answers map[string]func(args []string) ([]byte, error)
	files   map[string]string
}

func (f *fakeEnv) env() Env {
	return Env{
		Engine: engine.With(func(_ context.Context, c engine.Command) error {
			args := c.Args
			f.mu.Lock()
			f.calls = append(f.calls, strings.Join(args, " "))
			f.mu.Unlock()
			for prefix, answer := range f.answers {
				if strings.HasPrefix(strings.Join(args, " "), prefix) {
					out, err := answer(args)
					c.Stdout.Write(out)
					return err
				}
			}
			return nil
		}),
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

func says(out string, err error) func([]string) ([]byte, error) {
	return func([]string) ([]byte, error) { return []byte(out), err }
}

func TestGather(t *testing.T) {
	fe := &fakeEnv{
		answers: map[string]func([]string) ([]byte, error){
			"version --format json": says(versionJSON, nil),
			"info --format json":    says(infoJSON, nil),
			"compose version":       says("Docker Compose version v2.40.3\n", nil),
		},
		files: map[string]string{doctor.PathMaxUserNS: "96364\n", doctor.PathResolv: "nameserver 10.255.255.53\n"},
	}
	f := Gather(context.Background(), fe.env(), false)
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

	// No engine: docker version prints the client's half and fails; nothing else is asked of
	// the engine, and --live has nothing to probe.
	fe = &fakeEnv{answers: map[string]func([]string) ([]byte, error){
		"version": says(downJSON, errors.New("docker version: exit status 1: Cannot connect to the Docker daemon")),
	}}
	f = Gather(context.Background(), fe.env(), true)
	if f.Engine.Version != "" || f.Engine.Err == nil || !strings.Contains(f.Engine.Err.Error(), "Cannot connect") {
		t.Errorf("engine = %+v, want no version and the reason", f.Engine)
	}
	if f.Live.Skip == "" || slices.ContainsFunc(fe.calls, func(c string) bool { return strings.HasPrefix(c, "info") || strings.HasPrefix(c, "network") }) {
		t.Errorf("live %+v after calls %q: want a skip and no engine calls after version", f.Live, fe.calls)
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
		imageErr   error
		runErr     error
		wantLeak   bool
		wantSkip   string
		wantErr    string
		wantCreate bool
	}{
		{name: "leaks", leak: true, runErr: exitErr(1), wantLeak: true, wantCreate: true},
		{name: "does not leak", runErr: exitErr(1), wantCreate: true},
		{name: "nslookup answered", wantCreate: true},
		{name: "port taken", listenErr: syscall.EADDRINUSE, wantSkip: "127.0.0.1:53"},
		{name: "no image", imageErr: errors.New("No such image"), wantSkip: "hack/build-images.sh"},
		{name: "docker failed", runErr: exitErr(125), wantErr: "run the probe container", wantCreate: true},
		{name: "killed", runErr: exitErr(-1), wantErr: "run the probe container", wantCreate: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var addr string
			fe := &fakeEnv{answers: map[string]func([]string) ([]byte, error){
				"image inspect": says("sha256:abc", tc.imageErr),
				"run": func(args []string) ([]byte, error) {
					if tc.leak {
						query(t, addr, args[len(args)-1])
					}
					query(t, addr, "other.example") // the host's own lookups are not leaks
					return nil, tc.runErr
				},
			}}
			env := fe.env()
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
			// Everything it creates is named sharness-doctor-<random> and removed.
			i := slices.IndexFunc(fe.calls, func(c string) bool { return strings.HasPrefix(c, "network create") })
			if (i >= 0) != tc.wantCreate {
				t.Fatalf("calls %q: network created = %v, want %v", fe.calls, i >= 0, tc.wantCreate)
			}
			if i < 0 {
				return
			}
			name := fe.calls[i][strings.LastIndex(fe.calls[i], " ")+1:]
			if !strings.HasPrefix(name, "sharness-doctor-") {
				t.Errorf("network %q is not named sharness-doctor-*", name)
			}
			for _, want := range []string{"--name " + name + " ", "--network " + name + " ", "--dns 127.0.0.1 "} {
				if !slices.ContainsFunc(fe.calls, func(c string) bool { return strings.HasPrefix(c, "run ") && strings.Contains(c, want) }) {
					t.Errorf("no run with %q in %q", want, fe.calls)
				}
			}
			if tail := fe.calls[len(fe.calls)-2:]; !cmp.Equal(tail, []string{"rm -f " + name, "network rm " + name}) {
				t.Errorf("last calls %q, want the container and the network removed", tail)
			}
		})
	}
}
