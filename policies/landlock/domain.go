// Package landlock is the Landlock domain a component's container runs under: what the compiler
// writes into the component's config.json (an annotation), what the runtime shim reads from the
// installed policy, and what the helper (cmd/sharness-landlock) applies to the container's process
// tree before its entrypoint runs (issue 6; the seed's "Enforcing the process tree").
//
// The domain: everything readable; executable only the policy's exec list (files, or folders
// ending in "/"); writable only the container's writable mounts and a few device files, never
// executable there; TCP bind only on the component's own ports; TCP connect only to its own
// ports, its edges' ports and DNS (53), except for net, whose every destination is its own
// per-request decision; signals and abstract unix sockets scoped to the domain where the kernel's
// ABI has those.
//
// It is pure: the types, their canonical encoding and a strict parser. What it does not
// guarantee: Landlock confines what a process may open, execute, bind and connect; it does not
// restrict UDP before ABI 8 (go-landlock's), binding an ephemeral port (port 0; measured on ABI
// 7), reads of anything the container can see, or what an allowed binary does with its rights
// (an allowed shell can still read a script from /tmp).
package landlock

import (
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/sharness-ai/sharness/internal/strictjson"
)

// Annotation is the key of the domain in a compiled config.json.
const Annotation = "ai.sharness.landlock"

// Modes, as pbp's process.landlock spells them.
// HelperPath is where the runtime shim binds the Landlock helper into a confined container
// (host/shim.HelperMount), and HealthArg the argument that makes it a health check: run by an
// exec, it enters the container's domain (the shim wraps every exec in it) and exits 0. A
// component with no health command of its own uses it (compile.HealthCommand), so that the
// engine execs into every confined container every second and the shim sees its networks again.
const (
	HelperPath = "/.sharness-landlock"
	HealthArg  = "-health"
)

const (
	Enforce    = "enforce"     // refuse to start below MinABI
	BestEffort = "best_effort" // apply what the kernel has
	PerCommand = "per_command" // no container-wide domain (bash: each command has its own)
)

// MinABI is the Landlock ABI an enforced domain needs: 4 brings TCP port rules, 5 device ioctls,
// 6 the scoping of signals and abstract unix sockets.
const MinABI = 6

// Devices are the device files every domain may read and write (and ioctl, for terminals); the
// rest of /dev is read-only to it.
var Devices = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty", "/dev/ptmx", "/dev/pts", "/dev/console"}

// DNSPort is the port of the container's resolver, for the TCP fallback of DNS.
const DNSPort = 53

// Domain is one component's Landlock domain.
type Domain struct {
	Mode       string   `json:"mode"`
	Exec       []string `json:"exec"`        // absolute files, or folders ending in "/"
	Write      []string `json:"write"`       // absolute folders: the writable mounts
	Bind       []uint16 `json:"bind"`        // TCP ports it may listen on
	Connect    []uint16 `json:"connect"`     // TCP ports it may connect to (unless AnyConnect)
	AnyConnect bool     `json:"any_connect"` // connect is not restricted (kind net: the egress)
}

// maxDomain caps an encoded domain: it travels as one command-line argument.
const maxDomain = 64 << 10

// Encode is the domain's canonical JSON (sorted lists), as the annotation and the helper's
// argument carry it.
func (d Domain) Encode() string {
	for _, l := range [][]string{d.Exec, d.Write} {
		slices.Sort(l)
	}
	for _, l := range [][]uint16{d.Bind, d.Connect} {
		slices.Sort(l)
	}
	d.Exec, d.Write = nonNil(slices.Compact(d.Exec)), nonNil(slices.Compact(d.Write))
	d.Bind, d.Connect = nonNil(slices.Compact(d.Bind)), nonNil(slices.Compact(d.Connect))
	b, _ := json.Marshal(d) // strings and integers only: it cannot fail
	return string(b)
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// Parse reads an encoded domain strictly: only the canonical encoding (Encode's: every key in its
// place and spelling, lists sorted, no space) is accepted, and a mode it does not know, relative
// or unclean paths, and port 0 are errors.
func Parse(s string) (Domain, error) {
	var d Domain
	if len(s) > maxDomain {
		return d, fmt.Errorf("landlock domain: %d bytes, more than %d", len(s), maxDomain)
	}
	if err := strictjson.Decode([]byte(s), 4, &d); err != nil {
		return Domain{}, fmt.Errorf("landlock domain: %w", err)
	}
	switch d.Mode {
	case Enforce, BestEffort, PerCommand:
	default:
		return Domain{}, fmt.Errorf("landlock domain: mode %q: want %s, %s or %s", d.Mode, Enforce, BestEffort, PerCommand)
	}
	for _, p := range slices.Concat(d.Exec, d.Write) {
		if !path.IsAbs(p) || path.Clean(p) != strings.TrimSuffix(p, "/") && p != "/" {
			return Domain{}, fmt.Errorf("landlock domain: path %q is not absolute and clean", p)
		}
	}
	for _, w := range d.Write {
		if strings.HasSuffix(w, "/") {
			return Domain{}, fmt.Errorf("landlock domain: write path %q ends in \"/\"", w)
		}
	}
	if slices.Contains(d.Bind, 0) || slices.Contains(d.Connect, 0) {
		return Domain{}, fmt.Errorf("landlock domain: port 0")
	}
	if canonical := d.Encode(); canonical != s {
		return Domain{}, fmt.Errorf("landlock domain: not in canonical form (want %.200s)", canonical)
	}
	return d, nil
}
