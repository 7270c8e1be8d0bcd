package restrict

// Landlock's system calls (the same numbers on every architecture) and their ABI, from the
// kernel's include/uapi/linux/landlock.h.
const (
	sysCreateRuleset = 444
	sysAddRule       = 445
	sysRestrictSelf  = 446

	createRulesetVersion = 1 << 0
	rulePathBeneath      = 1
	ruleNetPort          = 2
	restrictSelfTSync    = 1 << 3 // ABI 8: every thread of the process
	prSetNoNewPrivs      = 38
	oPath                = 0x200000 // O_PATH on amd64 and arm64, which package syscall does not name
)

// rulesetAttr is struct landlock_ruleset_attr (its first three fields: the helper asks for no
// quiet rights).
type rulesetAttr struct {
	handledFS, handledNet, scoped uint64
}

// pathBeneathAttr is struct landlock_path_beneath_attr, which is packed: the kernel reads its 12
// bytes, which Go lays out the same way (the padding after parentFD is not read).
type pathBeneathAttr struct {
	access   uint64
	parentFD int32
}

// netPortAttr is struct landlock_net_port_attr.
type netPortAttr struct {
	access, port uint64
}

// File rights (LANDLOCK_ACCESS_FS_*).
const (
	fsExecute = 1 << iota
	fsWriteFile
	fsReadFile
	fsReadDir
	fsRemoveDir
	fsRemoveFile
	fsMakeChar
	fsMakeDir
	fsMakeReg
	fsMakeSock
	fsMakeFifo
	fsMakeBlock
	fsMakeSym
	fsRefer
	fsTruncate
	fsIoctlDev
	fsResolveUnix
)

// Network rights (LANDLOCK_ACCESS_NET_*) and scopes (LANDLOCK_SCOPE_*).
const (
	netBindTCP    = 1 << 0
	netConnectTCP = 1 << 1
	scopeAll      = 1<<0 | 1<<1 // abstract unix sockets, signals
)

// level is what one Landlock ABI handles. A domain is made at the kernel's level (capped at the
// highest listed here), so every right the kernel can enforce is handled and a rule it cannot
// make fails instead of being dropped: go-landlock's V1 to V11 presets, which the helper used
// before it made the domain itself (TestLevels holds the two equal).
type level struct{ fs, net, scoped uint64 }

var levels = []level{
	1:  {fs: 1<<13 - 1},
	2:  {fs: 1<<14 - 1},
	3:  {fs: 1<<15 - 1},
	4:  {fs: 1<<15 - 1, net: 1<<2 - 1},
	5:  {fs: 1<<16 - 1, net: 1<<2 - 1},
	6:  {fs: 1<<16 - 1, net: 1<<2 - 1, scoped: scopeAll},
	7:  {fs: 1<<16 - 1, net: 1<<2 - 1, scoped: scopeAll},
	8:  {fs: 1<<16 - 1, net: 1<<2 - 1, scoped: scopeAll},
	9:  {fs: 1<<17 - 1, net: 1<<2 - 1, scoped: scopeAll},
	10: {fs: 1<<17 - 1, net: 1<<4 - 1, scoped: scopeAll},
	11: {fs: 1<<17 - 1, net: 1<<4 - 1, scoped: scopeAll},
}

// Sets of file rights, before they are cut to a level.
const (
	fileRead  = fsReadFile
	dirRead   = fsReadFile | fsReadDir
	fileExec  = fileRead | fsExecute
	dirExec   = dirRead | fsExecute
	fileWrite = fsWriteFile | fsTruncate
	dirWrite  = dirRead | fileWrite | fsRemoveDir | fsRemoveFile | fsMakeDir |
		fsMakeReg | fsMakeSym | fsMakeFifo | fsMakeSock | fsRefer
	device = fileRead | fileWrite | fsIoctlDev
)

// devices are the device files every domain may read and write (and ioctl, for terminals):
// policies/landlock.Devices (a test holds them equal).
var devices = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty", "/dev/ptmx", "/dev/pts", "/dev/console"}

type ruleset struct {
	fs, net, scoped uint64
	paths           []pathRule
	ports           []portRule
}

type pathRule struct {
	path          string
	access        uint64
	ignoreMissing bool
}

type portRule struct {
	access uint64
	port   uint16
}

// rules is the ruleset of d at the kernel's level: everything readable (and, from the ABI that
// handles it, every pathname socket reachable: the Workload API socket is one); d.Exec executable
// (the ones present); d.Write writable, never executable (each must exist: a missing one fails
// the domain); the device files; TCP bind and connect as d says, connect unhandled with
// AnyConnect. kernel is at least 1.
func rules(d Domain, kernel int) ruleset {
	l := levels[min(kernel, len(levels)-1)]
	r := ruleset{fs: l.fs, net: l.net, scoped: l.scoped}
	if d.AnyConnect {
		r.net &^= netConnectTCP
	}
	// UDP (ABI 10's rights, where a kernel has them) is not the domain's business: DNS and the
	// stack's network decide it.
	r.net &= netBindTCP | netConnectTCP
	fs := r.fs
	r.paths = append(r.paths, pathRule{path: "/", access: fs & (dirRead | fsResolveUnix)})
	// An exec entry the image lacks grants nothing: one policy may list the binaries of several
	// images (the demo agent's and Claude Code's).
	for _, x := range d.Exec {
		access := fs & fileExec
		if x[len(x)-1] == '/' {
			access = fs & dirExec
		}
		r.paths = append(r.paths, pathRule{path: x, access: access, ignoreMissing: true})
	}
	for _, w := range d.Write {
		r.paths = append(r.paths, pathRule{path: w, access: fs & dirWrite})
	}
	for _, dev := range devices {
		access := fs & device
		if dev == "/dev/pts" {
			access = fs & (device | fsReadDir)
		}
		r.paths = append(r.paths, pathRule{path: dev, access: access, ignoreMissing: true})
	}
	if r.net&netBindTCP != 0 {
		for _, p := range d.Bind {
			r.ports = append(r.ports, portRule{access: netBindTCP, port: p})
		}
	}
	if r.net&netConnectTCP != 0 {
		for _, p := range d.Connect {
			r.ports = append(r.ports, portRule{access: netConnectTCP, port: p})
		}
	}
	return r
}
