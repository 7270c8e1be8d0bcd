// Package doctor checks the host a SHarness stack runs on: the Docker engine (and the DNS leak
// of CVE-2024-29018), compose v2, the runtime registration, seccomp, user namespaces, Landlock,
// cgroups, memfd_secret, the edge address pool, the memory hygiene the running kms reports, and
// whether the running stack's policy is the hash the person supplied.
//
// This package only decides: every check is a pure function of Facts (no exec, no I/O), so each
// decision is table-tested without Docker. Package probe gathers the Facts.
//
// What it does not guarantee: a check that passes says the host can enforce a measure, not that
// a given container was started with it (the e2e suite proves that). The policy line takes the
// running stack's hash from its launcher's output (docker logs): it is the launcher's word, which
// anyone who controls the engine can fake; `sharness-ai audit verify` checks the signed record.
package doctor

import (
	"errors"

	"github.com/sharness-ai/sharness/internal/seal"
)

// Status is a check's verdict. Degraded is reported, not fatal; Fail makes doctor exit 1.
type Status string

// The verdicts.
const (
	OK       Status = "ok"
	Degraded Status = "degraded"
	Fail     Status = "fail"
	Skipped  Status = "skipped"
)

// Result is one line of the report: what was checked, the verdict, what was found and what to do.
type Result struct {
	Name   string `json:"name"`
	Status Status `json:"status"`
	Detail string `json:"detail"`
}

// Facts is everything the checks decide on, gathered once.
type Facts struct {
	Engine         Engine
	Compose        Compose
	Files          map[string]string // kernel files by path (the Path* constants); absent if unreadable
	Landlock       int               // Landlock ABI version, when LandlockErr is nil
	LandlockErr    error
	MemfdSecretErr error // nil: memfd_secret(2) worked on the host
	KMS            KMS
	Stack          Stack
	Live           Live
}

// Engine is what `docker version` and `docker info` said.
type Engine struct {
	Version         string // the server's version; empty when no engine answered
	Err             error  // why no engine answered
	Runtimes        []string
	DefaultRuntime  string
	SecurityOptions []string
	InfoErr         error // why `docker info` failed
}

// Compose is what `docker compose version` said.
type Compose struct {
	Output string
	Err    error
}

// ErrNoStack says no stack's kms has printed a bundle: there is nothing to report.
var ErrNoStack = errors.New("no stack running")

// KMS is the running kms's bundle, from its logs.
type KMS struct {
	Project string
	Bundle  *seal.Bundle
	Err     error // wraps ErrNoStack when there is no stack; anything else: an unreadable bundle
}

// Live is what the live DNS-leak probe saw.
type Live struct {
	Ran    bool
	Skip   string   // why the probe did not run
	Leaked []string // the probe's names that reached the host's loopback resolver
	Err    error    // the probe could not finish
}

// Check runs every check on f, in the order of the report.
func Check(f Facts) []Result {
	var rs []Result
	for _, c := range checks {
		if c.fn == nil {
			rs = append(rs, kmsCheck(f)...)
			continue
		}
		st, detail := c.fn(f)
		rs = append(rs, Result{c.name, st, detail})
	}
	return rs
}

// Failed lists the names of the checks that failed.
func Failed(rs []Result) []string {
	var names []string
	for _, r := range rs {
		if r.Status == Fail {
			names = append(names, r.Name)
		}
	}
	return names
}
