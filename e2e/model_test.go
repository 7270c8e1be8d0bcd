//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// recordURL is where the offline model shows what reached it (testkit/model), from the host.
const recordURL = "http://10.214.0.11:8099/_record"

// modelDoors are the doors sharness-modelprobe -model -key-stdin must report, each refused for
// its named reason, and the allowed request answered.
var modelDoors = []string{
	"model/not-allowed", "model/tools-changed", "model/max-tokens", "model/duplicate-key", "model/case-variant-key",
	"model/unknown-field", "model/web-fetch-tool", "model/mcp-server", "model/beta", "model/malformed", "model/oversized",
	"secret/aws-key", "secret/pem-key", "secret/bearer-token",
	"secret/api-key-raw", "secret/api-key-base64", "secret/api-key-hex", "secret/api-key-url", "secret/api-key-json",
	"model/allowed",
}

// TestModelPath: the agent reaches the model only through llm, with a placeholder key; the real
// key is sealed to kms and reaches llm sealed to a one-time key. What llm must refuse is
// refused for its named reason and never reaches the model; the key is nowhere the agent can
// look; kms refuses replays, stale requests, another policy and a role without the edge; with
// kms gone llm fails closed, and it recovers when kms is back and the key is sealed to it again.
func TestModelPath(t *testing.T) {
	hash := policyHash(t, repoRoot(t))
	s, sk := withKey(t, "SHARNESS_AI_POLICY_HASH="+hash)
	k := sk.key
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	clearRecord(t)

	t.Run("doors", func(t *testing.T) {
		out, err := s.run(ctx, k.value, "--entrypoint", "/sharness-modelprobe", "agent", "-model", "-key-stdin")
		checkOnlyDoors(t, out, err, modelDoors)
	})
	t.Run("record", func(t *testing.T) {
		reqs := record(t)
		if len(reqs) == 0 {
			t.Fatal("the model recorded no request: the allowed one did not reach it")
		}
		planted := []string{"AKIAQYLPMN5HHHFPZAM2", "PRIVATE KEY", "c2lnbmF0dXJlLWZvci10ZXN0cy1vbmx5", k.value,
			base64.StdEncoding.EncodeToString([]byte(k.value)), hex.EncodeToString([]byte(k.value)), url.QueryEscape(k.value),
			strings.ReplaceAll(k.value, "-", `\\u002d`), // the probe's JSON-escaped form, as the body's JSON writes it
			"sharness-placeholder-not-a-key", "claude-3-opus", "web_fetch", "mcp.attacker.example"}
		for _, r := range reqs {
			if r.Trunc {
				t.Errorf("request %d was recorded cut short: the record cannot prove what it held", r.Seq)
			}
			for _, p := range planted {
				if strings.Contains(r.Body, p) || strings.Contains(fmt.Sprint(r.Header), p) {
					t.Errorf("request %d to %s carried %.24q…: llm let it through", r.Seq, r.Path, p)
				}
			}
			if got := headerValue(r.Header, "x-api-key"); got != "sha256:"+k.sha256 {
				t.Errorf("request %d reached the model with key %s, want the sealed key's sha256:%s", r.Seq, got, k.sha256)
			}
		}
	})
	t.Run("key-nowhere-in-agent", func(t *testing.T) { keyNowhere(t, s, ctx, k) })
	t.Run("doctor-reports-kms-hygiene", func(t *testing.T) {
		// Exit 1 only when a check failed; degraded lines are reported, not fatal.
		out, err := s.cli(ctx, "", "doctor", "--json", "-p", project)
		var rep struct {
			Checks []struct{ Name, Status, Detail string } `json:"checks"`
		}
		if jerr := json.Unmarshal(out, &rep); jerr != nil {
			t.Fatalf("sharness-ai doctor --json: %v (%v)\n%s", jerr, err, out)
		}
		seen := map[string]string{}
		for _, c := range rep.Checks {
			seen[c.Name] = c.Status
		}
		for _, name := range []string{"kms/memfd_secret", "kms/mlockall", "kms/not_dumpable", "kms/no_core"} {
			if seen[name] == "" {
				t.Errorf("doctor has no %s line: kms's memory hygiene does not reach the operator\n%s", name, out)
			}
		}
		// What needs no kernel feature must hold in the shipped container; memfd_secret must
		// work in kms wherever the host has it (the compiled seccomp profile allows it).
		for _, name := range []string{"kms/not_dumpable", "kms/no_core"} {
			if seen[name] != "ok" {
				t.Errorf("%s is %q in the running kms, want ok\n%s", name, seen[name], out)
			}
		}
		if seen["memfd_secret"] == "ok" && seen["kms/memfd_secret"] != "ok" {
			t.Errorf("the host has memfd_secret but kms runs without it (%q)\n%s", seen["kms/memfd_secret"], out)
		}
		// The policy grants kms CAP_IPC_LOCK and the shim makes it ambient: kms locks all its
		// memory on an engine that cannot raise the memlock limit (this one: no CAP_SYS_RESOURCE).
		if seen["kms/mlockall"] != "ok" {
			t.Errorf("kms/mlockall is %q in the running kms, want ok (CAP_IPC_LOCK from the policy)\n%s", seen["kms/mlockall"], out)
		}
	})
	t.Run("kms-holds-ipc-lock-alone", func(t *testing.T) {
		// What the kernel says of the running kms process, not what the spec meant: CAP_IPC_LOCK
		// (bit 14) in its effective, permitted and ambient sets and nothing else, and locked memory.
		st := kmsStatus(t, ctx, s)
		for _, set := range []string{"CapEff", "CapPrm", "CapAmb"} {
			if st[set] != fmt.Sprintf("%016x", 1<<14) {
				t.Errorf("kms's %s is %s, want CAP_IPC_LOCK alone (%016x)", set, st[set], 1<<14)
			}
		}
		if st["CapBnd"] != fmt.Sprintf("%016x", 1<<14) {
			t.Errorf("kms's bounding set is %s, want CAP_IPC_LOCK alone", st["CapBnd"])
		}
		if kb := strings.TrimSuffix(st["VmLck"], " kB"); kb == "" || kb == "0" {
			t.Errorf("kms has no locked memory (VmLck %q): mlockall did not take", st["VmLck"])
		}
	})
	t.Run("kms-doors", func(t *testing.T) {
		for _, seat := range []struct {
			role, user string
			edge       bool
			doors      []string
		}{
			{"llm", "65533:65533", true, []string{"kms/wrong-policy-hash", "kms/stale-request", "kms/replay", "kms/op-not-allowed"}},
			{"agent", "65532:65532", false, []string{"kms/without-edge"}},
		} {
			t.Run(seat.role, func(t *testing.T) {
				edge := "0"
				if seat.edge {
					edge = "1"
				}
				// runc by name: a probe in another role's seat is outside every compiled policy,
				// which the runtime shim would rightly refuse.
				out, err := exec.CommandContext(ctx, "docker", "run", "--rm", "--runtime", "runc", "--network", project+"_edge-llm-kms",
					"-v", project+"_identity-"+seat.role+":/run/sharness/identity/"+seat.role+":ro", "--user", seat.user,
					"--read-only", "--cap-drop", "ALL", "--security-opt", "no-new-privileges:true",
					"-e", "SPIFFE_ENDPOINT_SOCKET=unix:///run/sharness/identity/"+seat.role+"/agent.sock",
					"-e", "SHARNESS_PROBE_KMS=https://kms:8443", "-e", "SHARNESS_PROBE_KMS_ID=spiffe://sharness.local/kms",
					"-e", "SHARNESS_AI_POLICY="+hash, "-e", "SHARNESS_PROBE_SEAT_HAS_EDGE="+edge,
					"--entrypoint", "/sharness-modelprobe", agentImage, "-kms").CombinedOutput()
				checkOnlyDoors(t, out, err, seat.doors)
			})
		}
	})
	t.Run("kms-away-and-back", func(t *testing.T) {
		if out, err := s.compose(ctx, "kill", "kms"); err != nil {
			t.Fatalf("docker compose kill kms: %v\n%s", err, out)
		}
		out, err := s.run(ctx, "", "--entrypoint", "/sharness-modelprobe", "agent", "-call", "kms-down")
		checkOnlyDoors(t, out, err, []string{"model/call-kms-down"})
		if llm := s.logs("llm"); !strings.Contains(llm, "key_unavailable") {
			t.Errorf("llm's log does not say why it refused:\n%s", llm)
		}
		if out, err := s.compose(ctx, "start", "kms"); err != nil {
			t.Fatalf("docker compose start kms: %v\n%s", err, out)
		}
		// A new kms process is a new session identity: the key sealed to the old one is useless
		// to it, and the person seals again (docs/operator.md, "The model path": "a restarted kms").
		s.sealKey(ctx, k, sk.secrets, sk.fp)
		out, err = s.run(ctx, "", "--entrypoint", "/sharness-modelprobe", "agent", "-call", "ok")
		checkOnlyDoors(t, out, err, []string{"model/call-ok"})
	})
}

