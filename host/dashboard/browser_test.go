//go:build browser

package dashboard

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sharness-ai/sharness/internal/audit"
	"github.com/sharness-ai/sharness/internal/gate"
)

// This file drives a real browser, Debian's chromium, headless, through the DevTools protocol
// (chromedp). It carries the browser build tag so that `go test ./...` needs no browser:
//
//	go test -tags browser -run TestBrowser ./host/dashboard/
//
// Without chromium on PATH it fails, saying how to install it; it never skips.

// chromium is the browser to drive: $CHROMIUM, else chromium on PATH.
func chromium(t *testing.T) string {
	t.Helper()
	name := os.Getenv("CHROMIUM")
	if name == "" {
		name = "chromium"
	}
	path, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("no browser to drive (%v): install Debian's chromium with `apt-get install -y chromium` (hack/test.sh does), or set CHROMIUM", err)
	}
	return path
}

// browser starts a headless chromium for the test and returns its tab. Actions take their
// timeouts from contexts derived from it (a timeout on the first Run would stop the browser).
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium(t)),
		chromedp.Flag("disable-dev-shm-usage", true)) // a container's /dev/shm is small
	if os.Geteuid() == 0 {
		// Chromium refuses to start its sandbox as root (CI and the dev machine run as root);
		// the only pages it loads here are the test's own.
		opts = append(opts, chromedp.NoSandbox)
	}
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		t.Fatalf("start %s: %v", chromium(t), err)
	}
	return ctx
}

// within is ctx limited to d, for one step.
func within(t *testing.T, ctx context.Context, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(ctx, d)
	t.Cleanup(cancel)
	return ctx
}

// TestBrowser loads the page from the printed URL, sees the logs' denials and chain status, a
// denial that arrives while the page is open, and a pending request, clicks Approve, and the
// component's gate accepts the decision (its Check verified the operator's signature).
func TestBrowser(t *testing.T) {
	f := newFixture(t, nil)
	id, verdict := f.ask(t, "fs.write", "write .git/hooks/pre-commit (12 bytes, mode 0755)")
	tab := browser(t)
	ctx := within(t, tab, time.Minute)
	row := chromedp.CSS(`#pending tr[data-id="` + id + `"]`)
	if err := chromedp.Do(ctx, chromedp.Navigate(f.d.URL()), chromedp.WaitVisible(chromedp.CSS(`#chains tr[data-component="net"]`)), chromedp.WaitVisible(row)); err != nil {
		t.Fatalf("load the dashboard: %v", err)
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.TextContent(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("the text of %s: %v", sel, err)
		}
		return s
	}
	if loc, err := chromedp.Run(ctx, chromedp.Location()); err != nil || strings.Contains(loc, "token") {
		t.Errorf("the page's address %q (%v): the token must leave the address bar", loc, err)
	}
	if cookies, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.cookie`)); err != nil || cookies != "" {
		t.Errorf("the page's script reads cookies %q (%v): the token's must be HttpOnly", cookies, err)
	}
	chains := text("#chains")
	for _, want := range []string{"net", "ok", "ends with its shutdown checkpoint", "fs", "running, signed through line 0"} {
		if !strings.Contains(chains, want) {
			t.Errorf("the chain status lacks %q:\n%s", want, chains)
		}
	}
	net := text(`#decisions table[data-component="net"]`)
	for _, want := range []string{"deny", "no egress rule names this host", "evil.example:443", "rule=host-not-allowed", `<img src=x onerror=alert(1)><b>bold</b>`} {
		if !strings.Contains(net, want) {
			t.Errorf("net's decisions lack %q:\n%s", want, net)
		}
	}
	if n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#decisions img, #decisions b").length`)); err != nil || n != 0 {
		t.Errorf("text a component logged became markup: %d elements (%v)", n, err)
	}
	if r := text(`#pending tr[data-id="` + id + `"]`); !strings.Contains(r, "write .git/hooks/pre-commit") || !strings.Contains(r, "fs.write") {
		t.Errorf("the pending request's row: %q", r)
	}

	// A denial the stack records while the page is open appears within the refresh.
	f.fsLog.Log(audit.Event{Action: "fs.write", Decision: "deny", Reason: "not_protected", Fields: map[string]string{"path": "src/live-denial.go"}})
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.querySelector('#decisions table[data-component="fs"]').textContent.includes("src/live-denial.go")`,
		chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		t.Errorf("a new denial did not appear on the open page: %v", err)
	}

	approve := chromedp.CSS(`#pending button[data-id="` + id + `"][data-decision="approve"][data-scope="once"]`)
	if err := chromedp.Do(ctx, chromedp.Click(approve), chromedp.WaitNotPresent(row)); err != nil {
		t.Fatalf("approve from the page: %v", err)
	}
	if msg := text("#message"); !strings.Contains(msg, "approve "+id) {
		t.Errorf("the page's message after Approve: %q", msg)
	}
	select {
	case v := <-verdict:
		if !v.Approved() || v.Reason() != gate.ReasonApproved {
			t.Errorf("the component's verdict after Approve on the page: approved=%v %s", v.Approved(), v.Reason())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the component never saw the page's approval")
	}
}
