package sidedoor

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestExecDoors(t *testing.T) {
	ctx := context.Background()
	sh := "/bin/sh"
	if got, _ := Exec(sh, "-c", "exit 0")(ctx); got != "executed" {
		t.Errorf("Exec(sh) = %q, want executed", got)
	}
	if got, _ := Exec(sh, "-c", "exit 3")(ctx); got != "exit 3" {
		t.Errorf("Exec(sh exit 3) = %q", got)
	}
	if got, _ := Exec("/nowhere/sh")(ctx); got != "ENOENT" {
		t.Errorf("Exec(missing) = %q, want ENOENT", got)
	}
	plain := filepath.Join(t.TempDir(), "notexec")
	os.WriteFile(plain, []byte("#!/bin/sh\n"), 0o644)
	if got, _ := Exec(plain)(ctx); got != "EACCES" {
		t.Errorf("Exec(a file without x bits) = %q, want EACCES", got)
	}
	dir := t.TempDir()
	if got, _ := CopyExec(sh, dir, "-c", "exit 0")(ctx); got != "executed" {
		t.Errorf("CopyExec(sh) = %q, want executed", got)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("CopyExec left %d files", len(entries))
	}
	if got, _ := CopyExec(sh, filepath.Join(dir, "missing"))(ctx); !strings.HasPrefix(got, "create ") {
		t.Errorf("CopyExec into a missing folder = %q", got)
	}
}

func TestOnlyEntryAndTempFile(t *testing.T) {
	dir := t.TempDir()
	if got, _ := OnlyEntry(dir, "agent")(context.Background()); got != "agent only" {
		t.Errorf("empty folder: %q", got)
	}
	os.Mkdir(filepath.Join(dir, "agent"), 0o755)
	if got, _ := OnlyEntry(dir, "agent")(context.Background()); got != "agent only" {
		t.Errorf("own folder: %q", got)
	}
	os.Mkdir(filepath.Join(dir, "kms"), 0o755)
	if got, note := OnlyEntry(dir, "agent")(context.Background()); got != "others visible" || note != "agent, kms" {
		t.Errorf("another role: %q %q", got, note)
	}
	if got, _ := OnlyEntry(filepath.Join(dir, "none"), "agent")(context.Background()); got != "ENOENT" {
		t.Errorf("missing folder: %q", got)
	}
	p, err := TempFile("x-*.pem", "content")
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(p)
	if b, _ := os.ReadFile(p); string(b) != "content" {
		t.Errorf("TempFile wrote %q", b)
	}
}
