package restrict

import (
	"strings"

	golandlock "github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"

	"github.com/sharness-ai/sharness/policies/landlock"
)

// levels are go-landlock's presets, each handling every right of its ABI: a domain is made at
// the kernel's level (capped at the highest the library knows), so every right the kernel can
// enforce is handled and a rule it cannot make fails instead of being dropped.
var levels = []golandlock.Config{golandlock.V1, golandlock.V2, golandlock.V3, golandlock.V4, golandlock.V5,
	golandlock.V6, golandlock.V7, golandlock.V8, golandlock.V9, golandlock.V10, golandlock.V11}

// Sets of file rights, before they are cut to a level.
const (
	fileRead  = ll.AccessFSReadFile
	dirRead   = ll.AccessFSReadFile | ll.AccessFSReadDir
	fileExec  = fileRead | ll.AccessFSExecute
	dirExec   = dirRead | ll.AccessFSExecute
	fileWrite = ll.AccessFSWriteFile | ll.AccessFSTruncate
	dirWrite  = dirRead | fileWrite | ll.AccessFSRemoveDir | ll.AccessFSRemoveFile | ll.AccessFSMakeDir |
		ll.AccessFSMakeReg | ll.AccessFSMakeSym | ll.AccessFSMakeFifo | ll.AccessFSMakeSock | ll.AccessFSRefer
	device      = fileRead | fileWrite | ll.AccessFSIoctlDev
	resolveUnix = ll.AccessFSResolveUnix
)

// domainRules is the configuration at the kernel's level and the rules of d: everything
// readable (and, from the ABI that handles it, every pathname socket reachable: the Workload API
// socket is one); d.Exec executable (the ones present); d.Write writable, never executable (each
// must exist: a missing one fails the domain); the device files; TCP
// bind and connect as d says, connect unhandled with AnyConnect.
func domainRules(d landlock.Domain, kernel int) (golandlock.Config, []golandlock.Rule) {
	cfg := levels[min(kernel, len(levels))-1]
	if d.Mode == landlock.BestEffort {
		cfg = cfg.BestEffort()
	}
	fs := cfg.HandledAccessFS
	if d.AnyConnect {
		cfg.HandledAccessNet &^= ll.AccessNetConnectTCP
	}
	// UDP (go-landlock's ABI 8 rights, where a kernel has them) is not the domain's business:
	// DNS and the stack's network decide it.
	cfg.HandledAccessNet &= ll.AccessNetBindTCP | ll.AccessNetConnectTCP
	rules := []golandlock.Rule{golandlock.PathAccess(fs&(dirRead|resolveUnix), "/")}
	// An exec entry the image lacks grants nothing: one policy may list the binaries of several
	// images (the demo agent's and Claude Code's).
	for _, x := range d.Exec {
		if strings.HasSuffix(x, "/") {
			rules = append(rules, golandlock.PathAccess(fs&dirExec, x).IgnoreIfMissing())
		} else {
			rules = append(rules, golandlock.PathAccess(fs&fileExec, x).IgnoreIfMissing())
		}
	}
	rules = append(rules, golandlock.PathAccess(fs&dirWrite, d.Write...))
	for _, dev := range landlock.Devices {
		rights := fs & device
		if dev == "/dev/pts" {
			rights = fs & (device | ll.AccessFSReadDir)
		}
		rules = append(rules, golandlock.PathAccess(rights, dev).IgnoreIfMissing())
	}
	if cfg.HandledAccessNet&ll.AccessNetBindTCP != 0 {
		for _, p := range d.Bind {
			rules = append(rules, golandlock.BindTCP(p))
		}
	}
	if cfg.HandledAccessNet&ll.AccessNetConnectTCP != 0 {
		for _, p := range d.Connect {
			rules = append(rules, golandlock.ConnectTCP(p))
		}
	}
	return cfg, rules
}
