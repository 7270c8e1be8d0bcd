package cli

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/sharness-ai/sharness/compose"
	"github.com/sharness-ai/sharness/host/engine"
	"github.com/sharness-ai/sharness/host/stack"
	"github.com/sharness-ai/sharness/internal/artefact"
	"github.com/sharness-ai/sharness/internal/seal"
	"github.com/sharness-ai/sharness/internal/throwawayca"
	"github.com/sharness-ai/sharness/policies/keys"
	"github.com/sharness-ai/sharness/policies/pbp"
)

// Claude Code as the agent: the image hack/build-claude-code.sh builds, the overlay that runs it,
// and the label by which run knows whether the image is built from this checkout's inputs.
const (
	claudeCode        = "claude-code"
	claudeCodeImage   = "sharness/claude-code:dev"
	claudeCodeOverlay = "compose/claude-code.yml"
	claudeCodeInputs  = "ai.sharness.claude-code.inputs"
	// worldManifest is the offline world's policy (the default policy and the world's test
	// switches), compiled to worldDir; worldOverlay adds the world and the model beside it.
	worldManifest = "policies/world/manifest.yaml"
	worldDir      = "compose/world"
	worldOverlay  = "compose/world.yml"
	// agentUID is the uid the agent, bash and fs run as: the workspace must be writable by it.
	agentUID = 65532
)

// worldNames are the hosts the offline world and model answer for (testkit/worldca's).
var worldNames = []string{"allowed.sharness.test", "denied.sharness.test", "api.anthropic.com"}

// runSignals are what run catches (a closed terminal too) so that the stack it started is removed: the terminal's
// interrupt reaches the agent too, which decides what to do with it.
var runSignals = []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}

// script runs one of the checkout's hack scripts with its output going to w. Tests replace it.
var script = func(ctx context.Context, w io.Writer, path string, args ...string) error {
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Stdout, cmd.Stderr = w, w
	return cmd.Run()
}

// scriptOutput runs a hack script and returns its stdout (build-claude-code.sh --inputs).
var scriptOutput = func(ctx context.Context, path string, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, path, args...).Output()
	return strings.TrimSpace(string(out)), err
}

// exitStatus is the agent's own exit status, which run exits with.
type exitStatus struct{ code int }

func (e exitStatus) Error() string { return fmt.Sprintf("the agent exited with status %d", e.code) }

type runFlags struct {
	project, agent, workspace, want string
	offline, yes, keep, build       bool
	timeout                         time.Duration
}

func (a *app) runCmd() *cobra.Command {
	f := runFlags{timeout: 3 * time.Minute}
	c := &cobra.Command{
		Use:   "run [--agent claude-code|IMAGE] [--workspace DIR] [--offline] [-- AGENT ARGUMENTS]",
		Short: "The whole job in one command: check the policy, start the engine and build the images if needed, start the stack, seal your key to its kms, run the agent on this terminal, then take the stack down",
		Long: "Run from the checkout. Refuses unless docker-compose.yml and compiled/ are what the manifest compiles\n" +
			"to, and the policy hash is the one you trust (--policy-hash or SHARNESS_AI_POLICY_HASH; without one,\n" +
			"run shows it and reads its first 12 hex digits from the terminal). Then it reads your Anthropic API\n" +
			"key (from the terminal without echo, or from stdin when that is not a terminal: never from argv),\n" +
			"starts an engine with hack/engine.sh when none answers (and stops it at the end), builds the images\n" +
			"that are missing (hack/build-images.sh; --build rebuilds them; Claude Code's image whenever its inputs\n" +
			"changed), installs the compiled policies the runtime shim checks, prepares the workspace (made, owned\n" +
			"by uid 65532, if it does not exist), records the session, starts every service but the agent, seals\n" +
			"the key to this session's kms (into a folder of its own, removed afterwards), runs the agent with\n" +
			"`docker compose run` on this terminal with the arguments after --, and removes every container and\n" +
			"network of the project, keeping its volumes (the audit record) unless --keep keeps it all up.\n" +
			"--agent claude-code runs Claude Code (compose/claude-code.yml); --agent IMAGE runs that local image\n" +
			"with its own entrypoint; neither changes the agent's confinement. --offline runs the offline world\n" +
			"instead of the internet: its policy (policies/world), its scripted model and a throwaway key.\n" +
			"Build, engine and compose output goes to a log file whose path is printed first.\n" +
			"Exit status: the agent's; 1 when a step failed or was refused; 2 on bad input.",
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("file") && f.offline {
				return errors.New("--offline runs the offline world's manifest (" + worldManifest + "): leave -f out")
			}
			return a.run(cmd.Context(), f, args)
		},
	}
	projectFlag(c, &f.project)
	c.Flags().StringVar(&f.agent, "agent", "", "the agent: claude-code, or a local image run with its own entrypoint (default: the compose file's demo agent)")
	c.Flags().StringVar(&f.workspace, "workspace", envOr(stack.EnvWorkspace, "workspace"), "the folder the agent works on, mounted at /workspace (env SHARNESS_AI_WORKSPACE)")
	c.Flags().BoolVar(&f.offline, "offline", false, "the offline world and its scripted model instead of the internet, with a throwaway key")
	c.Flags().StringVar(&f.want, "policy-hash", os.Getenv("SHARNESS_AI_POLICY_HASH"), "the policy hash you trust (env SHARNESS_AI_POLICY_HASH); without it, run asks you to confirm")
	c.Flags().BoolVar(&f.yes, "yes", false, "start without a person confirming the hash (warns)")
	c.Flags().BoolVar(&f.keep, "keep", false, "leave the stack up when the agent exits, and print how to look at it and stop it")
	c.Flags().BoolVar(&f.build, "build", false, "rebuild the images even when they are present")
	c.Flags().DurationVar(&f.timeout, "timeout", f.timeout, "how long every container may take to be running and healthy")
	return c
}

