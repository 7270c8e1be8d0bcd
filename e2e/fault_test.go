//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sharness-ai/sharness/testkit/loadgen"
)

// envFaultsOut names a file TestFaults writes its table of outcomes to, as JSON.
const envFaultsOut = "SHARNESS_FAULTS_OUT"

// faultBound is the longest the agent may wait for an answer while a component is away: the
// longest of its peers' timeouts (llm's kms client, 15 s; llm's TLS handshake with net, 30 s)
// and a margin. A paused component the agent calls directly cannot answer at all: the agent's
// own timeout (probeTimeout) is what ends its wait, and the fault suite says so.
const (
	faultBound   = 40 * time.Second
	probeTimeout = 35 * time.Second
	recoverBound = 90 * time.Second
	// pauseMargin is what a probe of a paused component may take past its own timeout.
	pauseMargin = 5 * time.Second
	// mcpCancelNotice is what the MCP client (bash's probe) spends after its call's context ends
	// telling the server the call was cancelled: go-sdk's notifyCancellationTimeout, which a
	// frozen bash waits out whole.
	mcpCancelNotice = 5 * time.Second
)

// target is a component broken on purpose, and the path the agent uses that crosses it.
type target struct {
	component string
	probe     string   // the loadgen kind whose one operation crosses it
	names     []string // what the agent's error must say, one of them (the component, or its rule)
}

var targets = []target{
	{"net", loadgen.KindNew, []string{"net"}},
	{"llm", loadgen.KindStream, []string{"llm"}},
	{"kms", loadgen.KindStream, []string{"key_unavailable", "kms"}},
	{"bash", loadgen.KindShell, []string{"bash"}},
	{"fs", loadgen.KindFS, []string{"fs"}},
	// The launcher last: a new launcher is a new session (its own CA), which every later
	// check would then see.
	{"launcher", loadgen.KindStream, []string{"launcher"}},
}

// faultRow is one fault's outcome: what the agent saw while it lasted, whether anything the
// policy refuses went through, what the record says, and how service came back.
type faultRow struct {
	Component string  `json:"component"`
	Fault     string  `json:"fault"`
	During    string  `json:"during"` // outcome: error, in ms
	DuringMS  float64 `json:"during_ms"`
	Named     bool    `json:"named"` // the error names the component (or its rule)
	Open      bool    `json:"fail_open"`
	Record    string  `json:"record"`
	Recovery  string  `json:"recovery"`
	RecoverS  float64 `json:"recover_s"`
	Repair    string  `json:"repair,omitempty"` // what e2fsck said of a disk that failed
	Served    int     `json:"served_before_refused,omitempty"`
}

type faults struct {
	restarted bool // the fault's restore restarted the component
	t         *testing.T
	s         *stack
	ctx       context.Context
	agent     string // a long-lived agent container the probes are exec'd in
	disks     map[string]*auditDisk
	key       sealed
	mu        sync.Mutex
	rows      []faultRow
	probes    []string // every error the agent saw, for the secret scan
}

