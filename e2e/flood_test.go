//go:build e2e

package e2e

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sharness-ai/sharness/testkit/loadgen"
)

// TestFloodsFromTheAgent keeps the attacks of issue 22's attacker on the running stack, from
// the agent's seat with the agent image's own busybox:
//   - silent-mtls-connections: 140 TCP connections to net's mTLS port that never send a
//     handshake (the agent's Landlock rules allow the port). They counted as one unnamed caller
//     and filled its cap, and llm's next connection was refused before its handshake: llm
//     answered 502 upstream_unreachable. Now they count against the agent's own cap: llm,
//     restarted so that it must open a new connection, streams from the model while they are
//     held.
//   - held-large-bodies: twelve requests to llm declaring 32 MiB bodies, sent but for the last
//     byte and held. llm allocated each body and the kernel OOM-killed it for the session. Now
//     llm holds bodies within a budget: those past it wait, then are answered 503
//     overloaded_error (in llm's record), llm is not killed, and an ordinary request, which fits
//     the room left, is served meanwhile.
func TestFloodsFromTheAgent(t *testing.T) {
	root := repoRoot(t)
	s, sk := withKey(t, "SHARNESS_AI_POLICY_HASH="+policyHash(t, root))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	f := &faults{t: t, s: s, ctx: ctx, key: sk, agent: startIdleAgent(t, ctx, s)}
	if r := f.once(loadgen.KindStream); r.Outcome != loadgen.OK {
		t.Fatalf("before the floods, an llm stream is %s: %s", r.Outcome, r.Error)
	}
	// flood starts script in the idle agent, in the background; stop kills it.
	flood := func(t *testing.T, script string) (stop func()) {
		cmd := exec.CommandContext(ctx, "docker", "exec", f.agent, "/bin/busybox", "sh", "-c", script)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return func() {
			for _, p := range []string{"nc", "sleep", "head"} { // the idle agent runs none of its own
				exec.Command("docker", "exec", f.agent, "/bin/busybox", "pkill", p).Run()
			}
			cmd.Process.Kill()
			cmd.Wait()
		}
	}
	llmID, err := containerID(ctx, s, "llm")
	if err != nil {
		t.Fatal(err)
	}

	t.Run("silent-mtls-connections", func(t *testing.T) {
		before := countDecisions(t, ctx).NetRule["agent/conn-limit"]
		stop := flood(t, `mkfifo /tmp/sharness-flood; sleep 120 > /tmp/sharness-flood &
for i in $(seq 140); do /bin/busybox nc net 3129 < /tmp/sharness-flood > /dev/null 2>&1 & done; wait`)
		defer stop()
		time.Sleep(3 * time.Second)
		// The flood reached net: past the agent's cap of 128, its connections are refused as
		// the agent's.
		if after := countDecisions(t, ctx).NetRule["agent/conn-limit"]; after <= before {
			t.Fatalf("net recorded no conn-limit refusal of the agent during the flood (%d before, %d after): the flood did not reach net", before, after)
		}
		f.docker(t, "restart", "-t", "5", llmID) // llm's next request needs a new connection to net
		deadline := time.Now().Add(60 * time.Second)
		var r loadgen.Result
		for r = f.once(loadgen.KindStream); r.Outcome != loadgen.OK && time.Now().Before(deadline); r = f.once(loadgen.KindStream) {
			if strings.Contains(r.Rule+r.Error, "upstream_unreachable") {
				break // refused by net: the flood took llm's share
			}
			time.Sleep(2 * time.Second) // llm starting again
		}
		if r.Outcome != loadgen.OK {
			t.Fatalf("with the agent holding silent connections to net's mTLS port, an llm stream is %s: %s %s", r.Outcome, r.Rule, r.Error)
		}
	})

	t.Run("held-large-bodies", func(t *testing.T) {
		stop := flood(t, `i=0; while [ $i -lt 12 ]; do
( printf 'POST /v1/messages HTTP/1.1\r\nHost: llm\r\ncontent-type: application/json\r\nContent-Length: 33554432\r\n\r\n'; head -c 33554431 /dev/zero | tr '\0' ' '; sleep 60 ) | /bin/busybox nc llm 8080 > /dev/null 2>&1 &
i=$((i+1)); done; wait`)
		defer stop()
		time.Sleep(15 * time.Second) // the bodies sent, all but their last bytes; those past the budget waited bodyWait
		r := f.once(loadgen.KindStream)
		if r.Outcome != loadgen.OK {
			t.Errorf("with twelve 32 MiB bodies held, an ordinary llm stream is %s: %s %s; want it served in the room left", r.Outcome, r.Rule, r.Error)
		}
		state, _ := exec.CommandContext(ctx, "docker", "inspect", "-f", "{{.State.Running}} {{.State.OOMKilled}}", llmID).Output()
		if got := strings.TrimSpace(string(state)); got != "true false" {
			t.Fatalf("llm running, OOM-killed: %s; want true false", got)
		}
		if n := countDecisions(t, ctx).Denied["llm/request/overloaded"]; n == 0 {
			t.Errorf("llm recorded no overloaded refusal: the twelve bodies did not press on its budget")
		}
		stop()
	})
}
