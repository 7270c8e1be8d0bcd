package stack

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/sharness-ai/sharness/host/engine"
	"github.com/sharness-ai/sharness/policies/pbp"
)

// UpOptions are what Up may be told.
type UpOptions struct {
	Agent   string        // a local image to run as the agent ("": the compose file's)
	Timeout time.Duration // how long every container may take to be running and healthy
	Poll    time.Duration // how often to ask compose how the containers are (0: every second)
	Env     []string      // more environment for compose, after the process's (SessionEnv)
}

// NotReady is Up's refusal when the services it started did not all become ready: why, and the
// stack's status then (nil if it could not be read), so that the person sees what did start.
type NotReady struct {
	Rows []Row
	err  error
}

func (e *NotReady) Error() string { return e.err.Error() }
func (e *NotReady) Unwrap() error { return e.err }

// logTail is how many of a failing component's last log lines up shows.
const logTail = 20

// Up starts every service of p but the agent and waits until each runs, healthy where it has a
// health check, saying on p.Progress what each image is and when each container's state
// changes. Before anything starts, it refuses a missing image (up never pulls: no registry is
// reachable) and, with o.Agent, an agent image that could not run as the agent. Compose gets the
// process environment with SHARNESS_AI_POLICY_HASH set to p.Policy's hash.
//
// It returns p as started: with o.Agent, its Files end with the agent's compose file, which is
// kept for the person to start the agent with, and removed when Up fails.
func (p Project) Up(ctx context.Context, o UpOptions) (_ Project, err error) {
	env := append(withPolicyHash(p.Policy.Hash), o.Env...)
	if o.Agent != "" {
		override, err := p.agentOverride(ctx, AgentService, o.Agent)
		if err != nil {
			return p, err
		}
		p.Files, p.Override = append(slices.Clone(p.Files), override), override
		defer func() { // kept for the person only when the stack is up
			if err != nil {
				os.RemoveAll(filepath.Dir(override))
			}
		}()
	}
	images, err := p.Engine.ComposeImages(ctx, p.compose(), env)
	if err != nil {
		return p, err
	}
	services := slices.Sorted(maps.Keys(images))
	if err := p.checkImages(ctx, services, images); err != nil {
		return p, err
	}
	services = slices.DeleteFunc(services, func(s string) bool { return s == AgentService })
	if err := p.startAndWait(ctx, env, services, o); err != nil {
		rows, serr := p.Status(ctx) // show what did start; the up failure is the error
		if serr != nil {
			rows = nil
		}
		return p, &NotReady{rows, err}
	}
	return p, nil
}

// withPolicyHash is the process environment, which compose needs for interpolation (hack/up.sh's
// SHARNESS_AI_WORKSPACE, SHARNESS_AI_SECRETS_DIR...), with SHARNESS_AI_POLICY_HASH set to m.
func withPolicyHash(m string) []string {
	env := []string{}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SHARNESS_AI_POLICY_HASH=") {
			env = append(env, kv)
		}
	}
	return append(env, "SHARNESS_AI_POLICY_HASH="+m)
}

// checkImages prints a line per image of the services about to start, and refuses, naming
// them, if any is missing.
func (p Project) checkImages(ctx context.Context, services []string, images map[string]string) error {
	users := map[string][]string{}
	for _, s := range services {
		if images[s] != "" {
			users[images[s]] = append(users[images[s]], s)
		}
	}
	var missing []string
	for _, img := range slices.Sorted(maps.Keys(users)) {
		info, err := p.Engine.Image(ctx, img)
		switch {
		case errors.Is(err, engine.ErrNoImage):
			fmt.Fprintf(p.Progress, "up: image %s (%s): MISSING\n", img, strings.Join(users[img], ", "))
			missing = append(missing, img)
		case err != nil:
			return err
		default:
			fmt.Fprintf(p.Progress, "up: image %s (%s): present, %s, %.1f MB\n", img, strings.Join(users[img], ", "), shortID(info.ID), float64(info.Size)/1e6)
		}
	}
	if len(missing) > 0 {
		return refused{fmt.Errorf("%d images missing on this engine (%s): nothing started; build them with hack/build-images.sh (up never pulls: no registry is reachable)", len(missing), strings.Join(missing, ", "))}
	}
	return nil
}

func shortID(id string) string {
	if h, ok := strings.CutPrefix(id, "sha256:"); ok && len(h) >= 12 {
		return "sha256:" + h[:12]
	}
	return id
}