// TestFaults breaks each component in turn while a light load runs (testkit/loadgen from the
// agent's seat): kill -9, docker restart, docker pause past its peers' timeouts, its audit
// volume filled to the last block while it runs and when it starts, and the volume's disk
// failing and turning read-only while it runs. Each audit volume is on a small disk of its own
// for this (auditDisk: the engine's volume folder on a loop device, which the shim admits as a
// plain local volume). For each it requires what issue 22 asks: the agent gets an answer within a stated bound, naming
// the component (or, where the component is frozen and answers nothing, its own timeout ends
// the wait); no request the policy refuses goes through; the audit chain verifies afterwards (or
// the component stopped deciding rather than decide unrecorded); service returns once the
// component is back, or the error says what the person must do. No key is in any error or log.
func TestFaults(t *testing.T) {
	root := repoRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	k := newAPIKey(t)
	kenv, secrets := keyEnv(t, k)
	s := newStack(t, append([]string{"SHARNESS_AI_POLICY_HASH=" + policyHash(t, root)}, kenv...)...)
	disks := newAuditDisks(t, ctx, loadComponents)
	s.upInfra(ctx)
	sk := sealed{key: k, secrets: secrets, fp: s.sealKey(ctx, k, secrets, "")}
	f := &faults{t: t, s: s, ctx: ctx, key: sk, disks: disks, agent: startIdleAgent(t, ctx, s)}
	for _, tg := range targets {
		if r := f.once(tg.probe); r.Outcome != loadgen.OK {
			t.Fatalf("before any fault, %s (through %s) is %s: %s", tg.probe, tg.component, r.Outcome, r.Error)
		}
	}

	// A light load for the whole suite: what it saw is allowed to fail (components are away),
	// never to go through where the policy refuses.
	var open atomic.Int64
	var openWhy []string
	stopLoad := make(chan struct{})
	loadDone := make(chan struct{})
	go func() {
		defer close(loadDone)
		for {
			select {
			case <-stopLoad:
				return
			default:
			}
			cfg := loadgen.Config{Duration: 20 * time.Second, Tunnels: 20, Streams: 4, Shell: 1, FSWriters: 1, BulkBytes: 256 << 10,
				StreamWords: 100, StreamPace: 10, ShellBytes: 64 << 10, Backoff: 500 * time.Millisecond, OpTimeout: probeTimeout}
			in, _ := json.Marshal(cfg)
			out, _ := s.run(ctx, string(in), "--entrypoint", "/sharness-modelprobe", "agent", "-load")
			for _, line := range bytes.Split(out, []byte("\n")) {
				var r loadgen.Report
				if json.Unmarshal(line, &r) == nil && r.Kinds != nil {
					for k, st := range r.Kinds {
						if n := st.Outcomes[loadgen.Open]; n > 0 {
							open.Add(n)
							openWhy = append(openWhy, fmt.Sprintf("%s: %v", k, st.Errors))
						}
					}
				}
			}
			if ctx.Err() != nil {
				return
			}
		}
	}()

	for _, tg := range targets {
		faultsOf := []string{"kill", "restart", "pause", "volume-full", "volume-full-at-start", "disk-read-only"}
		if tg.component == "launcher" {
			faultsOf = []string{"pause", "volume-full", "disk-read-only", "volume-full-at-start", "kill", "restart"}
		}
		for _, fault := range faultsOf {
			t.Run(tg.component+"/"+fault, func(t *testing.T) { f.run(t, tg, fault) })
		}
	}
	close(stopLoad)
	<-loadDone
	if n := open.Load(); n > 0 {
		t.Errorf("the background load saw %d requests the policy refuses go through: %v", n, openWhy)
	}
	t.Run("no-secret-in-errors-or-logs", func(t *testing.T) { f.noSecret(t) })

	var table strings.Builder
	table.WriteString("| component | fault | the agent saw | named | fail-open | record | recovery | the disk |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, r := range f.rows {
		fmt.Fprintf(&table, "| %s | %s | %s (%.1f s) | %v | %v | %s | %s (%.0f s) | %s |\n", r.Component, r.Fault, r.During, r.DuringMS/1000, r.Named, r.Open, r.Record, r.Recovery, r.RecoverS, r.Repair)
	}
	t.Logf("fault outcomes:\n%s", table.String())
	if out := os.Getenv(envFaultsOut); out != "" {
		b, _ := json.MarshalIndent(f.rows, "", "  ")
		os.WriteFile(out, b, 0o644)
		os.WriteFile(strings.TrimSuffix(out, ".json")+".md", []byte(table.String()), 0o644)
	}
}

// startIdleAgent runs an agent container that does its checks and then idles, for the probes.
func startIdleAgent(t *testing.T, ctx context.Context, s *stack) string {
	t.Helper()
	name := project + "-faults"
	exec.Command("docker", "rm", "-f", name).Run()
	t.Cleanup(func() { exec.Command("docker", "rm", "-f", name).Run() })
	if out, err := s.compose(ctx, "run", "-d", "--no-deps", "--name", name, "agent", "-idle"); err != nil {
		t.Fatalf("start an idle agent: %v\n%s", err, out)
	}
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(time.Second) {
		logs, _ := exec.CommandContext(ctx, "docker", "logs", name).CombinedOutput()
		if bytes.Contains(logs, []byte(`"summary"`)) {
			return name
		}
		if time.Now().After(deadline) {
			t.Fatalf("the idle agent never finished its report:\n%s", logs)
		}
	}
}

