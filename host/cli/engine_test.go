package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/sharness-ai/sharness/host/engine"
	"github.com/sharness-ai/sharness/testkit/enginetest"
)

// The verbs reach the engine through one engine.Docker, which run hands to execute
// (testEngine): its Engine API calls go to a fake engine (enginetest) a test sets with useAPI,
// and its compose commands to fakeEngine, which answers each through the fake a test set for
// its kind: composeLogs answers `docker compose logs kms` (kms bundle, import, doctor), and
// runDocker the rest (up, status, down). A command no fake answers fails, and an engine with
// nothing on it answers an API call it has nothing for with the engine's own 404: tests never
// reach a real engine.
var (
	runDocker   func(ctx context.Context, d dockerCmd) error
	composeLogs func(ctx context.Context, project string, files []string) ([]byte, error)
	testAPI     *enginetest.Engine // nil: an engine with nothing on it
	noEngine    bool               // no engine answers at all
)

// useAPI makes e the engine the verbs reach until the test ends.
func useAPI(t *testing.T, e *enginetest.Engine) {
	orig, origNo := testAPI, noEngine
	t.Cleanup(func() { testAPI, noEngine = orig, origNo })
	testAPI, noEngine = e, false
}

// testEngine is the engine of one run of a verb.
func testEngine(t *testing.T) *engine.Docker {
	if noEngine {
		return enginetest.NoEngine(t, fakeEngine)
	}
	e := testAPI
	if e == nil {
		e = &enginetest.Engine{}
	}
	return e.Start(t, fakeEngine)
}

// dockerCmd is one docker command as runDocker sees it, or one Engine API request the test's
// fake engine recorded (api: "GET /containers/json?all=1&filters=...").
type dockerCmd struct {
	args           []string
	env            []string
	stdout, stderr io.Writer
	api            string
}

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
	case runDocker != nil:
		return runDocker(ctx, dockerCmd{args: args, env: c.Env, stdout: c.Stdout, stderr: c.Stderr})
	}
	return fmt.Errorf("docker %s: no fake engine answers it", strings.Join(args, " "))
}
