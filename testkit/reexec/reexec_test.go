package reexec

import (
	"context"
	"os"
	"testing"
	"time"
)

// TestMain lets the test binary be its own re-executed child.
func TestMain(m *testing.M) {
	Init()
	os.Exit(m.Run())
}

// The attempts run here, outside any container, where nothing forbids them: the tests check
// the child protocol and the reporting, not a policy (the side-door suite does that).
func TestAttempts(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tests := []struct {
		name  string
		try   func(context.Context) (string, string)
		wants []string
	}{
		{"alive", Alive, []string{"alive"}},
		{"traceme", Traceme, []string{"succeeded", "EPERM"}},
		// Without a seccomp filter the memfd runs; a kernel without MFD_EXEC refuses it sealed.
		{"memfd execveat", MemfdExecveat, []string{"executed", "EACCES", "EINVAL"}},
		{"sealed memfd exec", SealedMemfdExec, []string{"EACCES", "memfd_create EINVAL"}},
		{"exec from a temporary folder", func(ctx context.Context) (string, string) { return TmpExec(ctx, t.TempDir()) }, []string{"executed", "EACCES"}},
		{"fork bomb without a limit", func(ctx context.Context) (string, string) { return ForkBomb(ctx, 4) }, []string{"no limit", "EAGAIN"}},
		{"fill without a limit", func(ctx context.Context) (string, string) { return Fill(ctx, t.TempDir(), 3) }, []string{"no limit"}},
		{"fill a missing folder", func(ctx context.Context) (string, string) { return Fill(ctx, "/nonexistent", 3) }, []string{"ENOENT"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, note := tt.try(ctx)
			t.Logf("got %q (%s)", got, note)
			for _, w := range tt.wants {
				if got == w {
					return
				}
			}
			t.Errorf("got %q (%s), want one of %q", got, note, tt.wants)
		})
	}
}

func TestForkBombNote(t *testing.T) {
	got, note := ForkBomb(context.Background(), 2)
	if got != "no limit" || note != "made 8 processes" {
		t.Errorf("ForkBomb(2) = %q, %q; want no limit after 8 (4 × max)", got, note)
	}
}

func TestChildErrno(t *testing.T) {
	tests := []struct {
		out, got string
	}{
		{"step=ptrace errno=1\n", "EPERM"},
		{"memfd=noexec-seal step=execveat errno=13\n", "EACCES"},
		{"step=ptrace errno=0\n", "succeeded"},
		{"executed\n", "executed"},
		{"", "child failed"},
		{"errno=x", "child failed"},
	}
	for _, tt := range tests {
		if got, _ := childErrno(tt.out, nil, nil); got != tt.got {
			t.Errorf("childErrno(%q) = %q, want %q", tt.out, got, tt.got)
		}
	}
}
