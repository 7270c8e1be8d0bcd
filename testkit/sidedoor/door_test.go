package sidedoor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

func TestJudge(t *testing.T) {
	d := Door{Name: "d", Expected: "EPERM|EACCES", Why: "why"}
	tests := []struct {
		name, got, note string
		want            Result
	}{
		{"first outcome", "EPERM", "", Result{"d", "EPERM|EACCES", "EPERM", true, "why"}},
		{"second outcome", "EACCES", "n", Result{"d", "EPERM|EACCES", "EACCES", true, "why (n)"}},
		{"success fails", "succeeded", "", Result{"d", "EPERM|EACCES", "succeeded", false, "why"}},
		{"another refusal fails", "EINVAL", "", Result{"d", "EPERM|EACCES", "EINVAL", false, "why"}},
		{"no partial match", "EPERM|EACCES", "", Result{"d", "EPERM|EACCES", "EPERM|EACCES", false, "why"}},
		{"empty fails", "", "", Result{"d", "EPERM|EACCES", "", false, "why"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, d.Judge(tt.got, tt.note)); diff != "" {
				t.Errorf("Judge (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTryAll(t *testing.T) {
	doors := []Door{
		{Name: "slow", Expected: "done", Try: func(context.Context) (string, string) { time.Sleep(20 * time.Millisecond); return "done", "" }},
		{Name: "panics", Expected: "done", Try: func(context.Context) (string, string) { panic("boom") }},
		{Name: "limited", Expected: "timeout", Limit: 10 * time.Millisecond, Try: func(ctx context.Context) (string, string) {
			<-ctx.Done()
			return Kind(ctx.Err()), ""
		}},
		{Name: "fast", Expected: "done", Try: func(context.Context) (string, string) { return "done", "" }},
	}
	for _, par := range []int{0, 1, 4} {
		got := TryAll(context.Background(), doors, par)
		var names []string
		for _, r := range got {
			names = append(names, fmt.Sprintf("%s:%v", r.Door, r.OK))
		}
		if want := "slow:true panics:false limited:true fast:true"; strings.Join(names, " ") != want {
			t.Errorf("par %d: results %v, want %s", par, names, want)
		}
		if got[1].Got != "panic" || !strings.Contains(got[1].Reason, "boom") {
			t.Errorf("panicking door = %+v", got[1])
		}
	}
}

func TestReport(t *testing.T) {
	var buf bytes.Buffer
	ok := Door{Name: "ok", Expected: "x", Try: func(context.Context) (string, string) { return "x", "" }}
	bad := Door{Name: "bad", Expected: "x", Try: func(context.Context) (string, string) { return "y", "" }}
	sum, err := Report(context.Background(), &buf, Group{Doors: []Door{ok, bad}, Par: 2}, Group{Doors: []Door{ok}})
	if err != nil || sum != (Summary{Passed: 2, Failed: 1}) {
		t.Fatalf("Report = %+v, %v", sum, err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	want := []string{
		`{"door":"ok","expected":"x","got":"x","ok":true,"reason":""}`,
		`{"door":"bad","expected":"x","got":"y","ok":false,"reason":""}`,
		`{"door":"ok","expected":"x","got":"x","ok":true,"reason":""}`,
		`{"summary":{"passed":2,"failed":1}}`,
	}
	if diff := cmp.Diff(want, lines); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
	var r Result // the e2e suite decodes the lines with Result
	if err := json.Unmarshal([]byte(lines[1]), &r); err != nil || r.OK || r.Got != "y" {
		t.Errorf("decode = %+v, %v", r, err)
	}
	if _, err := Report(context.Background(), failingWriter{}, Group{Doors: []Door{ok}}); err == nil {
		t.Error("a failed write is not reported")
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, io.ErrClosedPipe }

func TestKind(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"nil", nil, "ok"},
		{"errno", unix.EPERM, "EPERM"},
		{"wrapped errno", &net.OpError{Op: "dial", Err: os.NewSyscallError("connect", unix.ENETUNREACH)}, "ENETUNREACH"},
		{"path error", &os.PathError{Op: "open", Path: "/", Err: unix.EROFS}, "EROFS"},
		{"unknown errno", unix.Errno(4095), "errno 4095"},
		{"deadline", os.ErrDeadlineExceeded, "timeout"},
		{"context deadline", fmt.Errorf("x: %w", context.DeadlineExceeded), "timeout"},
		{"not found", &net.DNSError{IsNotFound: true}, "no-such-host"},
		{"dns timeout", &net.DNSError{IsTimeout: true}, "dns-timeout"},
		{"dns failure", &net.DNSError{Err: "server misbehaving"}, "dns-failure"},
		{"eof", fmt.Errorf("read: %w", io.EOF), "EOF"},
		{"unexpected eof", io.ErrUnexpectedEOF, "EOF"},
		{"other", errors.New("tls: bad record"), "error: tls: bad record"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Kind(tt.err); got != tt.want {
				t.Errorf("Kind(%v) = %q, want %q", tt.err, got, tt.want)
			}
		})
	}
}

func TestFields(t *testing.T) {
	got := Fields("mib=16\nmib=32\nmemfd=exec step=execveat errno=1\njunk =x y=\n")
	want := map[string]string{"mib": "32", "memfd": "exec", "step": "execveat", "errno": "1", "": "x", "y": ""}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Fields (-want +got):\n%s", diff)
	}
}

func TestErrnoAndCommand(t *testing.T) {
	ctx := context.Background()
	if got, _ := Errno("e", "EPERM", "", func() error { return unix.EPERM }).Try(ctx); got != "EPERM" {
		t.Errorf("Errno door got %q", got)
	}
	if got, _ := Errno("e", "EPERM", "", func() error { return nil }).Try(ctx); got != "succeeded" {
		t.Errorf("Errno door got %q", got)
	}
	tests := []struct {
		args      []string
		got, note string
	}{
		{[]string{"sh", "-c", "echo ' hello '; echo warn >&2"}, "hello", "warn"},
		{[]string{"sh", "-c", "echo one >&2; echo two >&2; exit 60"}, "exit 60", "two"},
		{[]string{"/nonexistent/program"}, "ENOENT", ""},
	}
	for _, tt := range tests {
		got, note := Command(ctx, []string{"X=1"}, tt.args[0], tt.args[1:]...)
		if got != tt.got || note != tt.note {
			t.Errorf("Command(%q) = %q, %q; want %q, %q", tt.args, got, note, tt.got, tt.note)
		}
	}
}

func TestFileDoors(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o400); err != nil {
		t.Fatal(err)
	}
	if got, _ := Absent("a", "", filepath.Join(dir, "none")).Try(ctx); got != "absent" {
		t.Errorf("Absent of a missing path = %q", got)
	}
	if got, _ := Absent("a", "", file).Try(ctx); got != "present, ECONNREFUSED" {
		t.Errorf("Absent of a file = %q", got)
	}
	if got, _ := Writable("w", "", filepath.Join(dir, "none")).Try(ctx); got != "absent" {
		t.Errorf("Writable of nothing = %q", got)
	}
	want := "EACCES"
	if os.Geteuid() == 0 {
		want = "opened for writing" // root ignores the mode
	}
	if got, note := Writable("w", "", filepath.Join(dir, "none"), file).Try(ctx); got != want || note != file {
		t.Errorf("Writable = %q, %q; want %q, %q", got, note, want, file)
	}
}