// runJob is one run's state: what it started, so that the end removes exactly that.
type runJob struct {
	a       *app
	f       runFlags
	log     io.Writer
	logPath string
	root    string // the checkout (the working directory)
	started bool   // run started the engine
	work    string // run's own folder: the sealed key, the agent's overlay
	project stack.Project
	up      bool
	step    string
	began   time.Time
}

func (j *runJob) begin(step string) {
	j.step, j.began = step, time.Now()
	fmt.Fprintf(j.a.errOut, "run: %s… ", step)
	fmt.Fprintf(j.log, "\n==> run: %s (%s)\n", step, time.Now().UTC().Format(time.RFC3339))
}

func (j *runJob) end() {
	fmt.Fprintf(j.a.errOut, "done (%s)\n", time.Since(j.began).Round(100*time.Millisecond))
	j.step = ""
}

// fail ends the current step as failed and returns err, naming the log.
func (j *runJob) fail(err error) error {
	if j.step != "" {
		fmt.Fprintf(j.a.errOut, "failed\n")
		fmt.Fprintf(j.log, "run: %s failed: %v\n", j.step, err)
		j.step = ""
	}
	return fmt.Errorf("%w (log: %s)", err, j.logPath)
}

func (a *app) run(parent context.Context, f runFlags, args []string) (err error) {
	if err := checkProject(f.project); err != nil {
		return err
	}
	if f.want != "" {
		if err := keys.CheckHash(f.want); err != nil {
			return err
		}
	}
	if f.timeout <= 0 {
		return fmt.Errorf("--timeout %s: want a positive duration", f.timeout)
	}
	if f.agent != "" && f.agent != claudeCode && !stack.IsImageRef(f.agent) {
		return fmt.Errorf("--agent %q: claude-code, or a local image's name[:tag][@digest]", f.agent)
	}
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(root, "hack", "build-images.sh")); err != nil {
		return fmt.Errorf("run works from the SHarness checkout (hack/build-images.sh builds the images): %s is not one", root)
	}
	dir, files := ".", []string{compose.File}
	if f.offline {
		a.manifest, dir = worldManifest, worldDir
		files = []string{filepath.Join(worldDir, compose.File), worldOverlay}
	}
	if f.agent == claudeCode {
		files = append(files, claudeCodeOverlay)
	}
	m, err := a.load()
	if err != nil {
		return err
	}
	if err := stack.CheckCompiled(m, a.manifest, dir, a.errOut); err != nil {
		return err
	}
	names := stack.KeySecrets(m)
	if len(names) != 1 {
		return refused{fmt.Errorf("the policy's llm components name %d API keys %v: run seals exactly one; start the stack with `sharness-ai up` and seal each yourself", len(names), names)}
	}
	// One reader for the confirmation and, from a pipe, the key after it.
	in := bufio.NewReader(confirmInput)
	if err := a.trustHash("run", in, m.Hash, f.want, f.yes); err != nil {
		return err
	}
	key, err := a.readKey(in, f.offline)
	if err != nil {
		return err
	}
	defer clear(key)

	logPath, logFile, err := openRunLog()
	if err != nil {
		return err
	}
	defer logFile.Close()
	fmt.Fprintf(a.errOut, "run: log %s\n", logPath)
	j := &runJob{a: a, f: f, log: logFile, logPath: logPath, root: root}

	// Caught, so that what run started is removed; the agent gets the terminal's own.
	ctx, stop := signal.NotifyContext(parent, runSignals...)
	defer stop()
	defer func() {
		if derr := j.teardown(context.WithoutCancel(ctx)); derr != nil && err == nil {
			err = derr
		}
	}()
	code, err := j.steps(ctx, m, dir, files, names[0], key, args)
	if err != nil {
		return j.fail(err)
	}
	if code != 0 {
		return exitStatus{code}
	}
	return nil
}

