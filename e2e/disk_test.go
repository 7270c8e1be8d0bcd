//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// auditDisk is an audit volume on a disk of its own: a fresh ext4 filesystem in a sparse file
// on a loop device, mounted at the engine's folder for the volume before the volume exists. The
// engine then makes the volume's _data folder in it: a plain folder, not a mount, which the
// runtime shim admits as it admits any local volume (host/shim/mounts.go volumeShape), on a disk
// the test can fill to its last block or turn read-only as a failing disk turns, by the
// kernel's own error path (errors=remount-ro). Only root on the host can put a volume on such
// a disk, as a person puts /var/lib/docker on one; nothing in the compose file can.
type auditDisk struct {
	img, dir, dev string
}

// auditDiskSize is each disk's size: room for every line TestFaults makes (net's log is the
// largest, a few MiB), and small enough to fill at once.
const auditDiskSize = 64 << 20

// newAuditDisks puts the audit volume of each component on a disk of its own; the stack must
// not have created the volumes yet. When the test ends each is detached (lazily: a container
// may still hold it) before the stack's teardown removes the volumes.
func newAuditDisks(t *testing.T, ctx context.Context, components []string) map[string]*auditDisk {
	t.Helper()
	rootDir, err := exec.CommandContext(ctx, "docker", "info", "-f", "{{.DockerRootDir}}").Output()
	if err != nil {
		t.Fatalf("docker info: %v", err)
	}
	disks := map[string]*auditDisk{}
	for _, c := range components {
		name := project + "_audit-" + c
		if exec.CommandContext(ctx, "docker", "volume", "inspect", name).Run() == nil {
			t.Fatalf("volume %s exists already: the disk must be in place before the engine makes it", name)
		}
		d := &auditDisk{img: filepath.Join(t.TempDir(), "audit-"+c+".img"), dir: filepath.Join(strings.TrimSpace(string(rootDir)), "volumes", name)}
		exec.Command("umount", "-l", d.dir).Run() // a disk an interrupted run left behind
		for _, argv := range [][]string{
			{"truncate", "-s", fmt.Sprint(auditDiskSize), d.img},
			{"mkfs.ext4", "-q", "-F", "-m", "0", d.img}, // no blocks reserved for root: full is full
			{"mkdir", "-p", d.dir},
			{"mount", "-o", "loop,errors=remount-ro", d.img, d.dir},
		} {
			if out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput(); err != nil {
				t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, out)
			}
		}
		t.Cleanup(func() { exec.Command("umount", "-l", d.dir).Run() })
		dev, err := exec.CommandContext(ctx, "findmnt", "-n", "-o", "SOURCE", d.dir).Output()
		if err != nil {
			t.Fatalf("findmnt %s: %v", d.dir, err)
		}
		d.dev = strings.TrimSpace(string(dev))
		disks[c] = d
	}
	return disks
}

// fill takes every free block of the disk (as root: nothing is reserved), so the component's
// next write fails with ENOSPC.
func (d *auditDisk) fill(t *testing.T) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(d.dir, "fill"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var st syscall.Statfs_t
	if err := syscall.Statfs(d.dir, &st); err != nil {
		t.Fatal(err)
	}
	if n := int64(st.Bavail) * st.Bsize; n > 1<<20 {
		if err := syscall.Fallocate(int(f.Fd()), 0, 0, n-1<<20); err != nil {
			t.Fatalf("fallocate %d bytes in %s: %v", n, d.dir, err)
		}
	}
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				break
			}
			t.Fatalf("filling %s: %v", d.dir, err)
		}
	}
	f.Sync()
	syncDisk(t, d.dir)
}

// free removes what fill took, and commits the removal to the disk's journal at once: a failed
// disk (fail) aborts the journal, and a removal not yet committed (ext4 commits every 5 s) comes
// back with the repair, full again. On the current engine the launcher's disk-read-only
// subtest followed its volume-full within that time, and the launcher, repaired onto a full
// disk, could not write its session record.
func (d *auditDisk) free(t *testing.T) {
	t.Helper()
	if err := os.Remove(filepath.Join(d.dir, "fill")); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	syncDisk(t, d.dir)
}

// syncDisk commits everything written on the filesystem holding dir (syncfs(2)).
func syncDisk(t *testing.T, dir string) {
	t.Helper()
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Syncfs(int(f.Fd())); err != nil {
		t.Fatalf("syncfs %s: %v", dir, err)
	}
}

// fail makes the disk fail as a disk does: the kernel records a filesystem error
// (/sys/fs/ext4/DEV/trigger_fs_error), aborts the journal and, as errors=remount-ro says, turns
// the filesystem read-only, so every later write on it fails with EROFS.
func (d *auditDisk) fail(t *testing.T) {
	t.Helper()
	knob := filepath.Join("/sys/fs/ext4", filepath.Base(d.dev), "trigger_fs_error")
	if err := os.WriteFile(knob, []byte("sharness e2e: a failing disk\n"), 0o200); err != nil {
		t.Fatalf("write %s: %v", knob, err)
	}
	// Statfs does not say so (the kernel marks the filesystem's own emergency read-only state,
	// not the mount's flag): a write says so.
	probe := filepath.Join(d.dir, "probe")
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := os.WriteFile(probe, []byte("x"), 0o600)
		if errors.Is(err, syscall.EROFS) {
			return
		}
		if err == nil {
			os.Remove(probe)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s takes writes after a filesystem error (%v)", d.dir, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// repair is what the person does for a disk that failed: with the component stopped (nothing
// holds the filesystem), unmount it, check and repair it (e2fsck), and mount it again.
func (d *auditDisk) repair(t *testing.T, ctx context.Context) string {
	t.Helper()
	if out, err := exec.CommandContext(ctx, "umount", d.dir).CombinedOutput(); err != nil {
		t.Fatalf("umount %s: %v\n%s", d.dir, err, out)
	}
	out, err := exec.CommandContext(ctx, "e2fsck", "-f", "-y", d.img).CombinedOutput()
	var ee *exec.ExitError
	if err != nil && !(errors.As(err, &ee) && ee.ExitCode() == 1) { // 1: errors were corrected
		t.Fatalf("e2fsck %s: %v\n%s", d.img, err, out)
	}
	fsck := tail(string(out), 1)
	if out, err := exec.CommandContext(ctx, "mount", "-o", "loop,errors=remount-ro", d.img, d.dir).CombinedOutput(); err != nil {
		t.Fatalf("mount %s again: %v\n%s", d.dir, err, out)
	}
	dev, _ := exec.CommandContext(ctx, "findmnt", "-n", "-o", "SOURCE", d.dir).Output()
	d.dev = strings.TrimSpace(string(dev))
	return fsck
}
