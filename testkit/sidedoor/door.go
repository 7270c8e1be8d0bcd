// Package sidedoor is the vocabulary of the side-door suite (docs/architecture.md, "The wall"): an attempt to get
// out of a container (Door) with the outcomes that count as refused for the right reason, the
// JSON line it reports (Result, which the e2e suite decodes), how errors are named (Kind), and
// the small clients attempts are made with: a dial, a DNS query, a request through an HTTP
// proxy, a program run.
//
// It decides nothing about a policy and proves nothing by itself: a Door is only as good as
// its expected outcomes, and it runs only the attempts it is given, from where it runs.
package sidedoor

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// NetTimeout bounds each network attempt; no door waits longer for one answer.
const NetTimeout = 2 * time.Second

// DefaultLimit is how long a Door may take when it sets no Limit.
const DefaultLimit = 3 * time.Second

// Door is one attempt. Expected lists the outcomes, separated by "|", that count as refused for
// the right reason; anything else (a success, or a refusal of another kind) fails it. Why says
// what the door would give an attacker.
type Door struct {
	Name, Expected, Why string
	Limit               time.Duration // DefaultLimit when zero
	Try                 func(ctx context.Context) (got, note string)
}

// Result is one output line.
type Result struct {
	Door     string `json:"door"`
	Expected string `json:"expected"`
	Got      string `json:"got"`
	OK       bool   `json:"ok"`
	Reason   string `json:"reason"`
}

// Summary is the last output line's value, under the key "summary".
type Summary struct {
	Passed int `json:"passed"`
	Failed int `json:"failed"`
}

// Group is doors tried together, Par at a time.
type Group struct {
	Doors []Door
	Par   int
}

// Report tries each group in turn, writes one JSON line per result in the order of the doors,
// then {"summary": ...}, and returns the summary; the error is the first failed write.
func Report(ctx context.Context, w io.Writer, groups ...Group) (Summary, error) {
	enc := json.NewEncoder(w)
	var sum Summary
	var werr error
	for _, g := range groups {
		for _, r := range TryAll(ctx, g.Doors, g.Par) {
			if r.OK {
				sum.Passed++
			} else {
				sum.Failed++
			}
			werr = cmp.Or(werr, enc.Encode(r))
		}
	}
	return sum, cmp.Or(werr, enc.Encode(map[string]Summary{"summary": sum}))
}

// Judge compares what an attempt got with what the door expects.
func (d Door) Judge(got, note string) Result {
	reason := d.Why
	if note != "" {
		reason += " (" + note + ")"
	}
	return Result{Door: d.Name, Expected: d.Expected, Got: got, OK: OneOf(d.Expected, got), Reason: reason}
}

// OneOf reports whether got is one of the "|"-separated outcomes.
func OneOf(outcomes, got string) bool { return slices.Contains(strings.Split(outcomes, "|"), got) }

// TryAll tries doors, up to par at a time, each under its own limit, and returns their results
// in the order of doors. A door that panics fails; the others go on.
func TryAll(ctx context.Context, doors []Door, par int) []Result {
	out := make([]Result, len(doors))
	sem := make(chan struct{}, max(par, 1))
	var wg sync.WaitGroup
	for i, d := range doors {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			defer func() {
				if p := recover(); p != nil {
					out[i] = d.Judge("panic", fmt.Sprint(p))
				}
			}()
			ctx, cancel := context.WithTimeout(ctx, cmp.Or(d.Limit, DefaultLimit))
			defer cancel()
			out[i] = d.Judge(d.Try(ctx))
		})
	}
	wg.Wait()
	return out
}

// Kind names an error the way doors expect it: an errno name (ENETUNREACH), "timeout",
// "no-such-host", "dns-timeout", "dns-failure", "EOF", "ok" for nil, or "error: <text>".
func Kind(err error) string {
	var dnsErr *net.DNSError
	var errno unix.Errno
	var ne net.Error
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &dnsErr):
		switch {
		case dnsErr.IsNotFound:
			return "no-such-host"
		case dnsErr.IsTimeout:
			return "dns-timeout"
		}
		return "dns-failure"
	case errors.As(err, &errno):
		if name := unix.ErrnoName(errno); name != "" {
			return name
		}
		return "errno " + strconv.Itoa(int(errno))
	case errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, context.DeadlineExceeded),
		errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "EOF"
	}
	return "error: " + err.Error()
}

// Errno is a door whose attempt is one call: its error's Kind, or "succeeded".
func Errno(name, expected, why string, call func() error) Door {
	return Door{Name: name, Expected: expected, Why: why, Try: func(context.Context) (string, string) {
		if err := call(); err != nil {
			return Kind(err), ""
		}
		return "succeeded", ""
	}}
}

// Deadline is when a read or write inside a door must give up: the door's own deadline.
func Deadline(ctx context.Context) time.Time {
	if d, ok := ctx.Deadline(); ok {
		return d
	}
	return time.Now().Add(NetTimeout)
}

// Fields parses a child process's report, space-separated key=value pairs; a later value of a
// key replaces an earlier one.
func Fields(out string) map[string]string {
	m := map[string]string{}
	for _, f := range strings.Fields(out) {
		if k, v, ok := strings.Cut(f, "="); ok {
			m[k] = v
		}
	}
	return m
}

// Command runs a program with the current environment plus env and names the outcome: its
// trimmed standard output, "exit N", or the Kind of a failure to start. note is the last line
// of its standard error.
func Command(ctx context.Context, env []string, name string, args ...string) (got, note string) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	note = lines[len(lines)-1]
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		return "exit " + strconv.Itoa(exit.ExitCode()), note
	case err != nil:
		return Kind(err), note
	}
	return strings.TrimSpace(string(out)), note
}