// trustHash is up's rule: the supplied hash must be the manifest's; without one a person
// confirms it, unless --yes.
func (a *app) trustHash(verb string, in io.Reader, m, want string, yes bool) error {
	switch {
	case want != "" && want != m:
		return refused{fmt.Errorf("policy hash mismatch: the manifest is %s, the supplied hash is %s: nothing started", m, want)}
	case want != "":
		fmt.Fprintf(a.errOut, "%s: policy %s, as supplied\n", verb, m)
	case yes:
		fmt.Fprintf(a.errOut, "%s: WARNING: --yes: policy %s was NOT confirmed by a person\n", verb, m)
	default:
		return confirmHash(in, a.errOut, m)
	}
	return nil
}

// readKey is the Anthropic API key: typed on the terminal without echo, or read from stdin to
// EOF when that is not a terminal; offline, a throwaway one.
func (a *app) readKey(in io.Reader, offline bool) ([]byte, error) {
	if offline {
		b := make([]byte, 32)
		rand.Read(b)
		return []byte("sk-ant-api03-offline-" + hex.EncodeToString(b)), nil
	}
	if f, ok := secretInput.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		fmt.Fprint(a.errOut, "run: your Anthropic API key (not shown): ")
		key, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(a.errOut)
		if err != nil {
			return nil, fmt.Errorf("read the key from the terminal: %w", err)
		}
		return checkKey(key)
	}
	key, err := readSecret(in)
	if err != nil {
		return nil, fmt.Errorf("the API key from stdin: %w", err)
	}
	return checkKey(key)
}

func checkKey(key []byte) ([]byte, error) {
	k := strings.TrimSpace(string(key))
	if k == "" {
		return nil, errors.New("no API key given: nothing started")
	}
	if strings.ContainsAny(k, " \t\r\n") {
		return nil, errors.New("the API key holds white space: nothing started")
	}
	return []byte(k), nil
}

// openRunLog makes $XDG_STATE_HOME/sharness-ai/run-<time>.log (default ~/.local/state).
func openRunLog() (string, *os.File, error) {
	base := os.Getenv("XDG_STATE_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			home = os.TempDir()
		}
		base = filepath.Join(home, ".local", "state")
	}
	dir := filepath.Join(base, "sharness-ai")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", nil, err
	}
	path := filepath.Join(dir, "run-"+time.Now().Format("20060102-150405.000")+".log")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	return path, f, err
}

