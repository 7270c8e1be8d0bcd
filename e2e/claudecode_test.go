//go:build e2e

package e2e

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// Claude Code as the agent (compose/claude-code.yml, images/claude-code, docs/claude-code.md).
const (
	claudeImage   = "sharness/claude-code:dev"
	claudeOverlay = "compose/claude-code.yml"
)

var (
	claudeBuildOnce sync.Once
	claudeBuildErr  error
	claudeBuildOut  []byte
)

// buildClaudeCode builds the image with hack/build-claude-code.sh, once per run, so that the
// tests see what images/claude-code and the pin hold now. The script checks the package's
// integrity and that claude --version runs in the image.
func buildClaudeCode(t *testing.T) {
	t.Helper()
	requireEngine(t)
	claudeBuildOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, filepath.Join(repoRoot(t), "hack", "build-claude-code.sh"))
		claudeBuildOut, claudeBuildErr = cmd.CombinedOutput()
	})
	if claudeBuildErr != nil {
		t.Fatalf("hack/build-claude-code.sh: %v\n%s", claudeBuildErr, claudeBuildOut)
	}
}

// composeConfig is `docker compose config` of the repository's compose files, as JSON.
func composeConfig(t *testing.T, root string, files ...string) map[string]any {
	t.Helper()
	args := []string{"compose", "--ansi", "never", "-p", project}
	for _, f := range files {
		args = append(args, "-f", filepath.Join(root, f))
	}
	cmd := exec.Command("docker", append(args, "config", "--format", "json")...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "SHARNESS_AI_POLICY_HASH=sha256:"+strings.Repeat("0", 64))
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			out = ee.Stderr
		}
		t.Fatalf("docker compose %v config: %v\n%s", files, err, out)
	}
	var cfg map[string]any
	if err := json.Unmarshal(out, &cfg); err != nil {
		t.Fatalf("docker compose config: %v", err)
	}
	return cfg
}

func object(v any, key string) map[string]any {
	m, _ := v.(map[string]any)
	o, _ := m[key].(map[string]any)
	return o
}

func stringList(v any) []string {
	var out []string
	l, _ := v.([]any)
	for _, x := range l {
		out = append(out, fmt.Sprint(x))
	}
	return out
}