// run is `docker compose run` of a one-off container with stdin.
func (s *stack) run(ctx context.Context, stdin string, args ...string) ([]byte, error) {
	if err := s.session(ctx); err != nil { // the shim refuses every component of a project without one
		return nil, err
	}
	all := []string{"compose", "--ansi", "never", "-p", project}
	for _, f := range s.files {
		all = append(all, "-f", f)
	}
	all = append(all, append([]string{"run", "--rm", "-T", "--no-deps"}, args...)...)
	cmd := exec.CommandContext(ctx, "docker", all...)
	cmd.Env, cmd.Stdin = s.env, strings.NewReader(stdin)
	return cmd.CombinedOutput()
}

// checkOnlyDoors: the output reports exactly the wanted doors, all ok.
func checkOnlyDoors(t *testing.T, out []byte, err error, want []string) {
	t.Helper()
	r, perr := parseReport(out)
	if perr != nil {
		t.Fatalf("parse the probe's report: %v (exit: %v)\n%s", perr, err, out)
	}
	recordReport(t, r)
	seen := map[string]bool{}
	for _, d := range r.doors {
		seen[d.Door] = true
		if !d.OK {
			t.Errorf("door %q: expected %q, got %q: %s", d.Door, d.Expected, d.Got, d.Reason)
		}
	}
	for _, w := range want {
		if !seen[w] {
			t.Errorf("door %q missing from the report", w)
		}
	}
	if err != nil && !t.Failed() {
		t.Errorf("the probe failed (%v) with every door ok:\n%s", err, out)
	}
}

