package pbp

import (
	"fmt"
	"slices"
	"strings"
)

// designEdges is the design's edge matrix (docs/architecture.md, "The wall" and "The model path
// and custody"): every other pair of kinds has no path. The agent (app) reaches the services;
// llm reaches kms for its key and net for the model; bash reaches net; net reaches kms. kms and
// fs open no connection, and the launcher is on no edge: it serves identities on sockets.
var designEdges = map[[2]Kind]bool{
	{KindApp, KindNet}: true, {KindApp, KindLLM}: true, {KindApp, KindBash}: true, {KindApp, KindFS}: true,
	{KindLLM, KindKMS}: true, {KindLLM, KindNet}: true,
	{KindBash, KindNet}: true,
	{KindNet, KindKMS}:  true,
}

func designEdge(from, to Kind) bool { return designEdges[[2]Kind{from, to}] }

func designEdgesText() string {
	var s []string
	for _, from := range Kinds {
		for _, to := range Kinds {
			if designEdge(from, to) {
				s = append(s, string(from)+"→"+string(to))
			}
		}
	}
	return "allowed: " + strings.Join(s, ", ")
}

// designCaps lists the only capabilities a kind may ever be given; everything else (SYS_ADMIN,
// NET_RAW, SYS_PTRACE, ...) is forbidden whatever the layers say.
var designCaps = map[Kind][]string{
	KindNet: {"CAP_NET_BIND_SERVICE"},
	// kms locks all its memory (mlockall), so that no key is ever swapped out; CAP_IPC_LOCK lifts
	// the memlock limit for that, which an engine without CAP_SYS_RESOURCE cannot raise.
	KindKMS: {"CAP_IPC_LOCK"},
}

// designSyscalls lists the syscalls of the compiler's floor a kind may re-allow: only bash makes
// namespaces, for its per-command sandboxes.
var designSyscalls = map[Kind][]string{
	KindBash: {"clone_namespaces", "mount", "pivot_root", "setns", "umount2", "unshare"},
}

// writableUnder is the writable mount (tmpfs, read-write volume, read-write workspace) that holds
// path x or lies beneath folder x, or "".
func writableUnder(c *Component, x string) string {
	var rw []string
	for _, t := range c.Tmpfs {
		rw = append(rw, t.Path)
	}
	for _, v := range c.Volumes {
		if !v.ReadOnly {
			rw = append(rw, v.Target)
		}
	}
	if c.Workspace == "rw" {
		rw = append(rw, WorkspaceDir)
	}
	for _, w := range rw {
		if within(x, w) || strings.HasSuffix(x, "/") && within(w, strings.TrimSuffix(x, "/")) {
			return w
		}
	}
	return ""
}

// within says whether p is dir or beneath it.
func within(p, dir string) bool {
	p = strings.TrimSuffix(p, "/")
	return p == dir || strings.HasPrefix(p, dir+"/")
}

// checkDesign applies the rules no layer can override.
func checkDesign(c *Component, where func(field string) *Error) error {
	for _, cp := range c.Capabilities {
		if !slices.Contains(designCaps[c.Kind], cp) {
			e := where("process.capabilities")
			e.Msg = fmt.Sprintf("capability %s is forbidden for kind %s (allowed: %v)", cp, c.Kind, designCaps[c.Kind])
			return e
		}
	}
	for _, sc := range c.SyscallAllow {
		if !slices.Contains(designSyscalls[c.Kind], sc) {
			e := where("syscalls.allow")
			e.Msg = fmt.Sprintf("syscall %s may not be re-allowed for kind %s (allowed: %v)", sc, c.Kind, designSyscalls[c.Kind])
			return e
		}
	}
	if c.Landlock == LandlockPerCommand && c.Kind != KindBash {
		e := where("process.landlock")
		e.Msg = fmt.Sprintf("per_command is for kind bash only (its sandboxes confine each command); %s is kind %s", c.Name, c.Kind)
		return e
	}
	for _, x := range c.Exec {
		if w := writableUnder(c, x); w != "" {
			e := where("process.exec")
			e.Msg = fmt.Sprintf("%s is on the writable mount %s: nothing a component can write may be executable", x, w)
			return e
		}
	}
	if c.Egress && c.Kind != KindNet {
		e := where("network.egress")
		e.Msg = fmt.Sprintf("only kind net may be on the egress network; %s is kind %s", c.Name, c.Kind)
		return e
	}
	b := c.Business
	for _, blk := range []struct {
		kind Kind
		set  bool
	}{{KindNet, b.Net != nil}, {KindLLM, b.LLM != nil}, {KindKMS, b.KMS != nil}, {KindBash, b.Bash != nil}, {KindFS, b.FS != nil}} {
		if blk.set && blk.kind != c.Kind {
			e := where("business." + string(blk.kind))
			e.Msg = fmt.Sprintf("rules for kind %s given to %s, which is kind %s", blk.kind, c.Name, c.Kind)
			return e
		}
	}
	return nil
}