// TestClaudeCodeOverlay: compose/claude-code.yml over the generated docker-compose.yml changes
// the agent's image, entrypoint, command, working folder, terminal, environment (adding only) and
// tmpfs (adding only, never executable) and nothing else: every other service, network and
// volume is as generated, and the agent keeps its read-only root, its uid, no capabilities,
// no-new-privileges, its seccomp profile, its limits, its networks and its workspace mounts.
func TestClaudeCodeOverlay(t *testing.T) {
	requireEngine(t)
	root := repoRoot(t)
	base := composeConfig(t, root, "docker-compose.yml")
	merged := composeConfig(t, root, "docker-compose.yml", claudeOverlay)

	for _, top := range []string{"networks", "volumes", "secrets", "configs"} {
		if !reflect.DeepEqual(base[top], merged[top]) {
			t.Errorf("the overlay changes the top-level %s:\nbase:   %v\nmerged: %v", top, base[top], merged[top])
		}
	}
	baseSvcs, mergedSvcs := object(base, "services"), object(merged, "services")
	if got, want := slices.Sorted(maps.Keys(mergedSvcs)), slices.Sorted(maps.Keys(baseSvcs)); !slices.Equal(got, want) {
		t.Errorf("services: got %v, want %v", got, want)
	}
	for name, svc := range baseSvcs {
		if name != "agent" && !reflect.DeepEqual(svc, mergedSvcs[name]) {
			t.Errorf("the overlay changes service %s", name)
		}
	}

	was, is := object(baseSvcs, "agent"), object(mergedSvcs, "agent")
	if was == nil || is == nil {
		t.Fatalf("no agent service (base %v, merged %v)", was != nil, is != nil)
	}
	mayChange := map[string]bool{"image": true, "entrypoint": true, "command": true, "working_dir": true,
		"stdin_open": true, "tty": true, "environment": true, "tmpfs": true}
	keys := map[string]bool{}
	for k := range was {
		keys[k] = true
	}
	for k := range is {
		keys[k] = true
	}
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		if !mayChange[k] && !reflect.DeepEqual(was[k], is[k]) {
			t.Errorf("the overlay changes the agent's %s: %v → %v", k, was[k], is[k])
		}
	}

	// What must hold whatever the generated file says.
	if is["image"] != claudeImage {
		t.Errorf("image: got %v, want %s", is["image"], claudeImage)
	}
	if is["read_only"] != true {
		t.Errorf("read_only: got %v, want true", is["read_only"])
	}
	if got := stringList(is["cap_drop"]); !slices.Equal(got, []string{"ALL"}) {
		t.Errorf("cap_drop: got %v, want [ALL]", got)
	}
	if got := stringList(is["cap_add"]); len(got) != 0 {
		t.Errorf("cap_add: got %v, want none", got)
	}
	if is["privileged"] == true {
		t.Error("the agent is privileged")
	}
	if got := is["user"]; got != "65532:65532" {
		t.Errorf("user: got %v, want 65532:65532", got)
	}
	sec := stringList(is["security_opt"])
	for _, want := range []string{"no-new-privileges:true", "seccomp=compiled/agent/seccomp.json"} {
		if !slices.Contains(sec, want) {
			t.Errorf("security_opt %v lacks %s", sec, want)
		}
	}
	for _, o := range sec {
		if strings.Contains(o, "unconfined") {
			t.Errorf("security_opt has %s", o)
		}
	}
	nets := object(is, "networks")
	if len(nets) == 0 || is["network_mode"] != nil {
		t.Errorf("networks: got %v (network_mode %v), want the agent's edges", nets, is["network_mode"])
	}
	for n := range nets {
		if object(object(merged, "networks"), n)["internal"] != true {
			t.Errorf("the agent is on network %s, which is not internal", n)
		}
	}
	mounts := map[string]map[string]any{}
	for _, v := range is["volumes"].([]any) {
		m := v.(map[string]any)
		mounts[fmt.Sprint(m["target"])] = m
	}
	if m := mounts["/workspace"]; m == nil || m["type"] != "bind" {
		t.Errorf("the workspace is not bind-mounted at /workspace: %v", m)
	}
	for _, p := range []string{"/workspace/.claude", "/workspace/.git/hooks", "/workspace/.vscode", "/workspace/.envrc"} {
		if m := mounts[p]; m == nil || m["read_only"] != true {
			t.Errorf("protected path %s is not mounted read-only: %v", p, m)
		}
	}

	// The environment: what the stack sets is kept; what the overlay adds names none of the
	// stack's own variables (model endpoint and key, proxies, identity, policy).
	wasEnv, isEnv := object(was, "environment"), object(is, "environment")
	for k, v := range wasEnv {
		if isEnv[k] != v {
			t.Errorf("environment %s: %v → %v", k, v, isEnv[k])
		}
	}
	for k := range isEnv {
		if _, ok := wasEnv[k]; ok {
			continue
		}
		u := strings.ToUpper(k)
		if strings.HasPrefix(u, "ANTHROPIC_") || strings.Contains(u, "PROXY") || strings.HasPrefix(u, "SHARNESS_") || strings.HasPrefix(u, "SPIFFE_") {
			t.Errorf("the overlay sets %s, which the stack owns", k)
		}
	}
	// tmpfs: the stack's are kept; each added one has a size and is not executable.
	wasTmp, isTmp := stringList(was["tmpfs"]), stringList(is["tmpfs"])
	for _, w := range wasTmp {
		if !slices.Contains(isTmp, w) {
			t.Errorf("tmpfs %s dropped", w)
		}
	}
	for _, m := range isTmp {
		if slices.Contains(wasTmp, m) {
			continue
		}
		_, opts, _ := strings.Cut(m, ":")
		o := strings.Split(opts, ",")
		for _, want := range []string{"noexec", "nosuid", "nodev"} {
			if !slices.Contains(o, want) {
				t.Errorf("tmpfs %s lacks %s", m, want)
			}
		}
		if !slices.ContainsFunc(o, func(s string) bool { return strings.HasPrefix(s, "size=") }) {
			t.Errorf("tmpfs %s has no size", m)
		}
	}
}

// agentRun is `docker run` under plain runc with the agent's settings from the generated compose
// file and the overlay (user, read-only root, capabilities, security options with the seccomp
// profile, limits, tmpfs, init, working folder, entrypoint, environment), on the network given.
func agentRun(t *testing.T, root, network string, env map[string]string, extra ...string) []string {
	t.Helper()
	svc := object(object(composeConfig(t, root, "docker-compose.yml", claudeOverlay), "services"), "agent")
	// runc by name: these runs take the agent out of its stack (host or no network, stand-in
	// servers, a workspace bind), which the runtime shim rightly refuses as wider than the agent's
	// policy; TestClaudeCodeStack runs Claude Code in the stack, under the shim.
	args := []string{"run", "--rm", "--runtime", "runc", "--network", network, "--user", fmt.Sprint(svc["user"]),
		"--pids-limit", fmt.Sprint(svc["pids_limit"]), "--memory", fmt.Sprint(svc["mem_limit"]),
		"--memory-swap", fmt.Sprint(svc["memswap_limit"]), "--workdir", fmt.Sprint(svc["working_dir"])}
	if svc["read_only"] == true {
		args = append(args, "--read-only")
	}
	if svc["init"] == true {
		args = append(args, "--init")
	}
	for _, c := range stringList(svc["cap_drop"]) {
		args = append(args, "--cap-drop", c)
	}
	for _, o := range stringList(svc["security_opt"]) {
		args = append(args, "--security-opt", o)
	}
	for _, m := range stringList(svc["tmpfs"]) {
		args = append(args, "--tmpfs", m)
	}
	for name, u := range object(svc, "ulimits") {
		l, _ := u.(map[string]any)
		args = append(args, "--ulimit", fmt.Sprintf("%s=%v:%v", name, num(l["soft"]), num(l["hard"])))
	}
	if network != "host" { // the host's namespace takes no net.* sysctl
		for k, v := range object(svc, "sysctls") {
			args = append(args, "--sysctl", fmt.Sprintf("%s=%v", k, v))
		}
	}
	vars := map[string]string{}
	for k, v := range object(svc, "environment") {
		vars[k] = fmt.Sprint(v)
	}
	maps.Copy(vars, env)
	for _, k := range slices.Sorted(maps.Keys(vars)) {
		args = append(args, "-e", k+"="+vars[k])
	}
	ep := stringList(svc["entrypoint"])
	if len(ep) != 1 {
		t.Fatalf("entrypoint %v: want one program", ep)
	}
	args = append(args, "--entrypoint", ep[0])
	return append(args, extra...)
}

