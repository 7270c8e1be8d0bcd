package compile

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/moby/profiles/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// bashAllow is what bash's sandboxes need (user/pid/net/mount namespaces).
var bashAllow = []string{"unshare", "setns", "mount", "umount2", "pivot_root", CloneNamespaces}

// seccompCases drives TestSeccomp and seeds FuzzSeccompInput. Each list names
// syscalls that must end up in exactly that state:
//   - plain: in the allow rule without argument filters;
//   - filtered: allowed only by rules with argument filters;
//   - eperm: in the EPERM rule and in no allow rule;
//   - enosys: in no rule except an ENOSYS one, so it answers ENOSYS.
//
// memfd_create is "sealed" unless allowed or denied by name: checkSeccomp holds that.
var seccompCases = []struct {
	name                           string
	in                             SeccompInput
	plain, filtered, eperm, enosys []string
	wantErr                        string
}{{
	name: "default",
	plain: []string{"read", "write", "futex", "epoll_pwait", "getpid", "execve",
		"memfd_secret", "arch_prctl", "rt_sigreturn", "mmap"},
	filtered: []string{"clone", "socket"},
	eperm: []string{"io_uring_setup", "io_uring_enter", "io_uring_register", "unshare", "ptrace",
		"process_vm_readv", "process_vm_writev", "keyctl", "add_key", "bpf", "userfaultfd", "mount",
		"umount2", "setns", "pivot_root", "execveat", "personality", "perf_event_open", "kcmp",
		"open_by_handle_at", "name_to_handle_at", "adjtimex", "clock_adjtime", "chroot", "reboot"},
	enosys: []string{"clone3", "sethostname", "mbind", "lsm_get_self_attr", "s390_runtime_instr", "sync_file_range2"},
}, {
	name:     "bash sandbox",
	in:       SeccompInput{Allow: bashAllow},
	plain:    []string{"unshare", "setns", "mount", "umount2", "pivot_root", "clone", "clone3", "read"},
	filtered: []string{"socket"},
	eperm:    []string{"umount", "io_uring_setup", "ptrace", "keyctl", "bpf", "execveat", "open_tree", "fsopen"},
	enosys:   []string{"sethostname"},
}, {
	name:   "allow re-adds unshare",
	in:     SeccompInput{Allow: []string{"unshare"}},
	plain:  []string{"unshare"},
	eperm:  []string{"setns", "mount"},
	enosys: []string{"clone3"},
}, {
	name:   "allow re-adds a rule dropped for MinKernel",
	in:     SeccompInput{Allow: []string{"ptrace", "process_vm_readv", "process_vm_writev"}},
	plain:  []string{"ptrace", "process_vm_readv", "process_vm_writev"},
	eperm:  []string{"kcmp"},
	enosys: []string{"pidfd_getfd"},
}, {
	name:  "allow drops argument filters",
	in:    SeccompInput{Allow: []string{"personality", "execveat", "io_uring_setup"}},
	plain: []string{"personality", "execveat", "io_uring_setup"},
	eperm: []string{"io_uring_enter"},
}, {
	name:   "deny getpid",
	in:     SeccompInput{Deny: []string{"getpid"}},
	plain:  []string{"getppid"},
	eperm:  []string{"getpid", "ptrace"},
	enosys: []string{"clone3"},
}, {
	name:     "deny removes filtered rules",
	in:       SeccompInput{Deny: []string{"socket", "clone", "sethostname", "memfd_create"}},
	plain:    []string{"socketpair"},
	eperm:    []string{"socket", "clone", "sethostname", "memfd_create"},
	filtered: []string{},
}, {
	name:     "duplicates are harmless",
	in:       SeccompInput{Allow: []string{"unshare", "unshare"}, Deny: []string{"getpid", "getpid"}},
	plain:    []string{"unshare"},
	eperm:    []string{"getpid"},
	filtered: []string{"clone"},
}, {
	name:     "CAP_SYS_ADMIN resolves moby's admin rules",
	in:       SeccompInput{Capabilities: []string{"CAP_SYS_ADMIN"}},
	plain:    []string{"clone", "clone3", "sethostname", "setdomainname", "lsm_get_self_attr"},
	filtered: []string{"socket"},
	eperm:    []string{"mount", "unshare", "setns", "bpf", "perf_event_open", "syslog", "quotactl", "fsopen"},
}, {
	name:   "CAP_SYS_PTRACE keeps the floor",
	in:     SeccompInput{Capabilities: []string{"CAP_SYS_PTRACE"}},
	plain:  []string{"pidfd_getfd", "process_madvise"},
	eperm:  []string{"ptrace", "process_vm_readv", "kcmp"},
	enosys: []string{"clone3"},
}, {
	name:   "CAP_SYS_NICE",
	in:     SeccompInput{Capabilities: []string{"CAP_SYS_NICE", "CAP_NET_BIND_SERVICE"}},
	plain:  []string{"mbind", "set_mempolicy", "get_mempolicy"},
	eperm:  []string{"migrate_pages", "move_pages"},
	enosys: []string{"clone3"},
}, {
	name:    "unknown allow",
	in:      SeccompInput{Allow: []string{"read", "frobnicate"}},
	wantErr: `allow "frobnicate": unknown syscall`,
}, {
	name:    "unknown deny",
	in:      SeccompInput{Deny: []string{"Getpid"}},
	wantErr: `deny "Getpid": unknown syscall`,
}, {
	name:    "empty name",
	in:      SeccompInput{Deny: []string{""}},
	wantErr: `deny "": unknown syscall`,
}, {
	name:    "pseudo-name only in allow",
	in:      SeccompInput{Deny: []string{CloneNamespaces}},
	wantErr: `deny "clone_namespaces": unknown syscall`,
}, {
	name:    "both lists",
	in:      SeccompInput{Allow: []string{"getpid"}, Deny: []string{"getpid"}},
	wantErr: `"getpid" is both allowed and denied`,
}, {
	name:    "both lists through the pseudo-name",
	in:      SeccompInput{Allow: []string{CloneNamespaces}, Deny: []string{"clone"}},
	wantErr: `"clone" is both allowed and denied`,
}, {
	name:    "allow clone by name",
	in:      SeccompInput{Allow: []string{"clone"}},
	wantErr: `allow "clone": name "clone_namespaces"`,
}, {
	name:    "allow clone3 by name",
	in:      SeccompInput{Allow: []string{"clone3"}},
	wantErr: `allow "clone3": name "clone_namespaces"`,
}, {
	name:    "deny clone3",
	in:      SeccompInput{Deny: []string{"clone3"}},
	wantErr: `deny "clone3": it answers ENOSYS already`,
}}

