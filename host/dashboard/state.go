package dashboard

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/sharness-ai/sharness/internal/audit"
	"github.com/sharness-ai/sharness/internal/gate"
)

// Log is one audit log to show: a file and, when known from where it was found (a project's
// volume), the component it must belong to.
type Log struct {
	File      string `json:"file"`
	Component string `json:"component"`
}

// state is what GET /api/state answers and the page renders.
type state struct {
	Now           time.Time `json:"now"`
	ReadOnly      string    `json:"read_only,omitempty"`
	Policy        Policy    `json:"policy"`
	SessionCA     string    `json:"session_ca,omitempty"`
	SessionCAFrom string    `json:"session_ca_from,omitempty"`
	Problems      []string  `json:"problems"` // a source that failed: the logs are then unverified, or the requests incomplete
	Logs          []chain   `json:"logs"`
	Pending       []pending `json:"pending"`
}

// chain is one log's status and its latest decisions, newest first.
type chain struct {
	Component string          `json:"component"`
	File      string          `json:"file"`
	Status    string          `json:"status"` // ok, failed or unverified
	Detail    string          `json:"detail"`
	Failures  []audit.Finding `json:"failures"`
	Notices   []audit.Finding `json:"notices"`
	Events    []event         `json:"events"`
}

// event is one decision. Signed is false for a line no verified checkpoint covers yet.
type event struct {
	Time        time.Time         `json:"time"`
	Line        int               `json:"line"`
	Action      string            `json:"action"`
	Decision    string            `json:"decision"`
	Reason      string            `json:"reason"`
	Caller      string            `json:"caller"`
	Destination string            `json:"destination"`
	Fields      map[string]string `json:"fields"`
	Signed      bool              `json:"signed"`
}

// pending is a request waiting for the operator. Session says whether a session approval may
// cover it (tier once).
type pending struct {
	gate.Request
	Session bool `json:"session"`
}

// cached is a log's chain as last read, valid while the file and the trust are unchanged.
type cached struct {
	size  int64
	mod   time.Time
	trust string
	c     chain
}

// snapshot reads every source. A failed source is a problem on the page, never a crash.
func (d *Dashboard) snapshot() state {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := state{Now: d.cfg.Now().UTC(), ReadOnly: d.cfg.ReadOnly, Policy: d.cfg.Policy, Problems: []string{}, Logs: []chain{}, Pending: []pending{}}
	logs, err := d.cfg.Logs()
	if err != nil {
		s.Problems = append(s.Problems, "audit logs: "+err.Error())
	}
	var tr *audit.Trust
	if len(logs) > 0 {
		trust, from, err := d.cfg.Trust(logs)
		if err != nil {
			s.Problems = append(s.Problems, "audit logs shown unverified: "+err.Error())
		} else {
			tr, s.SessionCA, s.SessionCAFrom = &trust, audit.CAHash(trust.CA), from
		}
	}
	seen := map[string]string{}
	for _, l := range logs {
		c := d.chain(l, tr)
		if other, dup := seen[c.Component]; dup && c.Component != "" {
			c.Status, c.Detail = "failed", "a second log of component "+c.Component+" (the first is "+other+")"
		}
		seen[c.Component] = l.File
		s.Logs = append(s.Logs, c)
	}
	dirs, err := d.cfg.GateDirs()
	if err != nil {
		s.Problems = append(s.Problems, "pending approvals: "+err.Error())
	}
	for _, dir := range dirs {
		reqs, err := gate.List(dir)
		if errors.Is(err, gate.ErrNotOpened) {
			continue // the volume of a component that has not started
		}
		if err != nil {
			s.Problems = append(s.Problems, fmt.Sprintf("gate directory %s: %v", dir, err))
		}
		for _, r := range reqs {
			s.Pending = append(s.Pending, pending{r, r.Tier == gate.Once})
		}
	}
	slices.SortStableFunc(s.Pending, func(a, b pending) int { return a.Created.Compare(b.Created) })
	for i, p := range s.Problems {
		s.Problems[i] = printable(p)
	}
	return s
}

// chain reads one log, verified against tr (nil: its structure only), from the cache when
// neither the file nor the trust changed.
func (d *Dashboard) chain(l Log, tr *audit.Trust) chain {
	key := ""
	if tr != nil {
		key = audit.CAHash(tr.CA) + " " + tr.CASHA256 + " " + tr.Policy
	}
	c := chain{Component: l.Component, File: l.File, Failures: []audit.Finding{}, Notices: []audit.Finding{}, Events: []event{}}
	st, err := os.Stat(l.File)
	if err != nil {
		c.Status, c.Detail = "failed", fmt.Sprintf("no log (%v): the component never started, or the log was deleted", err)
		return c
	}
	if old, ok := d.cache[l.File]; ok && old.size == st.Size() && old.mod.Equal(st.ModTime()) && old.trust == key {
		return old.c
	}
	f, err := os.Open(l.File)
	if err != nil {
		c.Status, c.Detail = "failed", err.Error()
		return c
	}
	defer f.Close()
	var own *audit.Trust
	if tr != nil {
		t := *tr
		t.Component, t.AllowRunning = l.Component, true // the stack runs: an unsigned tail is listed
		own = &t
	}
	rep, err := audit.Scan(f, own, func(e audit.Entry) {
		c.Events = append(c.Events, event{Time: e.Time, Line: e.Line, Action: printable(e.Action), Decision: printable(e.Decision),
			Reason: printable(e.Reason), Caller: printable(e.Caller), Destination: printable(e.Destination), Fields: printableMap(e.Fields)})
		if len(c.Events) > 2*d.cfg.Events {
			c.Events = slices.Delete(c.Events, 0, len(c.Events)-d.cfg.Events)
		}
	})
	c.Events = c.Events[max(0, len(c.Events)-d.cfg.Events):]
	slices.Reverse(c.Events)
	c.Component = cmp.Or(l.Component, rep.Component)
	for _, f := range rep.Failures {
		c.Failures = append(c.Failures, audit.Finding{Line: f.Line, Reason: printable(f.Reason)})
	}
	for _, f := range rep.Notices {
		c.Notices = append(c.Notices, audit.Finding{Line: f.Line, Reason: printable(f.Reason)})
	}
	switch {
	case err != nil && !errors.Is(err, audit.ErrInvalid):
		c.Status, c.Detail = "failed", printable(err.Error())
	case len(rep.Failures) > 0:
		c.Status, c.Detail = "failed", fmt.Sprintf("line %d: %s", c.Failures[0].Line, c.Failures[0].Reason)
	case tr == nil:
		c.Status, c.Detail = "unverified", fmt.Sprintf("%d lines, structure only: no trust to verify against", rep.Lines)
	case rep.Final:
		c.Status, c.Detail = "ok", fmt.Sprintf("%d lines, ends with its shutdown checkpoint", rep.Lines)
	default:
		c.Status, c.Detail = "ok", fmt.Sprintf("%d lines, running, signed through line %d", rep.Lines, rep.SignedThrough)
	}
	for i := range c.Events {
		c.Events[i].Signed = c.Status == "ok" && c.Events[i].Line <= rep.SignedThrough
	}
	d.cache[l.File] = cached{st.Size(), st.ModTime(), key, c}
	return c
}

// printable keeps what a component logged (partly the agent's words: a host, a path) from
// misleading the reader: text with control characters or bidirectional overrides
// (CVE-2021-42574) is shown quoted. The page escapes it as well (textContent, html/template).
func printable(s string) string {
	if strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
		return strconv.QuoteToGraphic(s)
	}
	return s
}

func printableMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[printable(k)] = printable(v)
	}
	return out
}
