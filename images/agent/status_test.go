package main

import (
	"fmt"
	"strings"
	"testing"
)

// confinedStatus is /proc/self/status as the agent should see it in the default stack
// (abridged: fields the parser ignores are kept where they could confuse it).
const confinedStatus = `Name:	sharness-agent
Umask:	0022
State:	R (running)
Tgid:	1
Pid:	1
PPid:	0
TracerPid:	0
Uid:	65532	65532	65532	65532
Gid:	65532	65532	65532	65532
FDSize:	64
Groups:	65532 
CapInh:	0000000000000000
CapPrm:	0000000000000000
CapEff:	0000000000000000
CapBnd:	0000000000000000
CapAmb:	0000000000000000
NoNewPrivs:	1
Seccomp:	2
Seccomp_filters:	1
Speculation_Store_Bypass:	thread force mitigated
Cpus_allowed_list:	0-1
`

// hostRootStatus is an unconfined root shell on the build machine.
const hostRootStatus = `Name:	cat
Uid:	0	0	0	0
Gid:	0	0	0	0
CapInh:	0000000000000000
CapPrm:	000001fffeffffff
CapEff:	000001fffeffffff
CapBnd:	000001fffeffffff
CapAmb:	0000000000000000
NoNewPrivs:	0
Seccomp:	0
Seccomp_filters:	0
`

func TestParseStatus(t *testing.T) {
	confined := procStatus{
		uid:        [4]uint64{65532, 65532, 65532, 65532},
		gid:        [4]uint64{65532, 65532, 65532, 65532},
		noNewPrivs: 1,
		seccomp:    2,
	}
	const full = 0x000001fffeffffff
	tests := []struct {
		name    string
		text    string
		want    procStatus
		wantErr string // substring of the error; empty: no error
	}{
		{name: "confined", text: confinedStatus, want: confined},
		{name: "host root", text: hostRootStatus, want: procStatus{capEff: full, capPrm: full, capBnd: full}},
		{name: "no trailing newline", text: strings.TrimSuffix(confinedStatus, "\n"), want: confined},
		{name: "spaces instead of tabs", text: strings.ReplaceAll(confinedStatus, "\t", "  "), want: confined},
		{
			name: "distinct ids",
			text: strings.Replace(confinedStatus, "Uid:\t65532\t65532\t65532\t65532", "Uid:\t1000\t0\t1001\t1002", 1),
			want: procStatus{uid: [4]uint64{1000, 0, 1001, 1002}, gid: confined.gid, noNewPrivs: 1, seccomp: 2},
		},
		{name: "empty", text: "", wantErr: `field "Uid" missing`},
		{name: "no seccomp support", text: without(confinedStatus, "Seccomp:"), wantErr: `field "Seccomp" missing`},
		{name: "no NoNewPrivs", text: without(confinedStatus, "NoNewPrivs:"), wantErr: `field "NoNewPrivs" missing`},
		{name: "no CapBnd", text: without(confinedStatus, "CapBnd:"), wantErr: `field "CapBnd" missing`},
		{name: "repeated Uid", text: confinedStatus + "Uid:\t0\t0\t0\t0\n", wantErr: `field "Uid" repeated`},
		{name: "repeated Seccomp", text: confinedStatus + "Seccomp:\t0\n", wantErr: `field "Seccomp" repeated`},
		{name: "three uids", text: replace(confinedStatus, "Uid:", "Uid:\t1\t1\t1"), wantErr: "want 4 ids, got 3"},
		{name: "negative gid", text: replace(confinedStatus, "Gid:", "Gid:\t-1\t1\t1\t1"), wantErr: `field "Gid"`},
		{name: "uid over 32 bits", text: replace(confinedStatus, "Uid:", "Uid:\t4294967296\t1\t1\t1"), wantErr: `field "Uid"`},
		{name: "capability not hex", text: replace(confinedStatus, "CapEff:", "CapEff:\tzz"), wantErr: `field "CapEff"`},
		{name: "capability empty", text: replace(confinedStatus, "CapPrm:", "CapPrm:"), wantErr: `field "CapPrm"`},
		{name: "capability over 64 bits", text: replace(confinedStatus, "CapBnd:", "CapBnd:\t1ffffffffffffffff"), wantErr: `field "CapBnd"`},
		{name: "seccomp not a number", text: replace(confinedStatus, "Seccomp:", "Seccomp:\tfilter"), wantErr: `field "Seccomp"`},
		{name: "no_new_privs out of range", text: replace(confinedStatus, "NoNewPrivs:", "NoNewPrivs:\t256"), wantErr: `field "NoNewPrivs"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseStatus(tt.text)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("parseStatus() error = %v, want one containing %q", err, tt.wantErr)
				}
				if got != (procStatus{}) {
					t.Errorf("parseStatus() = %+v with an error, want the zero value", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseStatus() error = %v, want none", err)
			}
			if got != tt.want {
				t.Errorf("parseStatus() = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// FuzzParseStatus checks that the parser never panics and that whatever it accepts survives a
// round trip through the kernel's format.
func FuzzParseStatus(f *testing.F) {
	for _, seed := range []string{confinedStatus, hostRootStatus, "", "Uid:\t1\t2\t3\t4\n", "Seccomp:\t2"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, text string) {
		s, err := parseStatus(text)
		if err != nil {
			return
		}
		again, err := parseStatus(formatStatus(s))
		if err != nil {
			t.Fatalf("parseStatus(formatStatus(%+v)) error = %v", s, err)
		}
		if again != s {
			t.Fatalf("round trip = %+v, want %+v", again, s)
		}
	})
}

// formatStatus writes s as the kernel does.
func formatStatus(s procStatus) string {
	ids := func(v [4]uint64) string { return fmt.Sprintf("%d\t%d\t%d\t%d", v[0], v[1], v[2], v[3]) }
	return fmt.Sprintf("Uid:\t%s\nGid:\t%s\nCapPrm:\t%016x\nCapEff:\t%016x\nCapBnd:\t%016x\nNoNewPrivs:\t%d\nSeccomp:\t%d\n",
		ids(s.uid), ids(s.gid), s.capPrm, s.capEff, s.capBnd, s.noNewPrivs, s.seccomp)
}

// without removes the line starting with prefix.
func without(text, prefix string) string {
	return replace(text, prefix, "")
}

// replace replaces the whole line starting with prefix by line (dropping it if line is empty).
func replace(text, prefix, line string) string {
	var b strings.Builder
	for l := range strings.SplitSeq(text, "\n") {
		if strings.HasPrefix(l, prefix) {
			if line == "" {
				continue
			}
			l = line
		}
		b.WriteString(l + "\n")
	}
	return strings.TrimSuffix(b.String(), "\n")
}
