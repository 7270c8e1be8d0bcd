package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/sharness-ai/sharness/host/engine"
)

// The verbs reach the engine through one engine.Docker, which run hands to execute: fakeEngine,
// which answers each docker command through the fake a test set for its kind, as the CLI's
// wrappers of docker were before host/engine: composeLogs answers `docker compose logs kms`
// (kms bundle, import, doctor), dockerOutput the volume lookups (audit, gate, dashboard,
// export), and runDocker the rest (up, status, down, doctor's look at the launcher). A command
// no fake answers fails: tests never reach a real engine.
var (
	runDocker    func(ctx context.Context, d dockerCmd) error
	dockerOutput func(ctx context.Context, args ...string) ([]byte, error)
	composeLogs  func(ctx context.Context, project string, files []string) ([]byte, error)
)

// dockerCmd is one docker command as runDocker sees it.
type dockerCmd struct {
	args           []string
	env            []string
	stdout, stderr io.Writer
}

var testEngine = engine.With(fakeEngine)

func fakeEngine(ctx context.Context, c engine.Command) error {
	args := c.Args
	switch {
	case composeLogs != nil && len(args) > 3 && args[0] == "compose" && slices.Equal(args[len(args)-3:], []string{"logs", "--no-log-prefix", "kms"}):
		var project string
		var files []string
		for i := 1; i < len(args)-3; i += 2 {
			switch args[i] {
			case "-p":
				project = args[i+1]
			case "-f":
				files = append(files, args[i+1])
			}
		}
		out, err := composeLogs(ctx, project, files)
		c.Stdout.Write(out)
		return err
	case dockerOutput != nil && args[0] == "volume":
		out, err := dockerOutput(ctx, args...)
		c.Stdout.Write(out)
		return err
	case runDocker != nil:
		return runDocker(ctx, dockerCmd{args: args, env: c.Env, stdout: c.Stdout, stderr: c.Stderr})
	}
	return fmt.Errorf("docker %s: no fake engine answers it", strings.Join(args, " "))
}