func num(v any) any {
	if v == nil {
		return 0
	}
	return v
}

// TestClaudeCodeImage: the image builds from the pinned package; Claude Code runs in it as the
// overlay runs it (read-only root, uid 65532, no capabilities, the agent's seccomp profile and
// limits) with no network; its managed settings deny Bash, name the bash and fs MCP servers and
// are root's; the image holds no shell and no program but Claude Code and its entrypoint; and
// Claude Code honours the settings: against stand-ins for llm, bash and fs on this machine's
// loopback, it reports both MCP servers connected, offers the model the MCP tools and not Bash,
// runs the model's shell command through the bash MCP tool, refuses the model's Bash call, sends
// only the anthropic-beta values and fields listed below, and sends nothing to the proxy. The same
// run without the managed settings offers Bash: the check can fail.
func TestClaudeCodeImage(t *testing.T) {
	buildClaudeCode(t)
	root := repoRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	docker := func(args ...string) ([]byte, error) {
		cmd := exec.CommandContext(ctx, "docker", args...)
		cmd.Dir = root // the seccomp profile's path is relative to it
		return cmd.CombinedOutput()
	}

	t.Run("version", func(t *testing.T) {
		out, err := exec.CommandContext(ctx, "docker", "image", "inspect", "-f",
			`{{index .Config.Labels "ai.sharness.claude-code.version"}}`, claudeImage).Output()
		pin := strings.TrimSpace(string(out))
		if err != nil || pin == "" {
			t.Fatalf("the image carries no pinned version label (%v)", err)
		}
		out, err = docker(append(agentRun(t, root, "none", nil, claudeImage), "--version")...)
		if err != nil {
			t.Fatalf("claude --version under the overlay's settings: %v\n%s", err, out)
		}
		if got, want := strings.TrimSpace(string(out)), pin+" (Claude Code)"; got != want {
			t.Errorf("claude --version: got %q, want %q", got, want)
		}
	})

	t.Run("managed-settings", func(t *testing.T) {
		files := imageFiles(t, ctx, claudeImage)
		read := func(path string) map[string]any {
			f, ok := files[path]
			if !ok {
				t.Fatalf("%s is not in the image", path)
			}
			var v map[string]any
			if err := json.Unmarshal(f.data, &v); err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			return v
		}
		s := read("etc/claude-code/managed-settings.json")
		perms := object(s, "permissions")
		if deny := stringList(perms["deny"]); !slices.Contains(deny, "Bash") {
			t.Errorf("permissions.deny %v does not deny Bash", deny)
		}
		allow := stringList(perms["allow"])
		for _, want := range []string{"mcp__bash", "mcp__fs"} {
			if !slices.Contains(allow, want) {
				t.Errorf("permissions.allow %v lacks %s", allow, want)
			}
		}
		if slices.ContainsFunc(allow, func(r string) bool { return r == "Bash" || strings.HasPrefix(r, "Bash(") }) {
			t.Errorf("permissions.allow %v allows Bash", allow)
		}
		for _, k := range []string{"disableAllHooks", "allowManagedHooksOnly", "disableSkillShellExecution", "allowManagedMcpServersOnly"} {
			if s[k] != true {
				t.Errorf("%s: got %v, want true", k, s[k])
			}
		}
		servers := object(read("etc/claude-code/managed-mcp.json"), "mcpServers")
		if got := slices.Sorted(maps.Keys(servers)); !slices.Equal(got, []string{"bash", "fs"}) {
			t.Errorf("managed MCP servers: got %v, want [bash fs]", got)
		}
		for name, url := range map[string]string{"bash": "http://bash:8090/mcp", "fs": "http://fs:8091/mcp"} {
			if srv := object(servers, name); srv["type"] != "http" || srv["url"] != url {
				t.Errorf("MCP server %s: got %v, want http %s", name, srv, url)
			}
		}
		// Root's and not writable by anyone else, so not by the agent's uid (which has no
		// capability to override that) even where the root file system is writable.
		for _, p := range []string{"etc/claude-code", "etc/claude-code/managed-settings.json", "etc/claude-code/managed-mcp.json"} {
			if h := files[p]; h == nil || h.uid != 0 || h.mode&0o022 != 0 {
				t.Errorf("%s: want root's and writable by root alone, got %+v", p, h)
			}
		}
		// No shell and no program but Claude Code and its entrypoint: nothing Claude Code may be
		// told to run (a project's apiKeyHelper, a hook) finds one.
		for p, h := range files {
			lib := strings.HasPrefix(p, "lib/") || strings.HasPrefix(p, "lib64/")
			if h.regular && h.mode&0o111 != 0 && h.size > 0 && !lib && p != "usr/local/bin/claude" && p != "usr/local/bin/sharness-claude" {
				t.Errorf("the image holds another program: %s", p)
			}
		}
	})

	// Stand-ins for llm, bash and fs on the loopback, at the ports the image names (llm's comes
	// from the managed settings' env, the servers' from managed-mcp.json), and a proxy that
	// refuses and records everything.
	f := startClaudeFakes(t)
	ws := t.TempDir() // the agent's, as a person's workspace is: writable by the agent's uid
	var uid, gid int
	user := object(object(composeConfig(t, root, "docker-compose.yml", claudeOverlay), "services"), "agent")["user"]
	if _, err := fmt.Sscanf(fmt.Sprint(user), "%d:%d", &uid, &gid); err != nil {
		t.Fatalf("the agent's user %v: %v", user, err)
	}
	if err := os.Chown(ws, uid, gid); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"HTTPS_PROXY": f.proxyURL, "HTTP_PROXY": f.proxyURL, "https_proxy": f.proxyURL, "http_proxy": f.proxyURL}
	hostRun := func(extra ...string) []string {
		base := []string{"--add-host", "llm:127.0.0.1", "--add-host", "bash:127.0.0.1", "--add-host", "fs:127.0.0.1",
			"-v", ws + ":/workspace"}
		return agentRun(t, root, "host", env, append(base, extra...)...)
	}

	t.Run("mcp-list", func(t *testing.T) {
		out, err := docker(append(hostRun(claudeImage), "mcp", "list")...)
		if err != nil {
			t.Fatalf("claude mcp list: %v\n%s", err, out)
		}
		for _, want := range []string{"bash: http://bash:8090/mcp (HTTP) - ✔ Connected", "fs: http://fs:8091/mcp (HTTP) - ✔ Connected"} {
			if !bytes.Contains(out, []byte(want)) {
				t.Errorf("claude mcp list lacks %q:\n%s", want, out)
			}
		}
	})

	t.Run("settings-in-effect", func(t *testing.T) {
		f.reset()
		out, err := docker(append(hostRun(claudeImage), "-p", "run the probe")...)
		if err != nil {
			t.Fatalf("claude -p: %v\n%s", err, out)
		}
		if !bytes.Contains(out, []byte(fakeDone)) {
			t.Errorf("claude -p did not finish the conversation:\n%s", out)
		}
		reqs, calls, proxied := f.snapshot()
		if len(reqs) < 3 {
			t.Fatalf("the model got %d requests, want at least 3 (tool call, Bash call, end)", len(reqs))
		}
		for i, r := range reqs {
			if len(r.tools) == 0 {
				continue
			}
			for _, want := range []string{"mcp__bash__bash", "mcp__fs__fs_write", "mcp__fs__fs_delete", "mcp__fs__fs_rename"} {
				if !slices.Contains(r.tools, want) {
					t.Errorf("request %d does not offer %s: %v", i, want, r.tools)
				}
			}
			if slices.Contains(r.tools, "Bash") {
				t.Errorf("request %d offers the built-in Bash tool: %v", i, r.tools)
			}
		}
		// What llm's policy must allow for Claude Code (business.llm.betas; no extra_fields): the
		// overlay turns experimental betas off, which leaves these.
		betas := []string{"claude-code-20250219", "interleaved-thinking-2025-05-14", "effort-2025-11-24"}
		fields := []string{"max_tokens", "messages", "metadata", "model", "output_config", "stream", "system", "temperature", "thinking", "tools"}
		for i, r := range reqs {
			for _, b := range r.betas {
				if !slices.Contains(betas, b) {
					t.Errorf("request %d sends anthropic-beta %s, beyond %v", i, b, betas)
				}
			}
			for _, f := range r.fields {
				if !slices.Contains(fields, f) {
					t.Errorf("request %d has the top-level field %q, beyond %v", i, f, fields)
				}
			}
		}
		if !slices.Contains(calls, "bash/bash:echo sharness-e2e") {
			t.Errorf("the bash MCP server was not asked to run the model's command; tool calls: %v", calls)
		}
		last := reqs[len(reqs)-1].body
		if !strings.Contains(last, `"tool_use_id":"toolu_sharness_bash"`) || !strings.Contains(last, "No such tool available: Bash") {
			t.Errorf("the model's Bash call was not refused as an unavailable tool:\n%.2000s", last)
		}
		if len(proxied) > 0 {
			t.Errorf("Claude Code sent %d connections to the proxy (net would refuse them): %q", len(proxied), proxied)
		}
	})

	t.Run("control-without-managed-settings", func(t *testing.T) {
		f.reset()
		// An empty /etc/claude-code: the same Claude Code, without its managed settings.
		out, err := docker(append(hostRun("--tmpfs", "/etc/claude-code:ro,size=1k", claudeImage), "-p", "run the probe")...)
		reqs, _, _ := f.snapshot()
		if len(reqs) == 0 {
			t.Fatalf("the model got no request (%v):\n%s", err, out)
		}
		if !slices.Contains(reqs[0].tools, "Bash") {
			t.Errorf("without the managed settings Claude Code still hides Bash (%v): the check above proves nothing", reqs[0].tools)
		}
	})
}