// steps does the job; the code is the agent's exit status.
func (j *runJob) steps(ctx context.Context, m *pbp.Manifest, dir string, files []string, name string, key []byte, args []string) (int, error) {
	a, f := j.a, j.f
	if err := j.engine(ctx); err != nil {
		return 0, err
	}
	// The end removes the project, whatever is there of it: so it must be run's own. A stack of
	// that name already there (another run, `up`, the e2e suite) is refused, not taken down.
	if cs, err := a.docker.ProjectContainers(ctx, f.project); err != nil {
		return 0, err
	} else if len(cs) > 0 {
		return 0, refused{fmt.Errorf("project %s already has %d containers (%s): stop it with `go run ./cmd/sharness-ai down -p %s`, or run under another name (-p)", f.project, len(cs), cs[0].Name, f.project)}
	}
	if err := j.images(ctx, m, files); err != nil {
		return 0, err
	}

	j.begin("installing the compiled policies")
	idir, _, err := stack.Install(m, policiesRoot(), true)
	if err != nil {
		return 0, err
	}
	if _, err := stack.RecordCode(ctx, m, idir, a.docker.ImageFile); err != nil {
		return 0, err
	}
	j.end()

	j.begin("preparing the workspace and the session")
	ws, err := runWorkspace(m, f.workspace, j.log)
	if err != nil {
		return 0, err
	}
	if j.work, err = os.MkdirTemp("", "sharness-run-"); err != nil {
		return 0, err
	}
	secrets := filepath.Join(j.work, "secrets")
	// kms (uid 65532 too) reads the sealed key through both folders.
	if err := os.Chmod(j.work, 0o755); err != nil {
		return 0, err
	}
	if err := os.Mkdir(secrets, 0o755); err != nil {
		return 0, err
	}
	env, err := worldEnv(f.offline, key)
	if err != nil {
		return 0, err
	}
	in := stack.SessionInputsFromEnv(stack.SessionInputs{Project: f.project, Policy: m.Hash, Manifest: a.manifest, Base: dir, Workspace: ws, Secrets: secrets}, os.Getenv)
	session, err := stack.NewSession(in)
	if err != nil {
		return 0, err
	}
	if _, err := stack.RecordSession(stack.SessionsDir(policiesRoot()), session); err != nil {
		return 0, err
	}
	j.end()
	fmt.Fprintf(a.errOut, "run: workspace %s\n", session.Workspace)

	j.begin("starting the stack")
	env = append(stack.SessionEnv(session), env...)
	// Every later compose command (up's polling of ps and logs, run, down) reads the same files,
	// which interpolate these: run is one process for one stack, so they go in its environment.
	for _, kv := range append(env, "SHARNESS_AI_POLICY_HASH="+m.Hash) {
		k, v, _ := strings.Cut(kv, "=")
		if err := os.Setenv(k, v); err != nil {
			return 0, err
		}
	}
	p := a.stack(f.project, files, m)
	p.Progress = j.log
	j.project, j.up = p, true // from here on the end removes the project, whatever is there of it
	image := ""
	if f.agent != claudeCode {
		image = f.agent
	}
	p, err = p.Up(ctx, stack.UpOptions{Agent: image, Timeout: f.timeout, Poll: pollInterval, Env: env})
	j.project = p
	if err != nil {
		if nr := (*stack.NotReady)(nil); errors.As(err, &nr) && nr.Rows != nil {
			a.printStatus(nr.Rows)
		}
		return 0, err
	}
	j.end()

	j.begin("sealing the key to this session's kms")
	b, err := p.KMSBundle(ctx, 30*time.Second)
	if err != nil {
		return 0, err
	}
	if b.PolicyHash() != m.Hash {
		return 0, refused{fmt.Errorf("the running kms serves policy %s, not %s: the key is not sealed to it", b.PolicyHash(), m.Hash)}
	}
	s, err := seal.Seal(b.Key(), name, key, time.Now().Add(24*time.Hour), nil)
	clear(key)
	if err != nil {
		return 0, err
	}
	if err := artefact.Write(secrets, map[string][]byte{name + ".sealed": s.Marshal()}); err != nil {
		return 0, err
	}
	j.end()
	warnHygiene(j.log, b)

	tty := isTerminal(os.Stdin) && isTerminal(os.Stdout)
	fmt.Fprintf(a.errOut, "run: the agent runs%s: %s\n", map[bool]string{true: " on this terminal", false: ""}[tty], strings.Join(append([]string{"agent"}, args...), " "))
	actx, stop := agentContext(ctx, tty)
	defer stop()
	code, err := p.Run(actx, env, args, tty, os.Stdin, a.out, a.errOut)
	if err != nil {
		return 0, err
	}
	fmt.Fprintf(a.errOut, "run: the agent exited with status %d\n", code)
	return code, nil
}

// agentContext is what the agent's run is cancelled by: SIGTERM, and SIGINT unless the agent is on
// the terminal, where the interrupt reaches it directly and is its to handle (Claude Code stops
// its turn and goes on), so run waits for it. Cancelled, the docker CLI is killed and the
// teardown stops and removes the agent's container.
func agentContext(ctx context.Context, tty bool) (context.Context, context.CancelFunc) {
	sigs := []os.Signal{syscall.SIGTERM}
	if !tty {
		sigs = append(sigs, os.Interrupt)
	}
	return signal.NotifyContext(context.WithoutCancel(ctx), sigs...)
}

func isTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }

// engine makes sure an engine answers with the runtime shim registered: one run starts itself
// (hack/engine.sh, after installing what is missing), or one that was running.
func (j *runJob) engine(ctx context.Context) error {
	if _, err := j.a.docker.ServerVersion(ctx); err != nil {
		j.begin("installing and starting the engine")
		for _, s := range [][]string{{"hack/engine.sh", "install"}, {"hack/runtime.sh", "install"}, {"hack/engine.sh", "start"}} {
			if err := script(ctx, j.log, filepath.Join(j.root, s[0]), s[1:]...); err != nil {
				return fmt.Errorf("%s: %w", strings.Join(s, " "), err)
			}
		}
		j.started = true
		j.end()
	}
	info, err := j.a.docker.Info(ctx)
	if err != nil {
		return err
	}
	if !slices.Contains(info.Runtimes, "sharness") {
		return refused{errors.New(`the running engine has no runtime "sharness": restart it with hack/engine.sh (which registers the runtime shim), or register sharness-runtime in its daemon.json`)}
	}
	return nil
}

// images builds what is missing (all of it with --build), and Claude Code's image whenever its
// inputs changed.
func (j *runJob) images(ctx context.Context, m *pbp.Manifest, files []string) error {
	if j.f.agent == claudeCode {
		want, err := scriptOutput(ctx, filepath.Join(j.root, "hack/build-claude-code.sh"), "--inputs")
		if err != nil {
			return fmt.Errorf("hack/build-claude-code.sh --inputs: %w", err)
		}
		info, err := j.a.docker.Image(ctx, claudeCodeImage)
		if err != nil && !errors.Is(err, engine.ErrNoImage) {
			return err
		}
		if info == nil || info.Labels[claudeCodeInputs] != want || j.f.build {
			j.begin("building " + claudeCodeImage + " (the Claude Code hack/build-claude-code.sh pins)")
			if err := script(ctx, j.log, filepath.Join(j.root, "hack/build-claude-code.sh")); err != nil {
				return fmt.Errorf("hack/build-claude-code.sh: %w", err)
			}
			j.end()
		}
	}
	missing := j.f.build
	if !missing {
		images, err := j.a.docker.ComposeImages(ctx, j.a.stack(j.f.project, files, m).ComposeProject(), configEnv(m.Hash))
		if err != nil {
			return err
		}
		for s, img := range images {
			if s == stack.AgentService && j.f.agent != "" {
				continue
			}
			if _, err := j.a.docker.Image(ctx, img); errors.Is(err, engine.ErrNoImage) {
				missing = true
				break
			} else if err != nil {
				return err
			}
		}
	}
	if missing {
		j.begin("building the images (hack/build-images.sh)")
		if err := script(ctx, j.log, filepath.Join(j.root, "hack/build-images.sh")); err != nil {
			return fmt.Errorf("hack/build-images.sh: %w", err)
		}
		j.end()
	}
	return nil
}

// runWorkspace is the workspace folder, made (owned by the agent's uid) when it does not exist,
// with its protected paths prepared.
func runWorkspace(m *pbp.Manifest, dir string, log io.Writer) (string, error) {
	if _, err := os.Lstat(dir); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", err
		}
		// Lchown: a symbolic link put in its place since is not followed to another folder.
		if err := os.Lchown(dir, agentUID, agentUID); err != nil {
			os.Remove(dir)
			return "", fmt.Errorf("give the new workspace %s to uid %d (the agent, bash and fs run as it): %w: run as root, or make it yourself, writable by that uid", dir, agentUID, err)
		}
		fmt.Fprintf(log, "run: made the workspace %s, owned by uid %d\n", dir, agentUID)
	}
	w, err := stack.PrepareWorkspace(m, dir)
	if err != nil {
		return "", err
	}
	if len(w.Warnings) > 0 {
		return "", refused{fmt.Errorf("workspace %s: %s", dir, strings.Join(w.Warnings, "; "))}
	}
	return filepath.Abs(dir)
}

