//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/sharness-ai/sharness/testkit/loadgen"
)

// envSoak turns TestSoak on (hack/soak.sh sets it): a minute of load, then a minute of quiet, is
// longer than .ci/run's budget leaves. SHARNESS_SOAK_OUT names a file for the results as JSON.
const (
	envSoak    = "SHARNESS_SOAK"
	envSoakOut = "SHARNESS_SOAK_OUT"
)

// soakConfig is issue 22's soak, each number overridable by SHARNESS_SOAK_<NAME> (a smaller
// machine, a quicker look): 60 s of 1,000 tunnel workers through net, 100 llm streams, 20 bash
// calls with large outputs and fs writes in a loop.
func soakConfig() loadgen.Config {
	n := func(name string, def int) int {
		if v, err := strconv.Atoi(os.Getenv("SHARNESS_SOAK_" + name)); err == nil {
			return v
		}
		return def
	}
	return loadgen.Config{Duration: time.Duration(n("SECONDS", 60)) * time.Second,
		Tunnels: n("TUNNELS", 1000), Streams: n("STREAMS", 100), Shell: n("SHELL", 20), FSWriters: n("FS", 2),
		BulkBytes: n("BULK_BYTES", 4<<20), StreamWords: n("STREAM_WORDS", 300), StreamPace: n("STREAM_PACE_MS", 10),
		ShellBytes: n("SHELL_BYTES", 1<<20), Backoff: time.Second, OpTimeout: 60 * time.Second}
}

// soakResult is what TestSoak writes to SHARNESS_SOAK_OUT.
type soakResult struct {
	Date      string              `json:"date"`
	LoadAvg   string              `json:"loadavg_after"`
	Load      *loadgen.Report     `json:"load"`
	Idle      map[string]holding  `json:"idle"`
	Peak      map[string]holding  `json:"peak"`
	After     map[string]holding  `json:"after_load"`
	Settled   map[string]holding  `json:"settled"`
	Decisions decisions           `json:"decisions"`
	Verified  bool                `json:"audit_verified"`
	Problems  []string            `json:"problems"`
	Limits    map[string][2]int64 `json:"limits"`
}