func TestSeccomp(t *testing.T) {
	for _, tc := range seccompCases {
		t.Run(tc.name, func(t *testing.T) {
			docker, oci, err := Seccomp(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Seccomp(%+v) error = %v, want it to contain %q", tc.in, err, tc.wantErr)
				}
				if docker != nil || oci != nil {
					t.Errorf("Seccomp(%+v) returned a profile with its error", tc.in)
				}
				return
			}
			if err != nil {
				t.Fatalf("Seccomp(%+v): %v", tc.in, err)
			}
			checkSeccomp(t, tc.in, docker, oci)
			for _, want := range []struct {
				state string
				names []string
			}{{"plain", tc.plain}, {"filtered", tc.filtered}, {"eperm", tc.eperm}, {"enosys", tc.enosys}} {
				for _, n := range want.names {
					if got := seccompState(oci, n); got != want.state {
						t.Errorf("%s: got %s, want %s", n, got, want.state)
					}
				}
			}
			if tc.filtered != nil && len(tc.filtered) == 0 {
				for _, r := range oci.Syscalls {
					if len(r.Args) > 0 {
						t.Errorf("rule %v has argument filters, want none", r.Names)
					}
				}
			}
		})
	}
}

// seccompState says how the profile treats one syscall (see seccompCases).
func seccompState(p *specs.LinuxSeccomp, name string) string {
	var states []string
	for _, r := range p.Syscalls {
		if !slices.Contains(r.Names, name) {
			continue
		}
		switch {
		case r.Action == specs.ActAllow && len(r.Args) == 0:
			states = append(states, "plain")
		case r.Action == specs.ActAllow:
			states = append(states, "filtered")
		case r.Action == specs.ActErrno && r.ErrnoRet != nil && *r.ErrnoRet == 1 && len(r.Args) > 0:
			states = append(states, "eperm-filtered")
		case r.Action == specs.ActErrno && r.ErrnoRet != nil && *r.ErrnoRet == 1:
			states = append(states, "eperm")
		case r.Action == specs.ActErrno && r.ErrnoRet != nil && *r.ErrnoRet == 38:
			states = append(states, "enosys")
		default:
			states = append(states, "other:"+string(r.Action))
		}
	}
	states = slices.Compact(states)
	if slices.Equal(states, []string{"filtered", "eperm-filtered"}) {
		return "sealed" // allowed with some arguments, EPERM with the others (memfd_create)
	}
	switch len(states) {
	case 0:
		return "enosys" // the default action
	case 1:
		return states[0]
	}
	return "mixed:" + strings.Join(states, ",")
}