// TestClaudeCodeStack: Claude Code as the agent of the offline stack, through the overlay
// (docker-compose.yml, compose/world.yml and compose/claude-code.yml) with a key sealed to kms and
// the default policy, which admits Claude Code 2.1.332's model, betas and tool lists:
//   - mcp-list: `claude mcp list` shows the stack's bash and fs servers connected;
//   - prompt: `claude -p` prints the offline model's answer to the prompt, through llm;
//   - bash-tool: the model asks for the bash MCP tool (testkit/model: "use tool NAME {input}"),
//     bash runs the command in a sandbox (its log line: the command's hash, "ran", exit 0) and
//     Claude Code's answer quotes the output, which only a shell could make of the command;
//   - subagent: the model asks for an Explore subagent, whose requests (their own tool list) go
//     through llm too.
//
// Every request reached the model with the sealed key (its hash in the model's record), never the
// placeholder the agent holds, with Claude Code's model and betas; llm refused none of them. A
// refusal names the rule in llm's log, shown on failure: tools_not_pinned after a change of
// Claude Code or of the bash or fs tool definitions means new pins (docs/claude-code.md).
func TestClaudeCodeStack(t *testing.T) {
	buildClaudeCode(t)
	root := repoRoot(t)
	s, sk := withKey(t, "SHARNESS_AI_POLICY_HASH="+policyHash(t, root))
	cc := *s // the same stack, with the overlay for the agent
	cc.files = append(slices.Clone(s.files), filepath.Join(root, claudeOverlay))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	claude := func(t *testing.T, args ...string) string {
		t.Helper()
		out, err := cc.run(ctx, "", append([]string{"agent"}, args...)...)
		if err != nil {
			t.Fatalf("claude %q: %v\n%s\nllm's refusals: %v", args, err, out, llmRefusals(t, s))
		}
		return string(out)
	}

	t.Run("mcp-list", func(t *testing.T) {
		out := claude(t, "mcp", "list")
		for _, want := range []string{"bash: http://bash:8090/mcp (HTTP) - ✔ Connected", "fs: http://fs:8091/mcp (HTTP) - ✔ Connected"} {
			if !strings.Contains(out, want) {
				t.Errorf("claude mcp list lacks %q:\n%s", want, out)
			}
		}
	})

	t.Run("prompt", func(t *testing.T) {
		clearRecord(t)
		const prompt = "hello from Claude Code in the stack"
		out := claude(t, "-p", prompt)
		if want := "last user text: " + prompt; !strings.Contains(out, "offline model: ") || !strings.Contains(out, want) {
			t.Errorf("claude -p did not print the offline model's answer (want %q):\n%s", want, out)
		}
		checkClaudeRecord(t, s, sk.key, prompt)
	})

	t.Run("bash-tool", func(t *testing.T) {
		clearRecord(t)
		const command = "echo hello from the sandbox $((6*7))"
		out := claude(t, "-p", `use tool mcp__bash__bash {"command":"`+command+`"}`)
		if !strings.Contains(out, "offline model: tool result of") || !strings.Contains(out, "hello from the sandbox 42") {
			t.Errorf("Claude Code's answer does not quote the command's output (hello from the sandbox 42):\n%s", out)
		}
		reqs := checkClaudeRecord(t, s, sk.key, "mcp__bash__bash")
		if !slices.ContainsFunc(reqs, func(r recorded) bool { return strings.Contains(r.Body, "hello from the sandbox 42") }) {
			t.Errorf("no request to the model carried the tool result")
		}
		sum := sha256.Sum256([]byte(command))
		if !bashRan(s.logs("bash"), hex.EncodeToString(sum[:])) {
			t.Errorf("bash's log has no line for the command (sha256 %x) with decision ran and exit code 0:\n%s", sum, s.logs("bash"))
		}
	})

	t.Run("subagent", func(t *testing.T) {
		clearRecord(t)
		out := claude(t, "-p", `use tool Agent {"description":"look around","prompt":"list the workspace","subagent_type":"Explore"}`)
		if !strings.Contains(out, "offline model: ") {
			t.Errorf("claude -p did not print the offline model's answer:\n%s", out)
		}
		reqs := checkClaudeRecord(t, s, sk.key, "list the workspace")
		sub := slices.ContainsFunc(reqs, func(r recorded) bool {
			var b struct {
				Tools []struct{ Name string } `json:"tools"`
			}
			json.Unmarshal([]byte(r.Body), &b)
			names := []string{}
			for _, tl := range b.Tools {
				names = append(names, tl.Name)
			}
			return strings.Contains(r.Body, "list the workspace") && len(names) > 0 && !slices.Contains(names, "Agent")
		})
		if !sub {
			t.Errorf("no request of the Explore subagent (its prompt, a tool list without Agent) reached the model")
		}
	})

	// The refusals last: llm's log of refusals, which the subtests above check is empty, keeps them.
	// An llm refusal as the person sees it: Claude Code's Read tool reads a planted AWS key from
	// the workspace, llm refuses the next request, and Claude Code prints llm's message (the rule
	// and what to do), not "Failed to authenticate" (what it prints for a 403).
	t.Run("refusal-names-the-rule", func(t *testing.T) {
		clearRecord(t)
		ws := workspaceOf(s)
		const keyID, secret = "AKIAQYLPMN5HHHFPZAM2", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKX"
		planted := filepath.Join(ws, "deploy.env")
		if err := os.WriteFile(planted, []byte("AWS_ACCESS_KEY_ID="+keyID+"\nAWS_SECRET_ACCESS_KEY="+secret+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(planted)
		if err := os.Chown(planted, workspaceUID, workspaceUID); err != nil {
			t.Fatal(err)
		}
		out, err := cc.run(ctx, "", "agent", "-p", `use tool Read {"file_path":"/workspace/deploy.env"}`)
		if err == nil {
			t.Errorf("claude -p exited 0 although llm refused the request:\n%s", out)
		}
		for _, want := range []string{"API Error: 400 llm: the secret filter matched [aws-access-key-id", "nothing was sent", "start a new conversation"} {
			if !strings.Contains(string(out), want) {
				t.Errorf("Claude Code's output lacks %q:\n%s", want, out)
			}
		}
		if strings.Contains(string(out), "authenticate") {
			t.Errorf("Claude Code shows llm's refusal as an authentication failure:\n%s", out)
		}
		t.Logf("Claude Code printed:\n%s", out)
		for _, r := range record(t) {
			if strings.Contains(r.Body, keyID) || strings.Contains(r.Body, secret) {
				t.Errorf("request %d carried the planted key to the model", r.Seq)
			}
		}
	})

	// Planted credentials in the shapes tools print (issue 21): through Read, llm refuses; through
	// the bash tool, bash redacts (or llm refuses); no line of them reaches the model.
	t.Run("planted-formats", func(t *testing.T) {
		checkPlantedFormats(t, workspaceOf(s), func(args ...string) (string, error) {
			out, err := cc.run(ctx, "", append([]string{"agent"}, args...)...)
			return string(out), err
		})
	})
}

// claudeBetas are the anthropic-beta values Claude Code 2.1.332 sends under the overlay, and the
// model it uses: what the default policy admits for it (policies/default/layers/L3-llm.yaml).
var claudeBetas = []string{"claude-code-20250219", "interleaved-thinking-2025-05-14", "effort-2025-11-24"}

const claudeModel = "claude-opus-5-5"

// checkClaudeRecord checks what reached the model since the record was cleared: at least one
// request, one holding want; every one a Messages request for Claude Code's model with its betas
// only, carrying the sealed key and not the agent's placeholder; and llm refused none.
func checkClaudeRecord(t *testing.T, s *stack, k apiKey, want string) []recorded {
	t.Helper()
	reqs := record(t)
	if len(reqs) == 0 {
		t.Fatalf("no request reached the model; llm's refusals: %v", llmRefusals(t, s))
	}
	placeholder := sha256.Sum256([]byte("sharness-placeholder-not-a-key"))
	for _, r := range reqs {
		switch got := headerValue(r.Header, "x-api-key"); got {
		case "sha256:" + k.sha256:
		case "sha256:" + hex.EncodeToString(placeholder[:]):
			t.Errorf("request %d reached the model with the agent's placeholder key", r.Seq)
		default:
			t.Errorf("request %d reached the model with key %s, want the sealed key's sha256:%s", r.Seq, got, k.sha256)
		}
		var b struct{ Model string }
		json.Unmarshal([]byte(r.Body), &b)
		if r.Path != "/v1/messages" || b.Model != claudeModel {
			t.Errorf("request %d: %s for model %q, want /v1/messages for %s", r.Seq, r.Path, b.Model, claudeModel)
		}
		for name, vs := range r.Header {
			if !strings.EqualFold(name, "anthropic-beta") {
				continue
			}
			for _, v := range vs {
				for beta := range strings.SplitSeq(v, ",") {
					if beta = strings.TrimSpace(beta); !slices.Contains(claudeBetas, beta) {
						t.Errorf("request %d carries anthropic-beta %q, beyond %v", r.Seq, beta, claudeBetas)
					}
				}
			}
		}
	}
	if !slices.ContainsFunc(reqs, func(r recorded) bool { return strings.Contains(r.Body, want) }) {
		t.Errorf("no request to the model holds %q", want)
	}
	if refused := llmRefusals(t, s); len(refused) > 0 {
		t.Errorf("llm refused Claude Code's requests: %v", refused)
	}
	return reqs
}

// llmRefusals are llm's canonical lines (one per request) that name a refusal, as "reason
// (model, status)". A 4xx the model answered itself carries no reason.
func llmRefusals(t *testing.T, s *stack) []string {
	t.Helper()
	var out []string
	for _, line := range strings.Split(s.logs("llm"), "\n") {
		var l struct {
			Msg, Model, Reason string
			Status             int
		}
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "llm request" && l.Reason != "" {
			out = append(out, fmt.Sprintf("%s (%s, %d)", l.Reason, l.Model, l.Status))
		}
	}
	return out
}

// bashRan reports whether bash's log has its line for a command (by its SHA-256) that ran in a
// sandbox and exited 0.
func bashRan(log, sum string) bool {
	for _, line := range strings.Split(log, "\n") {
		var l struct {
			Msg      string  `json:"msg"`
			Sum      string  `json:"command_sha256"`
			Decision string  `json:"decision"`
			Exit     float64 `json:"exit_code"`
		}
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "bash command" && l.Sum == sum && l.Decision == "ran" && l.Exit == 0 {
			return true
		}
	}
	return false
}

const fakeDone = "sharness-e2e: conversation done"

// claudeFakes are the loopback stand-ins for llm (a scripted Messages API), bash and fs (MCP
// servers over streamable HTTP with the real servers' tool names) and a proxy that records the
// first line of every connection and refuses it.
type claudeFakes struct {
	proxyURL string
	mu       sync.Mutex
	reqs     []fakeRequest
	calls    []string // server/tool:command
	proxied  []string
}

type fakeRequest struct {
	tools  []string
	betas  []string
	fields []string
	body   string
}

func (f *claudeFakes) reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reqs, f.calls, f.proxied = nil, nil, nil
}

func (f *claudeFakes) snapshot() ([]fakeRequest, []string, []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.reqs), slices.Clone(f.calls), slices.Clone(f.proxied)
}