// TestSoak runs issue 22's soak on the real stack: the load generator in a one-off agent
// container (testkit/loadgen), every component measured on the host before, during and a minute
// after, and the audit record verified and counted at the end. It fails on any failure the
// load generator could not explain (a refusal by policy or at net's caps is an answer, not a
// failure), a fail-open, a limit hit (memory, pids), descriptors that do not come back to
// within 10 % (and a few) of idle (threads are reported, not held: see below), a log that does
// not verify, a count of net's decisions for the agent that is not the count of CONNECTs it sent
// (less the dials the run's end cut), and llm or bash refused at a cap while the agent floods net.
func TestSoak(t *testing.T) {
	if os.Getenv(envSoak) != "1" {
		t.Skip("the soak takes three minutes: hack/soak.sh runs it (" + envSoak + "=1)")
	}
	cfg := soakConfig()
	s, _ := withKey(t, "SHARNESS_AI_POLICY_HASH="+policyHash(t, repoRoot(t)))
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Duration+10*time.Minute)
	defer cancel()
	res := soakResult{Date: time.Now().UTC().Format(time.RFC3339), Idle: map[string]holding{}, After: map[string]holding{},
		Settled: map[string]holding{}, Limits: map[string][2]int64{}}
	problem := func(format string, args ...any) {
		t.Errorf(format, args...)
		res.Problems = append(res.Problems, fmt.Sprintf(format, args...))
	}
	defer func() {
		if out := os.Getenv(envSoakOut); out != "" {
			b, _ := json.MarshalIndent(res, "", "  ")
			if err := os.WriteFile(out, b, 0o644); err != nil {
				t.Errorf("%s: %v", envSoakOut, err)
			}
		}
	}()
	// Warm every path once (kms's first unwrap, bash's first sandbox), then let it settle.
	warm := cfg
	warm.Duration, warm.Tunnels, warm.Streams, warm.Shell, warm.FSWriters = 5*time.Second, 10, 2, 1, 1
	warmRep := runLoad(t, ctx, s, warm)
	time.Sleep(10 * time.Second)
	for _, c := range loadComponents {
		res.Idle[c] = hold(t, ctx, s, c)
	}
	sm := startSampler(ctx, s, time.Second)
	res.Load = runLoad(t, ctx, s, cfg)
	res.Peak = sm.finish()
	for _, c := range loadComponents {
		h := hold(t, ctx, s, c)
		res.After[c] = h
		p := res.Peak[c]
		p.MemPeak, p.MemLimit, p.MemFailures, p.OOMKills, p.PidsLimit, p.PidsRefused = h.MemPeak, h.MemLimit, h.MemFailures, h.OOMKills, h.PidsLimit, h.PidsRefused
		res.Peak[c] = p
	}
	settle := time.Minute
	if v, err := strconv.Atoi(os.Getenv("SHARNESS_SOAK_SETTLE_SECONDS")); err == nil {
		settle = time.Duration(v) * time.Second
	}
	time.Sleep(settle)
	for _, c := range loadComponents {
		res.Settled[c] = hold(t, ctx, s, c)
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		res.LoadAvg = string(b)
	}

	// What the agent saw: every answer explained.
	for kind, st := range res.Load.Kinds {
		if st.Outcomes[loadgen.Failed] > 0 {
			problem("%s: %d of %d failed: %v (net's accept queues dropped %d connection attempts in the run)", kind, st.Outcomes[loadgen.Failed], st.Ops, st.Errors, res.Settled["net"].ListenDrops-res.Idle["net"].ListenDrops)
		}
		if st.Outcomes[loadgen.Open] > 0 {
			problem("%s: %d requests the policy refuses went through (fail-open): %v", kind, st.Outcomes[loadgen.Open], st.Errors)
		}
	}
	want := map[string]int{loadgen.KindNew: cfg.Tunnels, loadgen.KindKeepAlive: cfg.Tunnels, loadgen.KindBulk: cfg.Tunnels,
		loadgen.KindRefused: cfg.Tunnels, loadgen.KindStream: cfg.Streams, loadgen.KindShell: cfg.Shell, loadgen.KindFS: cfg.FSWriters}
	for kind, n := range want {
		st := res.Load.Kinds[kind]
		outcome := loadgen.OK
		if kind == loadgen.KindRefused {
			outcome = loadgen.Policy
		}
		if n > 0 && (st == nil || st.Outcomes[outcome] == 0) {
			problem("%s: no %s answer in the whole run: %+v", kind, outcome, st)
		}
	}
	// Limits held: no memory limit hit, no fork refused, no OOM kill.
	for _, c := range loadComponents {
		p := res.Peak[c]
		res.Limits[c] = [2]int64{p.MemLimit, p.PidsLimit}
		if p.MemFailures > 0 || p.OOMKills > 0 || p.PidsRefused > 0 {
			problem("%s hit a limit under load: memory %d/%d bytes, %d hits, %d OOM kills, %d forks refused", c, p.MemPeak, p.MemLimit, p.MemFailures, p.OOMKills, p.PidsRefused)
		}
		// No leak: back to within 10 % of idle (and a few, for what a quiet Go program keeps).
		i, z := res.Idle[c], res.Settled[c]
		if z.FDs > i.FDs+i.FDs/10+4 {
			problem("%s holds %d descriptors a minute after the load, %d when idle: a leak (%v; TCP %v; UDP %d)", c, z.FDs, i.FDs, z.FDKinds, z.TCP, z.UDP)
		}
		// Threads are not held to idle: the Go runtime keeps the OS threads a burst made (it
		// never exits an idle M), so they say nothing of goroutines, which no component
		// exposes. Descriptors are the leak that shows from outside.
	}
	// The record: every log verifies, and net recorded one decision per CONNECT the agent sent
	// (the refusals at its caps among them, also those it shed without an answer).
	out, ok := verifyRunning(t, ctx, s)
	res.Verified = ok
	if !ok {
		problem("audit verify after the soak:\n%s", out)
	}
	res.Decisions = countDecisions(t, ctx)
	var connects, capped, shed int64
	for _, r := range []*loadgen.Report{warmRep, res.Load} {
		for _, kind := range []string{loadgen.KindNew, loadgen.KindKeepAlive, loadgen.KindBulk, loadgen.KindRefused} {
			if st := r.Kinds[kind]; st != nil {
				connects += st.Connects
				capped += st.Outcomes[loadgen.Cap]
				shed += st.Outcomes[loadgen.Shed]
			}
		}
	}
	agent := 0
	for k, n := range res.Decisions.NetRule {
		if len(k) > 6 && k[:6] == "agent/" {
			agent += n
		}
	}
	// A dial the run's end cut after the kernel connected it is net's decision (a refusal at
	// its caps, or a tunnel without a ClientHello) but no CONNECT the agent counted: at most
	// one per worker, of the warm-up's and of the soak's.
	inFlight := int64(warm.Tunnels + cfg.Tunnels)
	if int64(agent) < connects || int64(agent) > connects+inFlight {
		problem("net recorded %d decisions for the agent, which sent %d CONNECTs (warm-up and soak; up to %d more dials cut by the run's end)", agent, connects, inFlight)
	}
	if got := int64(res.Decisions.NetRule["agent/conn-limit"]); got < capped+shed {
		problem("net recorded %d conn-limit refusals for the agent; the agent saw %d answered and %d shed", got, capped, shed)
	}
	// Every other refusal in the record is one the agent saw, or one the run's end cut: a
	// request in flight when the load stopped (at most one per worker of that kind, of the
	// warm-up's and of the soak's), which the component refuses once its caller is gone.
	for _, k := range []struct {
		component, action, kind string
		workers                 int
	}{
		{"llm", "request", loadgen.KindStream, warm.Streams + cfg.Streams},
		{"kms", "unwrap", loadgen.KindStream, warm.Streams + cfg.Streams},
		{"fs", "fs.write", loadgen.KindFS, warm.FSWriters + cfg.FSWriters},
	} {
		var saw int64
		for _, r := range []*loadgen.Report{warmRep, res.Load} {
			if st := r.Kinds[k.kind]; st != nil {
				saw += st.Outcomes[loadgen.Policy]
			}
		}
		if n := int64(res.Decisions.Lines[k.component][k.action+"/deny"]); n > saw+int64(k.workers) {
			problem("%s refused %d %s requests, %d more than the agent saw refused and more than the %d in flight at the run's end: %v", k.component, n, k.action, n-saw, k.workers, res.Decisions.Denied)
		}
	}
	// Per-caller fairness: the agent held its cap and was refused past it, while llm's streams
	// and bash's sandboxes, each a caller of its own, kept their share: none refused at a cap.
	if res.Decisions.NetRule["agent/conn-limit"] == 0 && cfg.Tunnels > 128 {
		problem("the agent's %d tunnel workers never met net's per-caller cap: the caps were not exercised", cfg.Tunnels)
	}
	for _, caller := range []string{"llm", "bash"} { // "hosts": the rule of a host on the caller's list
		if n := res.Decisions.NetRule[caller+"/conn-limit"] + res.Decisions.NetRule[caller+"/tunnel-limit"]; n > 0 {
			problem("net refused %s %d times at its caps while the agent flooded it: no fair share", caller, n)
		}
		if res.Decisions.NetRule[caller+"/hosts"] == 0 {
			problem("net allowed %s nothing during the soak", caller)
		}
	}
	b, _ := json.MarshalIndent(res, "", "  ")
	t.Logf("soak result:\n%s", b)
}
