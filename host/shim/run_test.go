package shim

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/sharness-ai/sharness/host/shim/runc"
)

// The handover replaces the process, so these tests run the test binary itself as the shim
// (through a symlink named sharness-runtime) and a copy of it as runc (named fake-runc), which
// records its argv and stdin. No real runc or Docker is needed.
const (
	shimName     = "sharness-runtime"
	fakeRuncName = "fake-runc"
	envRecord    = "FAKE_RUNC_RECORD" // where fake-runc writes what it got
	envBundle    = "FAKE_RUNC_BUNDLE" // what fake-runc's `state` answers
)

var binDir string // holds the shim link and the fake runc, for the whole run

func runTests(m *testing.M) int {
	for _, a := range os.Args[1:] {
		// A fuzzing worker runs only a fuzz target, needs no binaries, and is killed when the
		// fuzzing ends, which would leave the folder behind (12 MB a worker).
		if strings.HasPrefix(a, "-test.fuzzworker") {
			return m.Run()
		}
	}
	dir, err := os.MkdirTemp("", "sharness-runtime-test")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	self, err := os.Executable()
	if err != nil {
		panic(err)
	}
	// A copy, not a link: the shim refuses a runc that is the same file as itself.
	if err := copyFile(self, filepath.Join(dir, fakeRuncName)); err != nil {
		panic(err)
	}
	if err := os.Symlink(self, filepath.Join(dir, shimName)); err != nil {
		panic(err)
	}
	binDir = dir
	return m.Run()
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

type record struct {
	Argv    []string `json:"argv"`
	Stdin   string   `json:"stdin"`
	Process string   `json:"process,omitempty"` // what runc's -p names held, when it names one
}

func fakeRunc() {
	if len(os.Args) > 1 && os.Args[len(os.Args)-2] == "state" {
		json.NewEncoder(os.Stdout).Encode(map[string]string{"id": os.Args[len(os.Args)-1], "bundle": os.Getenv(envBundle)})
		os.Exit(0)
	}
	stdin, _ := io.ReadAll(os.Stdin)
	r := record{Argv: os.Args, Stdin: string(stdin)}
	for i, a := range os.Args {
		if a == "-p" && i+1 < len(os.Args) {
			p, _ := os.ReadFile(os.Args[i+1])
			r.Process = string(p)
		}
	}
	b, _ := json.Marshal(r)
	if err := os.WriteFile(os.Getenv(envRecord), b, 0o600); err != nil {
		os.Exit(3)
	}
	os.Exit(0)
}

// shimRun lays out a policy root and bundles on disk and runs the shim with args.
type shimRun struct {
	dir, log, record string
	stderr           bytes.Buffer
	code             int
}

func runShim(t *testing.T, runcPath, stdin string, args ...string) *shimRun {
	t.Helper()
	return runShimIn(t, runcPath, stdin, "bundle", nil, args...)
}

// runShimFiles runs the shim on the unmarked container (/plain) with extra open files (fd 3...).
func runShimFiles(t *testing.T, extra []*os.File, args ...string) *shimRun {
	t.Helper()
	return runShimIn(t, "", "", "plain", extra, args...)
}

// runShimIn runs the shim with bundle as the container `runc state` names, and extra files.
func runShimIn(t *testing.T, runcPath, stdin, bundle string, extra []*os.File, args ...string) *shimRun {
	t.Helper()
	dir := t.TempDir()
	for name, content := range fixtureFiles(t) {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s := &shimRun{dir: dir, log: filepath.Join(dir, "log.json"), record: filepath.Join(dir, "record.json")}
	for i, a := range args { // fixture paths are absolute in the fake host; here under dir
		args[i] = strings.ReplaceAll(a, "@", dir)
	}
	if runcPath == "" {
		runcPath = filepath.Join(binDir, fakeRuncName)
	}
	cmd := exec.Command(filepath.Join(binDir, shimName), args...)
	cmd.Dir = dir
	helper := filepath.Join(dir, "sharness-landlock") // the shim only checks that it exists
	if err := os.WriteFile(helper, nil, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd.Env = []string{runc.EnvRunc + "=" + runcPath, EnvPolicies + "=" + filepath.Join(dir, policyRoot),
		envRecord + "=" + s.record, envBundle + "=" + filepath.Join(dir, bundle), EnvHelper + "=" + helper,
		EnvDockerRoot + "=" + filepath.Join(dir, "docker")}
	// The engine's record of container abc: in project sharness, on no network (so the shim asks
	// the engine nothing).
	rec := filepath.Join(dir, "docker", "containers", "abc", "config.v2.json")
	if err := os.MkdirAll(filepath.Dir(rec), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(rec, []byte(`{"ID":"abc","Image":"sha256:`+strings.Repeat("a", 64)+`","Config":{"Labels":{"`+labelProject+`":"sharness"},"Healthcheck":{"Test":["CMD","/.sharness-landlock","-health"],"Interval":1000000000}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd.Stdin, cmd.Stderr, cmd.ExtraFiles = strings.NewReader(stdin), &s.stderr, extra
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		s.code = exit.ExitCode()
	case err != nil:
		t.Fatalf("run shim: %v", err)
	}
	return s
}

func (s *shimRun) got(t *testing.T) *record {
	t.Helper()
	b, err := os.ReadFile(s.record)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var r record
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return &r
}

func TestHandover(t *testing.T) {
	runcPath := filepath.Join(binDir, fakeRuncName)
	resources := fixtureFiles(t)["/res-ok.json"]
	tests := []struct {
		name, stdin string
		args        []string
	}{
		{"create", "", []string{"--root", "@/root", "--log", "@/log.json", "--log-format", "json", "create", "--bundle", "@/ok", "abc"}},
		{"unmarked", "", []string{"run", "-b=@/plain", "abc"}},
		{"update -r - gets the checked bytes on stdin", resources, []string{"update", "-r", "-", "abc"}},
		{"pass-through keeps stdin", "input", []string{"--root", "/r", "kill", "abc", "KILL"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := runShim(t, "", tt.stdin, tt.args...)
			if s.code != 0 {
				t.Fatalf("shim exit %d, stderr %q", s.code, s.stderr.String())
			}
			want := &record{Argv: append([]string{runcPath}, tt.args...), Stdin: tt.stdin}
			if d := cmp.Diff(want, s.got(t)); d != "" {
				t.Errorf("runc got (-want +got):\n%s", d)
			}
		})
	}
}

// TestHandoverExecProcess: runc reads the process the shim checked, from a memfd it inherits
// (/proc/self/fd/N), not the engine's file again: wrapped in the Landlock helper for a confined
// container, and byte for byte what the engine wrote when the shim reads it from a pipe that a
// second read would find empty.
func TestHandoverExecProcess(t *testing.T) {
	runcPath := filepath.Join(binDir, fakeRuncName)
	s := runShim(t, "", "", "exec", "-p", "@/proc-ok.json", "abc")
	if s.code != 0 {
		t.Fatalf("shim exit %d, stderr %q", s.code, s.stderr.String())
	}
	got := s.got(t)
	if len(got.Argv) != 5 || got.Argv[0] != runcPath || got.Argv[2] != "-p" || !strings.HasPrefix(got.Argv[3], "/proc/self/fd/") || got.Argv[4] != "abc" {
		t.Fatalf("runc argv %q, want -p /proc/self/fd/N", got.Argv)
	}
	var p specs.Process
	if err := json.Unmarshal([]byte(got.Process), &p); err != nil || len(p.Args) < 4 || p.Args[0] != HelperMount {
		t.Errorf("runc read the process %s (%v), want it wrapped in the Landlock helper", got.Process, err)
	}

	// An unmarked container's process, from a pipe: runc gets the same bytes.
	plain := `{"user":{"uid":0,"gid":0},"args":["/bin/true"],"cwd":"/"}`
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	go func() { w.WriteString(plain); w.Close() }()
	defer r.Close()
	s = runShimFiles(t, []*os.File{r}, "exec", "-p", "/dev/fd/3", "abc")
	if s.code != 0 {
		t.Fatalf("shim exit %d, stderr %q", s.code, s.stderr.String())
	}
	if got := s.got(t); got.Process != plain {
		t.Errorf("runc read %q from the process it was given, want the engine's bytes %q", got.Process, plain)
	}
}

func TestRefusalReachesTheLog(t *testing.T) {
	s := runShim(t, "", "", "--log", "@/log.json", "--log-format", "json", "create", "-b", "@/wide", "abc")
	if s.code != 1 {
		t.Errorf("shim exit %d, want 1", s.code)
	}
	if r := s.got(t); r != nil {
		t.Errorf("runc was called on a refusal: %+v", r)
	}
	wantText := "sharness-runtime: refused agent: process.capabilities"
	if !strings.Contains(s.stderr.String(), wantText) || !strings.Contains(s.stderr.String(), "CAP_NET_ADMIN") {
		t.Errorf("stderr %q, want %q and CAP_NET_ADMIN", s.stderr.String(), wantText)
	}
	msg, line := lastRuntimeError(t, s.log)
	if !strings.HasPrefix(msg, wantText) || strings.TrimSpace(s.stderr.String()) != msg {
		t.Errorf("last runtime error %q, want the stderr text %q", msg, s.stderr.String())
	}
	if line.Component != "agent" || line.Container != "abc" || !strings.HasPrefix(line.Policy, "sha256:") ||
		!strings.HasPrefix(line.Field, "process.capabilities") || !strings.Contains(line.Got, "CAP_NET_ADMIN") {
		t.Errorf("log line keys %+v", line)
	}
}

// lastRuntimeError reads a --log file the way containerd's runc shim does (getLastRuntimeError
// in pkg/process/utils.go): the msg of the last "error" line, decoding time as time.Time.
func lastRuntimeError(t *testing.T, path string) (string, logLine) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var msg string
	var last logLine
	dec := json.NewDecoder(f)
	for {
		var l struct {
			Level string
			Msg   string
			Time  time.Time
		}
		raw := json.RawMessage{}
		if err := dec.Decode(&raw); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("decode %s: %v", path, err)
		}
		if err := json.Unmarshal(raw, &l); err != nil {
			t.Fatalf("decode %s as containerd does: %v", path, err)
		}
		if l.Level == "error" {
			msg = strings.TrimSpace(l.Msg)
			json.Unmarshal(raw, &last)
		}
	}
	return msg, last
}

func TestShimErrors(t *testing.T) {
	tests := []struct {
		name, runc string
		args       []string
		want       string
	}{
		{"runc missing", "/nonexistent/runc", []string{"--log", "@/log.json", "state", "abc"}, "find runc"},
		{"runc relative", "runc", []string{"state", "abc"}, "not an absolute path"},
		{"runc is the shim", filepath.Join(binDir, shimName), []string{"state", "abc"}, "is sharness-runtime itself"},
		{"marked without policy", "", []string{"--log", "@/log.json", "--log-format=json", "create", "-b", "@/nopolicy", "abc"}, "refused agent: policy"},
		{"unknown flag", "", []string{"--log=@/log.json", "--log-format=json", "run", "--privileged", "abc"}, "refused container: argv"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := runShim(t, tt.runc, "", tt.args...)
			if s.code != 1 || !strings.Contains(s.stderr.String(), tt.want) || s.got(t) != nil {
				t.Errorf("shim exit %d, stderr %q, runc called: %v; want exit 1 and %q", s.code, s.stderr.String(), s.got(t) != nil, tt.want)
			}
		})
	}
}

func TestReportText(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	var stderr bytes.Buffer
	r := Refusal{Container: "abc"}.with("marker", "a \"component\"", "none")
	report(r, path, "text", time.Unix(0, 0), &stderr)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := `time="1970-01-01T00:00:00Z" level=error msg="sharness-runtime: refused container abc: marker: want a \"component\" got none" container="abc" component="" policy="" field="marker" want="a \"component\"" got="none"` + "\n"
	if d := cmp.Diff(want, string(b)); d != "" {
		t.Errorf("text log line (-want +got):\n%s", d)
	}
}

// TestHashInRoot: the binary is hashed inside the container's root, and a symlink in the image
// that points at a host path resolves inside the root, never to the host's file.
func TestHashInRoot(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "bin"), []byte("code"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/hostname", filepath.Join(root, "escape")); err != nil {
		t.Fatal(err)
	}
	got, err := osHost{}.HashInRoot(root, "/bin")
	if want := "sha256:5694d08a2e53ffcae0c3103e5ad6f6076abd960eb1f8a56577040bc1028f702b"; err != nil || got != want {
		t.Errorf("HashInRoot(/bin) = %q, %v; want %s", got, err, want)
	}
	if got, err := (osHost{}).HashInRoot(root, "/escape"); err == nil {
		t.Errorf("a symlink to a host path was followed out of the root: %s", got)
	}
	if _, err := (osHost{}).HashInRoot(root, "/../../etc/hostname"); err == nil {
		t.Error("a path climbing out of the root was followed")
	}
}

// A refused exec exits 255, as runc's exec failures do: 1 would read as the process's own exit.
func TestExecRefusalExitCode(t *testing.T) {
	if s := runShim(t, "", "", "exec", "-p", "@/proc-wide.json", "abc"); s.code != 255 {
		t.Errorf("refused exec: exit %d, want 255", s.code)
	}
	if s := runShim(t, "", "", "create", "-b", "@/wide", "abc"); s.code != 1 {
		t.Errorf("refused create: exit %d, want 1", s.code)
	}
}