// imageRef is what --agent takes: a local image's name, tag or digest (no option, no space).
var imageRef = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._/:@-]{0,254}$`)

// IsImageRef reports whether s is what --agent takes.
func IsImageRef(s string) bool { return imageRef.MatchString(s) }

// agentOverride checks the image of --agent and writes the compose file that runs it as the
// agent: the image, and its own entrypoint and command (the demo agent's /sharness-agent is not
// in another image). Nothing else of the agent service changes, so its confinement, networks,
// identity and environment are still docker-compose.yml's, and the runtime shim still holds the
// container to the agent's compiled policy. The file goes to a folder of its own, kept: the
// person starts the agent with it after up.
func (p Project) agentOverride(ctx context.Context, service, image string) (string, error) {
	if !imageRef.MatchString(image) {
		return "", fmt.Errorf("--agent %q: not an image reference (name[:tag][@digest])", image)
	}
	c := p.Policy.Component(service)
	if c == nil || c.Kind != pbp.KindApp {
		return "", fmt.Errorf("--agent: the manifest has no %s component of kind app to run it as", service)
	}
	info, err := p.Engine.Image(ctx, image)
	if errors.Is(err, engine.ErrNoImage) {
		fmt.Fprintf(p.Progress, "up: agent image %s: MISSING\n", image)
		return "", refused{fmt.Errorf("--agent %s: no such image on this engine: nothing started; build it (docker build) or load it (docker load) first: up never pulls (no registry is reachable)", image)}
	} else if err != nil {
		return "", err
	}
	entrypoint, command := info.Entrypoint, info.Cmd
	if len(entrypoint) == 0 && len(command) > 0 {
		entrypoint, command = command[:1], command[1:]
	}
	if len(entrypoint) == 0 {
		return "", refused{fmt.Errorf("--agent %s: the image names no entrypoint nor command to run: nothing started", image)}
	}
	if err := execAllowed(c, entrypoint[0]); err != nil {
		return "", refused{fmt.Errorf("--agent %s: %w: nothing started", image, err)}
	}
	if len(info.Volumes) > 0 {
		fmt.Fprintf(p.Progress, "up: WARNING: agent image %s declares volumes %v: the engine mounts an anonymous volume there, which the runtime shim refuses as wider than the policy\n", image, info.Volumes)
	}
	if c.CodeSHA256 != "" {
		fmt.Fprintf(p.Progress, "up: the policy pins the agent's code (subject.code_sha256 %s): the runtime shim refuses an image whose %s does not hash to it\n", c.CodeSHA256, strings.Join(c.Entrypoint, " "))
	}
	fmt.Fprintf(p.Progress, "up: agent image %s runs %s\n", image, strings.Join(append(slices.Clone(entrypoint), command...), " "))
	// JSON is YAML: every value is quoted exactly, whatever the image's name and arguments.
	q := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	if command == nil {
		command = []string{}
	}
	body := fmt.Sprintf("# Written by sharness-ai up --agent. The agent's image and its own entrypoint and command;\n"+
		"# everything else about the agent is docker-compose.yml's, and the runtime shim holds it to the\n"+
		"# agent's compiled policy. The policy hash does not cover this file.\nservices:\n  %s:\n    image: %s\n    entrypoint: %s\n    command: %s\n",
		service, q(image), q(entrypoint), q(command))
	dir, err := os.MkdirTemp("", "sharness-ai-agent-")
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "agent.yml")
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		return "", err
	}
	return path, nil
}

// execAllowed says whether the component's Landlock domain lets the entrypoint run: the shim
// applies process.exec, so an entrypoint outside it would fail with EACCES after the stack is up.
// A relative entrypoint (found through PATH in the image) cannot be checked here.
func execAllowed(c *pbp.Component, entry string) error {
	if len(c.Exec) == 0 || !filepath.IsAbs(entry) {
		return nil
	}
	for _, x := range c.Exec {
		if x == entry || strings.HasSuffix(x, "/") && strings.HasPrefix(entry, x) {
			return nil
		}
	}
	return fmt.Errorf("its entrypoint %s is not in the %s policy's process.exec (%s): Landlock would refuse to run it; add it to the policy (a new hash)", entry, c.Name, strings.Join(c.Exec, ", "))
}

// ready says whether a service's container is up as up wants it, and why not.
func ready(r engine.Container) (ok, failed bool, why string) {
	switch {
	case r.State == "running" && (r.Health == "" || r.Health == "healthy"):
		return true, false, ""
	case r.State == "exited" || r.State == "dead" || r.Health == "unhealthy":
		return false, true, describe(r)
	}
	return false, false, describe(r)
}

func describe(r engine.Container) string {
	switch {
	case r.State == "":
		return "not created"
	case r.Health == "healthy":
		return r.State + ", healthy"
	case r.Health != "":
		return r.State + ", health " + r.Health
	}
	return r.State
}

// startAndWait runs `compose up --detach` for services and, while it runs and after, prints a
// line for each container whenever its state or health changes. Once compose has returned, it
// returns when every service runs (healthy, where it has a health check), and refuses when
// compose failed or a container exited or is unhealthy; it refuses after o.Timeout in any case.
// A refusal shows the last log lines of every service not ready.
func (p Project) startAndWait(ctx context.Context, env, services []string, o UpOptions) error {
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	var upOut bytes.Buffer // compose's own progress: shown when it fails
	done := make(chan error, 1)
	go func() { done <- p.Engine.ComposeUp(ctx, p.compose(), env, services, &upOut) }()
	upRunning, upErr := done, error(nil) // upRunning is nil once compose has returned
	began, seen := time.Now(), map[string]string{}
	poll := o.Poll
	if poll <= 0 {
		poll = time.Second
	}
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for {
		bad, notReady, err := p.progress(ctx, services, seen, began)
		// While compose runs, a container may still be the exited one of an earlier run: only
		// once it has returned is every container this run's.
		switch {
		case upRunning == nil && err == nil && len(bad) > 0:
			return p.upFailed(parent, bad, strings.Join(bad, ", "))
		case upRunning == nil && upErr != nil:
			fmt.Fprintf(p.Progress, "up: docker compose up failed:\n%s", indent(lastLines(upOut.String(), logTail)))
			return p.upFailed(parent, notReady, upErr.Error())
		case err == nil && upRunning == nil && len(notReady) == 0:
			return nil
		}
		select {
		case upErr = <-upRunning:
			upRunning = nil // and look once more at once
			continue
		case <-tick.C:
			continue
		case <-ctx.Done():
		}
		if upRunning != nil {
			<-upRunning
		}
		return p.upFailed(parent, notReady, fmt.Sprintf("not running and healthy after %s: %s", o.Timeout, strings.Join(notReady, ", ")))
	}
}

// progress asks compose how the services' containers are, prints a line for each whose state
// changed since seen, and names (as "service (why)") those that failed and those not ready.
func (p Project) progress(ctx context.Context, services []string, seen map[string]string, began time.Time) (bad, notReady []string, err error) {
	rows, err := p.Engine.ComposePS(ctx, p.compose())
	for _, s := range services {
		r := engine.Container{Service: s}
		if i := slices.IndexFunc(rows, func(r engine.Container) bool { return r.Service == s }); i >= 0 {
			r = rows[i]
		}
		ok, failed, why := ready(r)
		if now := describe(r); err == nil && seen[s] != now && (r.State != "" || seen[s] != "") {
			seen[s] = now
			fmt.Fprintf(p.Progress, "up: %s (%s): %s after %s\n", s, orDash(r.Name), now, time.Since(began).Round(time.Second))
		}
		if failed {
			bad = append(bad, s+" ("+why+")")
		}
		if !ok {
			notReady = append(notReady, s+" ("+why+")")
		}
	}
	return bad, notReady, err
}

// upFailed shows the last log lines of each service named (as "service (why)") and returns the
// refusal.
func (p Project) upFailed(ctx context.Context, named []string, reason string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for _, n := range named {
		s, _, _ := strings.Cut(n, " ")
		out, err := p.Engine.ComposeLogs(ctx, p.compose(), s, logTail)
		if err != nil {
			fmt.Fprintf(p.Progress, "up: no logs of %s: %v\n", s, err)
			continue
		}
		fmt.Fprintf(p.Progress, "up: last lines of %s:\n%s", s, indent(string(out)))
	}
	return refused{errors.New(reason)}
}

func lastLines(s string, n int) string {
	lines := strings.SplitAfter(strings.TrimRight(s, "\n")+"\n", "\n")
	lines = lines[:len(lines)-1]
	return strings.Join(lines[max(0, len(lines)-n):], "")
}

func indent(s string) string {
	if strings.TrimSpace(s) == "" {
		return "    (nothing)\n"
	}
	var b strings.Builder
	for line := range strings.Lines(strings.TrimRight(s, "\n") + "\n") {
		b.WriteString("    " + line)
	}
	return b.String()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