type recorded struct {
	Seq    int                 `json:"seq"`
	Path   string              `json:"path"`
	Header map[string][]string `json:"header"`
	Trunc  bool                `json:"body_truncated"`
	Body   string              `json:"body"`
}

func record(t *testing.T) []recorded {
	t.Helper()
	resp, err := http.Get(recordURL)
	if err != nil {
		t.Fatalf("read the model's record: %v", err)
	}
	defer resp.Body.Close()
	var rec struct {
		Requests []recorded `json:"requests"`
		Dropped  int        `json:"dropped"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&rec); err != nil {
		t.Fatalf("decode the model's record: %v", err)
	}
	if rec.Dropped != 0 {
		t.Fatalf("the model's record dropped %d requests: it cannot prove what did not arrive", rec.Dropped)
	}
	return rec.Requests
}

func clearRecord(t *testing.T) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodDelete, recordURL, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("clear the model's record: %v", err)
	}
	resp.Body.Close()
}

func headerValue(h map[string][]string, name string) string {
	for k, v := range h {
		if strings.EqualFold(k, name) && len(v) > 0 {
			return v[0]
		}
	}
	return ""
}

// keyNowhere runs an agent that talks to the model and then idles, and looks for the key, in the
// encodings a leak would take, everywhere the agent could: its environment and configuration,
// every file in its container, every process's environment and command line, and its output.
func keyNowhere(t *testing.T, s *stack, ctx context.Context, k apiKey) {
	const name = project + "-keyscan"
	exec.Command("docker", "rm", "-f", name).Run()
	t.Cleanup(func() { exec.Command("docker", "rm", "-f", name).Run() })
	if out, err := s.compose(ctx, "run", "-d", "--no-deps", "--name", name, "agent", "-idle"); err != nil {
		t.Fatalf("start an idle agent: %v\n%s", err, out)
	}
	var logs []byte
	for deadline := time.Now().Add(2 * time.Minute); !bytes.Contains(logs, []byte(`"summary"`)); time.Sleep(time.Second) {
		if time.Now().After(deadline) {
			t.Fatalf("the idle agent never finished its report:\n%s", logs)
		}
		logs, _ = exec.CommandContext(ctx, "docker", "logs", name).CombinedOutput()
	}
	if !bytes.Contains(logs, []byte(`"check":"model-stream","expected":"answered through llm","got":"streamed`)) {
		t.Fatalf("the agent did not talk to the model, so the scan would prove little:\n%s", logs)
	}
	forms := map[string]string{"raw": k.value, "base64": base64.StdEncoding.EncodeToString([]byte(k.value)), "hex": hex.EncodeToString([]byte(k.value))}
	look := func(where string, data []byte) {
		for enc, v := range forms {
			if bytes.Contains(data, []byte(v)) {
				t.Errorf("the real key (%s) is in the agent's %s", enc, where)
			}
		}
	}
	docker := func(args ...string) []byte {
		out, err := exec.CommandContext(ctx, "docker", args...).Output()
		if err != nil {
			t.Fatalf("docker %s: %v", strings.Join(args, " "), err)
		}
		return out
	}
	look("container configuration (docker inspect)", docker("inspect", name))
	look("output", logs)
	// Everything but the kernel's views (busybox tar has no --exclude).
	files := docker("exec", name, "/bin/busybox", "sh", "-c", "cd / && tar -cf - $(ls -A | grep -v -x -e proc -e sys -e dev)")
	if len(files) < 1<<20 {
		t.Fatalf("the file scan read only %d bytes: it did not see the agent's files", len(files))
	}
	look("files", files)
	// From the host: under its Landlock domain, an exec'd process may not read the environment
	// of the agent's processes (another domain), which is the point; the host sees them all.
	var procs []byte
	for _, pid := range strings.Fields(string(docker("top", name, "-eo", "pid"))) {
		if pid == "PID" {
			continue
		}
		for _, f := range []string{"environ", "cmdline"} {
			b, err := os.ReadFile("/proc/" + pid + "/" + f)
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("read the agent's process %s: %v", pid, err)
			}
			procs = append(procs, b...)
		}
	}
	if !bytes.Contains(procs, []byte("ANTHROPIC_BASE_URL=")) {
		t.Fatalf("the process scan did not see the agent's environment (%d bytes)", len(procs))
	}
	look("processes' environments and command lines", procs)
}