// checkSeccomp checks what must hold for every compiled profile.
func checkSeccomp(t *testing.T, in SeccompInput, docker []byte, oci *specs.LinuxSeccomp) {
	t.Helper()
	if oci.DefaultAction != specs.ActErrno || oci.DefaultErrnoRet == nil || *oci.DefaultErrnoRet != 38 {
		t.Errorf("default action = %s %v, want SCMP_ACT_ERRNO 38", oci.DefaultAction, oci.DefaultErrnoRet)
	}
	if diff := cmp.Diff([]specs.Arch{specs.ArchX86_64}, oci.Architectures); diff != "" {
		t.Errorf("architectures (-want +got):\n%s", diff)
	}
	// Every name is in exactly one state: plain, filtered (possibly several
	// rules), EPERM or ENOSYS.
	seen := make(map[string]string)
	for i, r := range oci.Syscalls {
		if len(r.Names) == 0 || !slices.IsSorted(r.Names) || len(slices.Compact(slices.Clone(r.Names))) != len(r.Names) {
			t.Errorf("rule %d names %v: want non-empty, sorted, no duplicates", i, r.Names)
		}
		for _, n := range r.Names {
			state := seccompState(oci, n)
			if strings.HasPrefix(state, "mixed") || strings.HasPrefix(state, "other") {
				t.Errorf("%s: %s", n, state)
			}
			seen[n] = state
		}
	}
	last := oci.Syscalls[len(oci.Syscalls)-1]
	if last.Action != specs.ActErrno || last.ErrnoRet == nil || *last.ErrnoRet != 1 {
		t.Errorf("last rule = %s %v, want the EPERM rule", last.Action, last.ErrnoRet)
	}
	if first := oci.Syscalls[0]; first.Action != specs.ActAllow || len(first.Args) != 0 {
		t.Errorf("first rule = %s with %d args, want the plain allow rule", first.Action, len(first.Args))
	}
	allowed := slices.Contains(in.Allow, CloneNamespaces)
	for _, n := range seccompFloor {
		if !slices.Contains(in.Allow, n) && seen[n] != "eperm" {
			t.Errorf("floor syscall %s: got %q, want eperm", n, seen[n])
		}
	}
	for _, n := range in.Deny {
		if seen[n] != "eperm" {
			t.Errorf("denied syscall %s: got %q, want eperm", n, seen[n])
		}
	}
	for _, n := range in.Allow {
		if n != CloneNamespaces && seen[n] != "plain" {
			t.Errorf("allowed syscall %s: got %q, want plain", n, seen[n])
		}
	}
	if want := "sealed"; !slices.Contains(in.Allow, "memfd_create") && !slices.Contains(in.Deny, "memfd_create") && seen["memfd_create"] != want {
		t.Errorf("memfd_create: got %q, want %s (only with MFD_NOEXEC_SEAL)", seen["memfd_create"], want)
	}
	if allowed && (seen["clone"] != "plain" || seen["clone3"] != "plain") {
		t.Errorf("clone_namespaces: clone %q, clone3 %q, want plain", seen["clone"], seen["clone3"])
	}

	// Deterministic: byte-identical on a second call.
	again, oci2, err := Seccomp(in)
	if err != nil || !bytes.Equal(docker, again) {
		t.Errorf("second call: err %v, output equal %t", err, bytes.Equal(docker, again))
	}
	if diff := cmp.Diff(oci, oci2); diff != "" {
		t.Errorf("second call OCI (-first +second):\n%s", diff)
	}

	// Docker's JSON: two-space indent, trailing newline, fully resolved, archMap
	// with x86_64 alone.
	if !bytes.HasPrefix(docker, []byte("{\n  \"defaultAction\"")) || !bytes.HasSuffix(docker, []byte("}\n")) {
		t.Errorf("docker JSON framing: %.40q ... %q", docker, docker[max(0, len(docker)-8):])
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(docker, &raw); err != nil {
		t.Fatalf("docker JSON: %v", err)
	}
	var keys []string
	for k := range raw {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if diff := cmp.Diff([]string{"archMap", "defaultAction", "defaultErrnoRet", "syscalls"}, keys); diff != "" {
		t.Errorf("docker JSON top-level keys (-want +got):\n%s", diff)
	}
	if got, want := string(raw["archMap"]), `[{"architecture":"SCMP_ARCH_X86_64","subArchitectures":[]}]`; compactJSON(t, got) != want {
		t.Errorf("archMap = %s, want %s", got, want)
	}
	for _, word := range []string{"includes", "excludes", "minKernel", "SCMP_ARCH_X86\"", "SCMP_ARCH_X32"} {
		if bytes.Contains(docker, []byte(word)) {
			t.Errorf("docker JSON contains %q, want it fully resolved", word)
		}
	}

	// Compare profiles after resolution: what moby's loader (dockerd's code
	// path) makes of the JSON must be exactly the OCI profile we return.
	loaded, err := seccomp.LoadProfile(string(docker), &specs.Spec{Process: &specs.Process{Capabilities: &specs.LinuxCapabilities{}}})
	if err != nil {
		t.Fatalf("seccomp.LoadProfile: %v", err)
	}
	want := *oci
	if runtime.GOARCH != "amd64" {
		want.Architectures = nil // the loader keeps only the host's archMap entry
	}
	if diff := cmp.Diff(&want, loaded); diff != "" {
		t.Errorf("loaded Docker JSON differs from the OCI profile (-oci +loaded):\n%s", diff)
	}
}

func compactJSON(t *testing.T, s string) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(s)); err != nil {
		t.Fatalf("compact %q: %v", s, err)
	}
	return b.String()
}