// once makes one operation of kind from the idle agent and returns what came back.
func (f *faults) once(kind string) loadgen.Result {
	cfg := loadgen.Config{StreamWords: 50, StreamPace: 5, ShellBytes: 256 << 10, OpTimeout: probeTimeout}
	in, _ := json.Marshal(cfg)
	cmd := exec.CommandContext(f.ctx, "docker", "exec", "-i", f.agent, "/sharness-modelprobe", "-once", kind)
	cmd.Stdin = bytes.NewReader(in)
	out, err := cmd.CombinedOutput()
	var r loadgen.Result
	for _, line := range bytes.Split(out, []byte("\n")) {
		if json.Unmarshal(line, &r) == nil && r.Outcome != "" {
			f.mu.Lock()
			f.probes = append(f.probes, r.Error)
			f.mu.Unlock()
			return r
		}
	}
	return loadgen.Result{Kind: kind, Outcome: loadgen.Failed, Error: fmt.Sprintf("the probe printed no result (%v): %s", err, out)}
}

// docker runs a docker command on the component's container.
func (f *faults) docker(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.CommandContext(f.ctx, "docker", args...).CombinedOutput(); err != nil {
		t.Fatalf("docker %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// run applies one fault to one component and checks the four outcomes.
func (f *faults) run(t *testing.T, tg target, fault string) {
	c := tg.component
	id, err := containerID(f.ctx, f.s, c)
	if err != nil {
		t.Fatal(err)
	}
	row := faultRow{Component: c, Fault: fault}
	defer func() { f.mu.Lock(); f.rows = append(f.rows, row); f.mu.Unlock() }()
	restore := func() {}
	var during loadgen.Result
	// A subtest that stops early still undoes its fault, so that the next starts on a working
	// stack: each fault's restore is set before the fault is made.
	restored := false
	defer func() {
		if !restored {
			restore()
		}
	}()
	switch fault {
	case "kill":
		f.docker(t, "kill", "-s", "KILL", id)
		during = f.once(tg.probe)
		restore = func() { f.docker(t, "start", id) }
	case "restart":
		done := make(chan struct{})
		go func() { defer close(done); exec.CommandContext(f.ctx, "docker", "restart", "-t", "5", id).Run() }()
		time.Sleep(300 * time.Millisecond) // stopping: SIGTERM sent, the grace period running
		during = f.once(tg.probe)
		restore = func() { <-done }
	case "pause":
		f.docker(t, "pause", id)
		during = f.once(tg.probe)
		restore = func() { f.docker(t, "unpause", id) }
	case "volume-full", "disk-read-only":
		// Its next write fails: ENOSPC on a full disk, EROFS on one the kernel turned
		// read-only after an error.
		disk := f.disks[c]
		restore = func() {
			// What the person does, as the refusal says: free the volume (or repair the
			// disk, which needs the component stopped), then restart the component.
			failed := during.Outcome != loadgen.OK || strings.Contains(dockerLogs(f.ctx, id), "audit log failed")
			if fault == "volume-full" {
				disk.free(t)
				if failed {
					f.docker(t, "restart", "-t", "5", id)
				}
			} else {
				f.docker(t, "stop", "-t", "5", id)
				row.Repair = disk.repair(t, f.ctx)
				f.docker(t, "start", id)
			}
			f.restarted = failed || fault == "disk-read-only"
		}
		if fault == "volume-full" {
			disk.fill(t)
		} else {
			disk.fail(t)
		}
		during, row.Served = f.untilRefused(tg)
	case "volume-full-at-start":
		// A component started on a full volume must not decide without its record: it does
		// not start (no room for its start line), or it starts on the room left in its log's
		// last block and refuses the first decision it cannot record.
		up := false
		restore = func() {
			f.disks[c].free(t)
			if up {
				f.docker(t, "restart", "-t", "5", id)
			} else {
				f.docker(t, "start", id)
			}
			f.restarted = up
		}
		f.docker(t, "stop", "-t", "5", id)
		f.disks[c].fill(t)
		start, _ := exec.CommandContext(f.ctx, "docker", "start", id).CombinedOutput()
		time.Sleep(2 * time.Second)
		running, _ := exec.CommandContext(f.ctx, "docker", "inspect", "-f", "{{.State.Running}}", id).Output()
		up = strings.TrimSpace(string(running)) == "true"
		during, row.Served = f.untilRefused(tg)
		logs := dockerLogs(f.ctx, id)
		switch {
		case !up && (!strings.Contains(logs, "audit") || !strings.Contains(logs, "no space left on device")):
			t.Errorf("%s did not start on a full audit volume without saying why (docker start: %s):\n%s", c, start, tail(logs, 20))
		case up && c != "launcher" && c != "kms" && !strings.Contains(strings.ToLower(during.Error+" "+during.Rule), "audit"):
			// (A kms started again is a new identity: the key sealed to the one before is
			// refused before anything else, and llm says key_unavailable.)
			t.Errorf("%s started on a full audit volume and did not refuse for its record: %s %s %s", c, during.Outcome, during.Rule, during.Error)
		}
		if up {
			row.Repair = "started (its start line fitted the room left in the log's last block)"
		} else {
			row.Repair = "did not start"
		}
	}
	row.During, row.DuringMS = during.Outcome, during.MS
	if row.Served > 0 {
		row.During = fmt.Sprintf("%d served (recorded in the log's last block, or the one whose line failed), then %s", row.Served, row.During)
	}
	if during.Error != "" {
		row.During += ": " + clipTo(during.Error, 240)
	}
	if during.Rule != "" {
		row.During += " [" + during.Rule + "]"
	}

	// Fail closed: the refused host stays refused (or unreachable) while the fault lasts.
	if r := f.once(loadgen.KindRefused); r.Outcome == loadgen.Open {
		row.Open = true
		t.Errorf("during %s of %s, a tunnel to the refused host went through: %s", fault, c, r.Error)
	}
	f.judgeDuring(t, tg, fault, during, &row)

	f.restarted = false
	restored = true
	restore()
	row.Recovery, row.RecoverS = f.recover(t, tg, fault)
	out, ok := verifyRunning(t, f.ctx, f.s)
	switch {
	case ok:
		row.Record = "continuous"
	case c == "launcher" && fault != "pause" && strings.Contains(out, "a log of another session"):
		// A launcher started again mints a new session CA (docs/audit.md): every log of the
		// session before fails against it, at its first line, saying so.
		row.Record = "a new session: " + clipTo(failuresOf(out), 160)
	default:
		row.Record = "broken: " + clipTo(failuresOf(out), 200)
		t.Errorf("after %s of %s the record does not verify:\n%s", fault, c, out)
	}
}

// untilRefused sends the component's probe until it is refused, at most maxServedFull times,
// and returns the refusal (or the last answer) and how many were served first. A full volume
// still has the room left in the log's last block (a block is 4 KiB; a line a few hundred
// bytes), so a component may record, and serve, a few decisions more, its background load's
// among them, before a line needs a block; then the one whose line failed is served and every
// later one refused. A failed (read-only) disk takes no line at all. The record's check after
// the fault holds every served decision to its line. The launcher decides nothing while the
// stack runs: one probe.
func (f *faults) untilRefused(tg target) (loadgen.Result, int) {
	var r loadgen.Result
	for served := 0; served < maxServedFull; served++ {
		if r = f.once(tg.probe); r.Outcome != loadgen.OK || tg.component == "launcher" {
			return r, served
		}
	}
	return r, maxServedFull
}

// maxServedFull bounds the decisions a component on a full volume may serve: more than a
// block's room holds lines, and it decides without its record.
const maxServedFull = 20

// judgeDuring holds what the agent saw while the component was away to the bounds.
func (f *faults) judgeDuring(t *testing.T, tg target, fault string, r loadgen.Result, row *faultRow) {
	text := strings.ToLower(r.Error + " " + r.Rule)
	for _, n := range tg.names {
		if strings.Contains(text, n) {
			row.Named = true
		}
	}
	full := fault == "volume-full" || fault == "disk-read-only" // the component runs on: it must refuse
	away := !full
	switch {
	case fault == "restart" && r.Outcome == loadgen.OK:
		// Served before the stop took effect, or after the start: nothing was lost.
	case tg.component == "launcher":
		// Nothing the agent does asks the launcher once every SVID is issued: its paths work.
		if r.Outcome != loadgen.OK && fault != "restart" && fault != "kill" {
			t.Errorf("with the launcher %s, %s failed: %s", fault, tg.probe, r.Error)
		}
		row.Named = r.Outcome == loadgen.OK || row.Named
	case fault == "pause" && tg.component != "kms" && strings.HasSuffix(r.Error, "timeout"):
		// A frozen component the agent calls directly answers nothing, and neither does the
		// kernel beyond the handshake: the agent's own timeout ends the wait.
		// The MCP client then waits out its cancellation notice, which the probe's time
		// includes (35.0 s on some runs, 40.04-40.1 s on others, on Debian's engine).
		row.Named = strings.Contains(r.Error, tg.component)
		bound := probeTimeout + pauseMargin
		if tg.probe == loadgen.KindShell {
			bound += mcpCancelNotice
		}
		if r.MS > float64(bound.Milliseconds()) {
			t.Errorf("%s paused: the agent waited %.0f ms, past its own timeout", tg.component, r.MS)
		}
	case r.Outcome == loadgen.OK && away:
		t.Errorf("%s %s: %s still answered ok", tg.component, fault, tg.probe)
	case r.Outcome == loadgen.OK:
		t.Errorf("%s with its audit volume %s decided %d requests in a row (%s ok): decisions without records", tg.component, fault, maxServedFull, tg.probe)
	case full && !strings.Contains(text, "audit"):
		t.Errorf("%s with a full audit volume refused without saying its record is why: %s %s", tg.component, r.Outcome, r.Error)
	case r.MS > float64(faultBound.Milliseconds()):
		t.Errorf("%s %s: the agent waited %.0f ms for %q, past the %v bound", tg.component, fault, r.MS, r.Error, faultBound)
	case !row.Named:
		t.Errorf("%s %s: the agent's error does not name the component (%v): %s %s", tg.component, fault, tg.names, r.Outcome, r.Error)
	}
}

// recover waits until the component's path works again; a kms that is new (its identity made at
// start) needs the key sealed again, as the person does (docs/operator.md), and its refusal
// must say the key is unavailable.
func (f *faults) recover(t *testing.T, tg target, fault string) (string, float64) {
	start := time.Now()
	var last loadgen.Result
	resealed := false
	for time.Since(start) < recoverBound {
		last = f.once(tg.probe)
		if last.Outcome == loadgen.OK {
			how := "by itself"
			if resealed {
				how = "after the key was sealed again"
			}
			if f.restarted && !resealed {
				how = "after the volume was freed or its disk repaired, and " + tg.component + " restarted (the person's step)"
			}
			return how, time.Since(start).Seconds()
		}
		newKMS := tg.component == "kms" && fault != "pause" // every new kms process is a new identity
		if newKMS && !resealed && strings.Contains(last.Rule+last.Error, "key_unavailable") {
			f.key.fp = f.s.sealKey(f.ctx, f.key.key, f.key.secrets, f.key.fp)
			resealed = true
			continue
		}
		time.Sleep(2 * time.Second)
	}
	t.Errorf("%s did not come back within %v of the end of %s: %s %s", tg.component, recoverBound, fault, last.Outcome, last.Error)
	return "not within " + recoverBound.String() + ": " + clipTo(last.Error, 100), time.Since(start).Seconds()
}

// noSecret scans every error the agent saw and every component's log for the sealed key, raw and
// in the encodings a leak would take.
func (f *faults) noSecret(t *testing.T) {
	k := f.key.key.value
	forms := map[string]string{"raw": k, "base64": base64.StdEncoding.EncodeToString([]byte(k)), "hex": hex.EncodeToString([]byte(k))}
	f.mu.Lock()
	seen := strings.Join(f.probes, "\n")
	f.mu.Unlock()
	for _, c := range append([]string{"agent"}, loadComponents...) {
		if c == "agent" {
			logs, _ := exec.Command("docker", "logs", f.agent).CombinedOutput()
			seen += string(logs)
			continue
		}
		if id, err := containerID(f.ctx, f.s, c); err == nil {
			seen += dockerLogs(f.ctx, id)
		}
	}
	for enc, v := range forms {
		if strings.Contains(seen, v) {
			t.Errorf("the API key (%s) is in an error the agent saw or in a component's log", enc)
		}
	}
}

func failuresOf(verifyJSON string) string {
	var logs []struct {
		File   string
		OK     bool
		Report struct {
			Failures []struct {
				Line   int
				Reason string
			}
		}
	}
	// The JSON is the first value of the output (a line on stderr may follow it).
	var wrapped struct{ Logs json.RawMessage }
	if json.NewDecoder(strings.NewReader(verifyJSON)).Decode(&wrapped) != nil || json.Unmarshal(wrapped.Logs, &logs) != nil {
		return verifyJSON
	}
	var b strings.Builder
	for _, l := range logs {
		for _, fl := range l.Report.Failures {
			fmt.Fprintf(&b, "%s:%d: %s; ", strings.TrimPrefix(filepath.Base(filepath.Dir(filepath.Dir(l.File))), project+"_"), fl.Line, fl.Reason)
		}
	}
	return b.String()
}

func clipTo(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

func tail(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

// dockerLogs is a container's output, both streams.
func dockerLogs(ctx context.Context, id string) string {
	out, _ := exec.CommandContext(ctx, "docker", "logs", id).CombinedOutput()
	return string(out)
}
