//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestDashboard (issue 7): with the stack up and an operator key, as TestGate has them, the
// person starts `sharness-ai dashboard --project` on 127.0.0.1 and opens the printed URL in a
// headless chromium (Debian's). The page loads with every log's chain status; a write fs
// refuses to the agent appears on it as a denial; a write to .git/hooks/pre-commit waits as a
// pending request until Approve is clicked on the page, then goes through. The dashboard is
// out of the agent's reach: from the agent's container no host address or network gateway
// answers on its port, nor from a container on the default bridge (which does reach a host
// service bound to every address), and the agent's container has no gate directory.
func TestDashboard(t *testing.T) {
	s, ws, key := operatorStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	if out, err := s.compose(ctx, "up", "--pull", "never", "--detach", "--wait", "launcher", "fs"); err != nil {
		t.Fatalf("docker compose up: %v\n%s", err, out)
	}

	dashURL, port := startDashboard(t, s, key)
	tab := browser(t)
	page := func(d time.Duration) context.Context {
		c, cancel := context.WithTimeout(tab, d)
		t.Cleanup(cancel)
		return c
	}
	// until waits for a JavaScript predicate on the page to hold.
	until := func(t *testing.T, what, expr string) {
		t.Helper()
		if _, err := chromedp.Run(page(time.Minute), chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(45*time.Second))); err != nil {
			text, _ := chromedp.Run(page(10*time.Second), chromedp.TextContent(chromedp.CSS("body")))
			t.Fatalf("%s: %v\nthe page:\n%s\nfs:\n%s", what, err, text, s.logs("fs"))
		}
	}
	tableOf := func(component string) string {
		return fmt.Sprintf(`(document.querySelector('#decisions table[data-component=%q]')?.textContent ?? "")`, component)
	}

	t.Run("loads", func(t *testing.T) {
		if err := chromedp.Do(page(time.Minute), chromedp.Navigate(dashURL), chromedp.WaitVisible(chromedp.CSS(`#chains tr[data-component="fs"]`))); err != nil {
			t.Fatalf("load the dashboard: %v", err)
		}
		// Every log of the running stack verifies against the session record's CA.
		until(t, "the launcher's and fs's chains verify", `["launcher", "fs"].every(c => document.querySelector('#chains tr[data-component="' + c + '"] .ok'))`)
		if loc, err := chromedp.Run(page(10*time.Second), chromedp.Location()); err != nil || strings.Contains(loc, "token") {
			t.Errorf("the page's address %q (%v): the token must leave the address bar", loc, err)
		}
	})

	t.Run("a-denial-appears", func(t *testing.T) {
		body := `{"path":"src/dashboard-denied.go","content":"package main\n"}`
		out, _ := s.run(ctx, "", "--entrypoint", "/usr/bin/curl", "agent", "-sS", "--max-time", "30", "-D", "-",
			"-H", "Content-Type: application/json", "--data-binary", body, "http://fs:8091/v1/write")
		if !strings.Contains(string(out), "403") || !strings.Contains(string(out), "not_protected") {
			t.Fatalf("fs did not refuse the write: %s", out)
		}
		until(t, "fs's denial on the page", tableOf("fs")+`.includes("src/dashboard-denied.go") && `+tableOf("fs")+`.includes("not_protected")`)
	})

	hook := filepath.Join(ws, ".git", "hooks", "pre-commit")
	t.Run("approved-from-the-page", func(t *testing.T) {
		name := project + "-dashboard-approve"
		content := "#!/bin/sh\necho approved from the dashboard\n"
		body, _ := json.Marshal(map[string]string{"path": ".git/hooks/pre-commit", "content": content})
		if out, err := s.compose(ctx, "run", "-d", "--no-deps", "--name", name, "--entrypoint", "/usr/bin/curl", "agent",
			"-sS", "--max-time", "120", "-D", "-", "-H", "Content-Type: application/json", "--data-binary", string(body),
			"http://fs:8091/v1/write"); err != nil {
			t.Fatalf("start the agent's write: %v\n%s", err, out)
		}
		t.Cleanup(func() { exec.Command("docker", "rm", "-f", name).Run() })
		until(t, "the pending request on the page", `[...document.querySelectorAll('#pending tr[data-id]')].some(r => r.textContent.includes(".git/hooks/pre-commit"))`)
		id, err := chromedp.Run(page(10*time.Second), chromedp.Evaluate[string](`document.querySelector('#pending tr[data-id]').dataset.id`))
		if err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(hook); len(b) > 0 {
			t.Fatalf("the hook was written before anyone approved it: %q", b)
		}
		approve := chromedp.CSS(`#pending button[data-id="` + id + `"][data-decision="approve"]`)
		if err := chromedp.Do(page(time.Minute), chromedp.Click(approve), chromedp.WaitNotPresent(chromedp.CSS(`#pending tr[data-id="`+id+`"]`))); err != nil {
			t.Fatalf("approve %s on the page: %v", id, err)
		}
		if out, err := exec.CommandContext(ctx, "docker", "wait", name).CombinedOutput(); err != nil {
			t.Fatalf("docker wait %s: %v\n%s", name, err, out)
		}
		if out, _ := exec.CommandContext(ctx, "docker", "logs", name).CombinedOutput(); !strings.Contains(string(out), "200 OK") {
			t.Fatalf("the write approved on the page: %s", out)
		}
		if b, err := os.ReadFile(hook); err != nil || string(b) != content {
			t.Errorf("the hook after the page's approval: %q, %v", b, err)
		}
		until(t, "fs's record of the approved write", tableOf("fs")+`.includes(".git/hooks/pre-commit") && `+tableOf("fs")+`.includes("approved")`)
	})

	t.Run("out-of-the-agents-reach", func(t *testing.T) {
		// From the agent's seat: every host address and the gateways of the edge networks.
		addrs := strings.Split(hostAddrs(t, port, "10.213.0.1", "10.214.0.1"), ",")
		args := []string{"--entrypoint", "/usr/bin/curl", "agent", "-sS", "--max-time", "3", "-w", `%{url_effective} %{http_code}\n`}
		for _, a := range addrs {
			args = append(args, "-o", "/dev/null", "http://"+a+"/")
		}
		out, _ := s.run(ctx, "", args...)
		for _, a := range addrs {
			if !strings.Contains(string(out), "http://"+a+"/ 000") {
				t.Errorf("from the agent's container, http://%s/ answered (or was not tried):\n%s", a, out)
			}
		}
		// From a container on the default bridge, which reaches a host service bound to every
		// address: the dashboard's loopback binding is what keeps it out.
		controlHostService(t, startHostService(t))
		if out, err := exec.CommandContext(ctx, "docker", "run", "--rm", "--entrypoint", "/bin/busybox", plainImage(t), "nc",
			"-w", "3", "172.17.0.1", fmt.Sprint(port)).CombinedOutput(); err == nil {
			t.Errorf("a container on the default bridge connected to the dashboard at 172.17.0.1:%d: %s", port, out)
		}
		// No gate directory in the agent's container: nothing there to write a decision into.
		if out, err := s.run(ctx, "", "--entrypoint", "/bin/busybox", "agent", "stat", "/var/lib/sharness/gate"); err == nil || !strings.Contains(string(out), "No such file") {
			t.Errorf("the agent's container has a gate directory (%v):\n%s", err, out)
		}
		mounts, err := s.run(ctx, "", "--entrypoint", "/bin/busybox", "agent", "cat", "/proc/self/mountinfo")
		if err != nil || !strings.Contains(string(mounts), " / ") {
			t.Fatalf("the agent's mounts: %v\n%s", err, mounts)
		}
		if bytes.Contains(mounts, []byte("_gate-")) || bytes.Contains(mounts, []byte("/var/lib/sharness/gate")) {
			t.Errorf("the agent's container mounts a gate volume:\n%s", mounts)
		}
	})
}