func startClaudeFakes(t *testing.T) *claudeFakes {
	t.Helper()
	f := &claudeFakes{}
	listen := func(addr string) net.Listener {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("listen on %s for a stand-in (the image names this port): %v", addr, err)
		}
		return l
	}
	serve := func(l net.Listener, h http.Handler) {
		srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
		go srv.Serve(l)
		t.Cleanup(func() { srv.Close() })
	}
	serve(listen("127.0.0.1:8080"), http.HandlerFunc(f.model))
	serve(listen("127.0.0.1:8090"), f.mcp("bash", []string{"bash"}))
	serve(listen("127.0.0.1:8091"), f.mcp("fs", []string{"fs_write", "fs_delete", "fs_rename"}))
	pl := listen("127.0.0.1:0")
	t.Cleanup(func() { pl.Close() })
	f.proxyURL = "http://" + pl.Addr().String()
	go func() {
		for {
			c, err := pl.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(5 * time.Second))
				line, _ := bufio.NewReader(c).ReadString('\n')
				f.mu.Lock()
				f.proxied = append(f.proxied, strings.TrimSpace(line))
				f.mu.Unlock()
				io.WriteString(c, "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
			}()
		}
	}()
	return f
}

// model answers the Messages API by a script: first a call of the bash MCP tool, then a call of
// the built-in Bash tool, then a last text. Requests without tools (Claude Code's own helpers)
// get a short text.
func (f *claudeFakes) model(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if r.Method != http.MethodPost || r.URL.Path != "/v1/messages" {
		http.NotFound(w, r)
		return
	}
	var req struct {
		Model  string `json:"model"`
		Stream bool   `json:"stream"`
		Tools  []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	fr := fakeRequest{body: string(body)}
	for _, tl := range req.Tools {
		fr.tools = append(fr.tools, tl.Name)
	}
	for _, line := range r.Header.Values("Anthropic-Beta") {
		for b := range strings.SplitSeq(line, ",") {
			fr.betas = append(fr.betas, strings.TrimSpace(b))
		}
	}
	var fields map[string]json.RawMessage
	json.Unmarshal(body, &fields)
	fr.fields = slices.Sorted(maps.Keys(fields))
	f.mu.Lock()
	f.reqs = append(f.reqs, fr)
	f.mu.Unlock()
	var block map[string]any
	switch s := string(body); {
	case len(req.Tools) == 0:
		block = map[string]any{"type": "text", "text": "ok"}
	case !strings.Contains(s, `"toolu_sharness_mcp"`):
		block = map[string]any{"type": "tool_use", "id": "toolu_sharness_mcp", "name": "mcp__bash__bash",
			"input": map[string]any{"command": "echo sharness-e2e", "profile": "analyse"}}
	case !strings.Contains(s, `"toolu_sharness_bash"`):
		block = map[string]any{"type": "tool_use", "id": "toolu_sharness_bash", "name": "Bash", "input": map[string]any{"command": "id"}}
	default:
		block = map[string]any{"type": "text", "text": fakeDone}
	}
	stop := "end_turn"
	if block["type"] == "tool_use" {
		stop = "tool_use"
	}
	usage := map[string]any{"input_tokens": 1, "output_tokens": 1}
	msg := map[string]any{"id": "msg_sharness", "type": "message", "role": "assistant", "model": req.Model,
		"content": []any{block}, "stop_reason": stop, "stop_sequence": nil, "usage": usage}
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(msg)
		return
	}
	start := maps.Clone(msg)
	start["content"], start["stop_reason"] = []any{}, nil
	events := []map[string]any{{"type": "message_start", "message": start}}
	if block["type"] == "text" {
		events = append(events,
			map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}},
			map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": block["text"]}})
	} else {
		in, _ := json.Marshal(block["input"])
		events = append(events,
			map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "tool_use", "id": block["id"], "name": block["name"], "input": map[string]any{}}},
			map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "input_json_delta", "partial_json": string(in)}})
	}
	events = append(events, map[string]any{"type": "content_block_stop", "index": 0},
		map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": 1}},
		map[string]any{"type": "message_stop"})
	w.Header().Set("Content-Type", "text/event-stream")
	for _, e := range events {
		data, _ := json.Marshal(e)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", e["type"], data)
	}
}