// kmsStatus is /proc/PID/status of the kms program in the stack's kms container, read on the host:
// the child of the engine's init (the container's first process), into which the Landlock
// helper execs kms.
func kmsStatus(t *testing.T, ctx context.Context, s *stack) map[string]string {
	t.Helper()
	id, err := s.compose(ctx, "ps", "-q", "kms")
	if err != nil {
		t.Fatalf("compose ps kms: %v\n%s", err, id)
	}
	pid, err := exec.CommandContext(ctx, "docker", "inspect", "-f", "{{.State.Pid}}", strings.TrimSpace(string(id))).Output()
	if err != nil {
		t.Fatalf("docker inspect kms: %v", err)
	}
	p := strings.TrimSpace(string(pid))
	children, err := os.ReadFile("/proc/" + p + "/task/" + p + "/children")
	if err != nil {
		t.Fatal(err)
	}
	kids := strings.Fields(string(children))
	if len(kids) != 1 {
		t.Fatalf("kms's init (pid %s) has children %v, want the kms program alone", p, kids)
	}
	data, err := os.ReadFile("/proc/" + kids[0] + "/status")
	if err != nil {
		t.Fatal(err)
	}
	st := map[string]string{}
	for _, l := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok {
			st[k] = strings.TrimSpace(v)
		}
	}
	if !strings.HasPrefix(st["Name"], "sharness-kms") {
		t.Fatalf("kms's init's child is %q, not the kms program", st["Name"])
	}
	return st
}
