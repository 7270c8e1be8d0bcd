package main

import (
	"context"
	"os"
	"strings"

	"github.com/spiffe/go-spiffe/v2/workloadapi"

	"github.com/sharness-ai/sharness/testkit/sidedoor"
)

// identityRoot is compose.IdentityDir: one folder per role, mounted into that role only.
const identityRoot = "/run/sharness/identity"

func fileDoors(cfg config) []door {
	return []door{
		sidedoor.Absent("docker-socket/var-run", "the Docker API, hence the host", "/var/run/docker.sock"),
		sidedoor.Absent("docker-socket/run", "the Docker API, hence the host", "/run/docker.sock"),
		// A read-only root answers EROFS, which the kernel checks before directory permissions.
		sidedoor.Errno("rootfs-write", "EROFS", "a persistent change to the agent's image", func() error {
			return create("/.sharness-probe")
		}),
		sidedoor.Writable("proc-sys-write", "kernel settings of the container's namespaces",
			"/proc/sys/kernel/hostname", "/proc/sys/net/ipv4/ping_group_range"),
		sidedoor.Writable("sys-write", "the container's own limits and kernel settings through sysfs",
			"/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory.max", "/sys/kernel/mm/transparent_hugepage/enabled"),
		{Name: "other-identity/other-roles", Expected: "ENOENT|agent only", Why: "another role's SVID socket, hence its identity",
			Try: sidedoor.OnlyEntry(identityRoot, "agent")},
		// Landlock (the runtime shim): what the policy's exec list leaves out cannot run, a file
		// written to the workspace cannot run (Landlock refuses the execve; the shim also adds
		// noexec to the workspace bind, which compose cannot set), and no TCP port outside the
		// agent's edges can be dialled, even on loopback (without Landlock: ECONNREFUSED).
		{Name: "landlock/exec-unlisted", Expected: "EACCES", Why: "an interpreter the image carries but the policy does not list",
			Try: sidedoor.Exec("/opt/unlisted/sh", "-c", "true")},
		{Name: "landlock/exec-workspace", Expected: "EACCES", Why: "running a program the agent wrote into the workspace",
			Try: sidedoor.CopyExec("/bin/busybox", "/workspace", "true")},
		// The loader maps a program itself: Landlock's execute right (checked on execve) does not
		// apply, and only the noexec the shim adds to the workspace bind refuses the mapping.
		{Name: "shim/loader-workspace", Expected: "exit 127", Why: "a program the agent wrote into the workspace, run through the dynamic loader",
			Try: sidedoor.LoaderExec("/lib64/ld-linux-x86-64.so.2", "/usr/bin/curl", "/workspace", "--version")},
		{Name: "landlock/connect-unlisted-port", Expected: "EACCES", Why: "a TCP port off the agent's edges",
			Try: func(ctx context.Context) (string, string) { return sidedoor.Dial(ctx, "tcp", "127.0.0.1:1") }},
		{Name: "other-identity/own-socket", Expected: "agent only|no socket", Why: "an identity other than the agent's from its own socket",
			Try: ownSVID(cfg.spiffe)},
	}
}

func create(path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err == nil {
		f.Close()
		os.Remove(path)
	}
	return err
}

// ownSVID asks the agent's Workload API socket for every SVID it serves: only the agent's.
func ownSVID(endpoint string) func(context.Context) (string, string) {
	return func(ctx context.Context) (string, string) {
		path, ok := strings.CutPrefix(endpoint, "unix://")
		if _, err := os.Stat(path); !ok || err != nil {
			return "no socket", "SPIFFE_ENDPOINT_SOCKET=" + endpoint
		}
		svids, err := workloadapi.FetchX509SVIDs(ctx, workloadapi.WithAddr(endpoint))
		if err != nil {
			return "fetch: " + sidedoor.Kind(err), err.Error()
		}
		var ids []string
		only := len(svids) > 0
		for _, s := range svids {
			ids, only = append(ids, s.ID.String()), only && s.ID.Path() == "/agent"
		}
		if !only {
			return "other identities", strings.Join(ids, ", ")
		}
		return "agent only", strings.Join(ids, ", ")
	}
}
