package sandbox

import (
	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

// MinLandlockABI is the lowest Landlock ABI a sandbox runs on without best effort: 4 brings
// TCP port rules (build's only way out is the proxy), 5 device ioctls, 6 the scoping of
// signals and abstract unix sockets to the sandbox.
const MinLandlockABI = 6

// levels are go-landlock's presets, each handling every right of its ABI. A sandbox runs
// strictly at the kernel's level, capped at the highest the library knows: rules are cut to
// what that level handles, and anything the level cannot enforce fails instead of being
// dropped. Below MinLandlockABI it runs only in best-effort mode (Plan).
var levels = []landlock.Config{landlock.V1, landlock.V2, landlock.V3, landlock.V4, landlock.V5,
	landlock.V6, landlock.V7, landlock.V8, landlock.V9, landlock.V10, landlock.V11}

// Sets of file rights, before they are cut to a level.
const (
	fsRead  = ll.AccessFSReadFile | ll.AccessFSReadDir
	fsExec  = fsRead | ll.AccessFSExecute
	fsWrite = fsRead | ll.AccessFSWriteFile | ll.AccessFSTruncate | ll.AccessFSRemoveDir | ll.AccessFSRemoveFile |
		ll.AccessFSMakeDir | ll.AccessFSMakeReg | ll.AccessFSMakeSym | ll.AccessFSMakeFifo | ll.AccessFSMakeSock | ll.AccessFSRefer
	fsDev = ll.AccessFSReadFile | ll.AccessFSWriteFile | ll.AccessFSTruncate
)

// landlockRules is the configuration at level abi (1 or more) and the sandbox's rules: the
// userland read and executable, /etc and /proc read, /tmp and a few devices writable, the
// workspace read (analyse) or writable (build), and nothing executable anywhere writable. TCP
// connect only to the proxy's port, bind nowhere; with ABI 10, UDP only to DNS (53), from
// an ephemeral port, in build.
func landlockRules(abi int, p Profile, workspace string, port uint16) (landlock.Config, []landlock.Rule) {
	c := levels[min(abi, len(levels))-1]
	fs, netw := c.HandledAccessFS, c.HandledAccessNet
	ws := fs & fsRead
	if p == Build {
		ws = fs & fsWrite
	}
	r := []landlock.Rule{
		landlock.PathAccess(fs&fsExec, "/usr", "/bin", "/lib", "/lib64", "/sbin").IgnoreIfMissing(),
		landlock.PathAccess(fs&fsRead, "/etc", "/proc"),
		landlock.PathAccess(fs&fsWrite, "/tmp"),
		landlock.PathAccess(fs&fsDev, "/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom").IgnoreIfMissing(),
		landlock.PathAccess(ws, workspace),
	}
	if p == Build && netw&ll.AccessNetConnectTCP != 0 {
		r = append(r, landlock.ConnectTCP(port))
	}
	if p == Build && netw&ll.AccessNetConnectSendUDP != 0 {
		r = append(r, landlock.BindUDP(0), landlock.ConnectSendUDP(53))
	}
	return c, r
}

// landlockABI is the kernel's Landlock ABI, 0 when it has none.
func landlockABI() int {
	v, err := ll.LandlockGetABIVersion()
	if err != nil || v < 0 {
		return 0
	}
	return v
}