func TestSeccompIncluded(t *testing.T) {
	admin := map[string]bool{"CAP_SYS_ADMIN": true}
	kernel := &seccomp.KernelVersion{Kernel: 4, Major: 8}
	tests := []struct {
		name     string
		inc, exc *seccomp.Filter
		caps     map[string]bool
		wantKept bool
	}{
		{name: "unconditional", wantKept: true},
		{name: "includes amd64", inc: &seccomp.Filter{Arches: []string{"amd64", "x32"}}, wantKept: true},
		{name: "includes x86 only", inc: &seccomp.Filter{Arches: []string{"x86"}}},
		{name: "includes arm", inc: &seccomp.Filter{Arches: []string{"arm", "arm64"}}},
		{name: "excludes amd64", exc: &seccomp.Filter{Arches: []string{"amd64"}}},
		{name: "excludes s390", exc: &seccomp.Filter{Arches: []string{"s390", "s390x"}}, wantKept: true},
		{name: "includes cap held", inc: &seccomp.Filter{Caps: []string{"CAP_SYS_ADMIN"}}, caps: admin, wantKept: true},
		{name: "includes cap missing", inc: &seccomp.Filter{Caps: []string{"CAP_SYS_ADMIN"}}},
		{name: "includes two caps, one held", inc: &seccomp.Filter{Caps: []string{"CAP_SYS_ADMIN", "CAP_BPF"}}, caps: admin},
		{name: "excludes cap held", exc: &seccomp.Filter{Caps: []string{"CAP_SYS_ADMIN"}}, caps: admin},
		{name: "excludes cap missing", exc: &seccomp.Filter{Caps: []string{"CAP_SYS_ADMIN"}}, wantKept: true},
		{name: "includes MinKernel", inc: &seccomp.Filter{MinKernel: kernel}},
		{name: "excludes MinKernel", exc: &seccomp.Filter{MinKernel: kernel}},
		{name: "empty filters", inc: &seccomp.Filter{}, exc: &seccomp.Filter{}, wantKept: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := &seccomp.Syscall{Includes: tc.inc, Excludes: tc.exc}
			if got := seccompIncluded(r, tc.caps); got != tc.wantKept {
				t.Errorf("seccompIncluded(includes %+v, excludes %+v, caps %v) = %t, want %t", tc.inc, tc.exc, tc.caps, got, tc.wantKept)
			}
		})
	}
}