// mcp is a minimal MCP server over streamable HTTP (JSON answers, no server-sent stream): it
// initializes, lists the named tools (each taking a command or a path) and records each call.
func (f *claudeFakes) mcp(server string, tools []string) http.Handler {
	var list []map[string]any
	for _, name := range tools {
		list = append(list, map[string]any{"name": name, "description": "stand-in for " + server + "'s " + name,
			"inputSchema": map[string]any{"type": "object", "properties": map[string]any{
				"command": map[string]any{"type": "string"}, "profile": map[string]any{"type": "string"},
				"path": map[string]any{"type": "string"}}}})
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				ProtocolVersion string `json:"protocolVersion"`
				Name            string `json:"name"`
				Arguments       struct {
					Command, Path string
				} `json:"arguments"`
			} `json:"params"`
		}
		if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if m.ID == nil { // a notification
			w.WriteHeader(http.StatusAccepted)
			return
		}
		var result any
		switch m.Method {
		case "initialize":
			result = map[string]any{"protocolVersion": m.Params.ProtocolVersion, "capabilities": map[string]any{"tools": map[string]any{}},
				"serverInfo": map[string]any{"name": server, "version": "0"}}
		case "tools/list":
			result = map[string]any{"tools": list}
		case "tools/call":
			f.mu.Lock()
			f.calls = append(f.calls, server+"/"+m.Params.Name+":"+m.Params.Arguments.Command+m.Params.Arguments.Path)
			f.mu.Unlock()
			result = map[string]any{"content": []any{map[string]any{"type": "text", "text": "sharness-e2e"}}}
		default:
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": m.ID, "error": map[string]any{"code": -32601, "message": "no such method"}})
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": m.ID, "result": result})
	})
}