// startDashboard starts `sharness-ai dashboard --project` as the person would, on a random
// loopback port, and stops it with SIGINT when the test ends, requiring a clean exit. It returns
// the printed URL and the port.
func startDashboard(t *testing.T, s *stack, key string) (string, int) {
	t.Helper()
	cmd := exec.Command(sharnessAI(t), "dashboard", "--json", "--project", project, "--key", key, "--listen", "127.0.0.1:0")
	cmd.Env, cmd.Dir = s.env, s.root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start sharness-ai dashboard: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGINT)
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("sharness-ai dashboard after SIGINT: %v\n%s", err, &stderr)
			}
		case <-time.After(15 * time.Second):
			cmd.Process.Kill()
			t.Errorf("sharness-ai dashboard did not stop on SIGINT\n%s", &stderr)
		}
	})
	var printed struct{ URL string }
	if err := json.NewDecoder(stdout).Decode(&printed); err != nil {
		t.Fatalf("sharness-ai dashboard --json: %v\n%s", err, &stderr)
	}
	u, err := url.Parse(printed.URL)
	if err != nil || u.Hostname() != "127.0.0.1" || u.Query().Get("token") == "" {
		t.Fatalf("the dashboard's URL %q (%v): want http://127.0.0.1:PORT/?token=…", printed.URL, err)
	}
	var port int
	fmt.Sscan(u.Port(), &port)
	return printed.URL, port
}

// browser starts Debian's chromium, headless, and returns its tab. Without chromium the test
// fails, saying how to install it (hack/e2e.sh does).
func browser(t *testing.T) context.Context {
	t.Helper()
	exe, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("no browser to drive (%v): install Debian's chromium with `apt-get install -y chromium` (hack/e2e.sh does)", err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.Flag("disable-dev-shm-usage", true))
	if os.Geteuid() == 0 { // chromium refuses its sandbox as root; it loads only the dashboard here
		opts = append(opts, chromedp.NoSandbox)
	}
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil { // starts the browser; a timeout here would stop it
		t.Fatalf("start %s: %v", exe, err)
	}
	return ctx
}