func TestSeccompDoesNotAlias(t *testing.T) {
	_, a, err := Seccomp(SeccompInput{})
	if err != nil {
		t.Fatal(err)
	}
	*a.DefaultErrnoRet = 99
	a.Syscalls[0].Names[0] = "mutated"
	for _, r := range a.Syscalls {
		if len(r.Args) > 0 {
			r.Args[0].Value = 12345
		}
	}
	docker, b, err := Seccomp(SeccompInput{})
	if err != nil {
		t.Fatal(err)
	}
	checkSeccomp(t, SeccompInput{}, docker, b)
}

func splitList(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

func FuzzSeccompInput(f *testing.F) {
	for _, tc := range seccompCases {
		f.Add(strings.Join(tc.in.Capabilities, ","), strings.Join(tc.in.Allow, ","), strings.Join(tc.in.Deny, ","))
	}
	f.Fuzz(func(t *testing.T, caps, allow, deny string) {
		in := SeccompInput{Capabilities: splitList(caps), Allow: splitList(allow), Deny: splitList(deny)}
		docker, oci, err := Seccomp(in)
		if err != nil {
			if docker != nil || oci != nil || !strings.HasPrefix(err.Error(), "compile seccomp: ") {
				t.Fatalf("Seccomp(%+v) = profile %t, error %v", in, oci != nil, err)
			}
			return
		}
		checkSeccomp(t, in, docker, oci)
	})
}

// BenchmarkSeccomp compiles bash's profile and reports the ratio to a named
// baseline measured in the same run: building moby's default profile and
// encoding it, the least any compiler from that profile must do. (The baseline
// is timed by hand: testing.Benchmark inside a benchmark would deadlock.)
func BenchmarkSeccomp(b *testing.B) {
	base := seccompBaseline()
	in := SeccompInput{Capabilities: []string{"CAP_NET_BIND_SERVICE"}, Allow: bashAllow, Deny: []string{"getpid"}}
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		if _, _, err := Seccomp(in); err != nil {
			b.Fatal(err)
		}
		n++
	}
	b.ReportMetric(float64(b.Elapsed())/float64(n)/base, "x-baseline")
}

// seccompBaseline returns the baseline's nanoseconds per operation.
var seccompBaseline = sync.OnceValue(func() float64 {
	start, n := time.Now(), 0
	for ; time.Since(start) < 200*time.Millisecond; n++ {
		if _, err := json.MarshalIndent(seccomp.DefaultProfile(), "", "  "); err != nil {
			panic(err)
		}
	}
	return float64(time.Since(start)) / float64(n)
})

// TestEveryCompiledProfileSealsMemfd reads the profiles the default policy ships (compiled/,
// what the engine loads): every component may create a memfd only with MFD_NOEXEC_SEAL, so no
// component can execute one (Landlock does not cover memfds; docs/architecture.md, "Memfd exec").
func TestEveryCompiledProfileSealsMemfd(t *testing.T) {
	files, err := filepath.Glob("../../compiled/*/seccomp.json")
	if err != nil || len(files) < 7 {
		t.Fatalf("compiled profiles: %v (%d found, want one per component)", err, len(files))
	}
	want := sealedMemfd()
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var prof seccomp.Seccomp
		if err := json.Unmarshal(data, &prof); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		var got []specs.LinuxSyscall
		for _, r := range prof.Syscalls {
			if slices.Contains(r.Names, "memfd_create") {
				got = append(got, r.LinuxSyscall)
			}
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("%s: memfd_create rules differ from MFD_NOEXEC_SEAL only (-want +got):\n%s", f, d)
		}
	}
}