// imageFile is one entry of an image's file system.
type imageFile struct {
	uid     int
	mode    int64
	size    int64
	regular bool
	data    []byte // read for files under etc/ only
}

// imageFiles lists an image's file system (from `docker export` of a container never started),
// reading the contents of the files under etc/: the image has no shell to ask.
func imageFiles(t *testing.T, ctx context.Context, image string) map[string]*imageFile {
	t.Helper()
	out, err := exec.CommandContext(ctx, "docker", "create", image).Output()
	if err != nil {
		t.Fatalf("docker create %s: %v", image, err)
	}
	id := strings.TrimSpace(string(out))
	defer exec.Command("docker", "rm", "-f", id).Run()
	cmd := exec.CommandContext(ctx, "docker", "export", id)
	r, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("docker export: %v", err)
	}
	files := map[string]*imageFile{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("docker export: %v", err)
		}
		name := strings.TrimSuffix(strings.TrimPrefix(h.Name, "./"), "/")
		f := &imageFile{uid: h.Uid, mode: h.Mode, size: h.Size, regular: h.Typeflag == tar.TypeReg}
		if f.regular && strings.HasPrefix(name, "etc/") {
			if f.data, err = io.ReadAll(tr); err != nil {
				t.Fatalf("docker export %s: %v", name, err)
			}
		}
		files[name] = f
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("docker export: %v", err)
	}
	return files
}