// worldEnv is what the offline world needs: its throwaway TLS leaf and CA (whose key is dropped
// at once), and the hash of the one key the offline model accepts, so that only the key sealed
// to kms, never the agent's placeholder, gets an answer.
func worldEnv(offline bool, key []byte) ([]string, error) {
	if !offline {
		return nil, nil
	}
	p, err := throwawayca.IssuePEM("sharness offline world throwaway CA", worldNames, time.Now())
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(key)
	return []string{"SHARNESS_WORLD_CA_PEM=" + p.CA, "SHARNESS_WORLD_TLS_CERT=" + p.Chain, "SHARNESS_WORLD_TLS_KEY=" + p.Key,
		"SHARNESS_MODEL_EXPECT_KEY_SHA256=" + hex.EncodeToString(sum[:]), "SHARNESS_PROBE_HOST_ADDRS=" + probeHostAddrs()}, nil
}

// probeHostAddrs are the host's own addresses, port 9, and the edge and world gateways, which the
// demo agent's side-door probe must find closed (hack/up.sh gives it the same).
func probeHostAddrs() string {
	var addrs []string
	if as, err := net.InterfaceAddrs(); err == nil {
		for _, a := range as {
			if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && n.IP.IsGlobalUnicast() {
				addrs = append(addrs, net.JoinHostPort(n.IP.String(), "9"))
			}
		}
	}
	for _, gw := range []string{"10.213.0.1:9", "10.214.0.1:9"} {
		if !slices.Contains(addrs, gw) {
			addrs = append(addrs, gw)
		}
	}
	return strings.Join(addrs, ",")
}

// configEnv lets compose read the stack's files for their images before the session's values
// and the offline world's material exist.
func configEnv(hash string) []string {
	env := append(os.Environ(), "SHARNESS_AI_POLICY_HASH="+hash)
	for _, k := range []string{"SHARNESS_WORLD_CA_PEM", "SHARNESS_WORLD_TLS_CERT", "SHARNESS_WORLD_TLS_KEY"} {
		if os.Getenv(k) == "" {
			env = append(env, k+"=-")
		}
	}
	return env
}

// teardown removes what run started, unless --keep: the project's containers and networks
// (its volumes, the audit record, stay), run's folder, and the engine if run started it.
func (j *runJob) teardown(ctx context.Context) error {
	a := j.a
	if j.f.keep && j.up {
		fmt.Fprintf(a.errOut, "run: kept the stack %s up, as --keep asks. Look at it, then stop it:\n"+
			"  go run ./cmd/sharness-ai status -p %s\n  go run ./cmd/sharness-ai audit verify --project %s --policy-hash %s\n"+
			"  go run ./cmd/sharness-ai down -p %s && rm -rf %s%s\n",
			j.f.project, j.f.project, j.f.project, j.project.Policy.Hash, j.f.project, j.work, map[bool]string{true: " && hack/engine.sh stop"}[j.started])
		return nil
	}
	var errs []error
	if j.up {
		j.begin("removing the stack")
		d, err := j.project.Down(ctx, stack.DownOptions{})
		if err != nil {
			fmt.Fprintln(a.errOut, "failed")
			errs = append(errs, err)
		} else {
			j.end()
			if len(d.Kept) > 0 {
				fmt.Fprintf(a.errOut, "run: kept the audit record and the gate's state (%d volumes of %s); verify it with `go run ./cmd/sharness-ai audit verify --project %s --policy-hash %s`, delete it with `go run ./cmd/sharness-ai down -p %s --volumes`\n",
					len(d.Kept), j.f.project, j.f.project, j.project.Policy.Hash, j.f.project)
			}
		}
	}
	// up --agent's override file is kept for the person to start the agent with; run started it
	// already, and the file goes with the stack.
	if o := j.project.Override; o != "" {
		if err := os.RemoveAll(filepath.Dir(o)); err != nil {
			errs = append(errs, err)
		}
	}
	if j.work != "" {
		if err := os.RemoveAll(j.work); err != nil {
			errs = append(errs, err)
		}
	}
	if j.started {
		j.begin("stopping the engine run started")
		if err := script(ctx, j.log, filepath.Join(j.root, "hack/engine.sh"), "stop"); err != nil {
			fmt.Fprintln(a.errOut, "failed")
			errs = append(errs, fmt.Errorf("hack/engine.sh stop: %w: the engine is still up", err))
		} else {
			j.end()
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w (log: %s)", errors.Join(errs...), j.logPath)
	}
	return nil
}
