package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// failing is an engine whose every command prints stdout and stderr and fails with exit status 1.
func failing(stdout, stderr string) *Docker {
	return With(func(_ context.Context, c Command) error {
		fmt.Fprint(c.Stdout, stdout)
		fmt.Fprint(c.Stderr, stderr)
		return errors.New("exit status 1")
	})
}

// TestError: a failed command's error names it and quotes what docker printed on stderr (its
// first line under Brief), unless that went to the caller.
func TestError(t *testing.T) {
	p := Project{Name: "demo", Files: []string{"a.yml"}}
	for _, tc := range []struct {
		name string
		call func(d *Docker) error
		d    *Docker
		want string
	}{
		{"captured", func(d *Docker) error { _, err := d.ContainerRuntime(context.Background(), "id"); return err }, failing("", "Error: No such object: id\nmore\n"),
			"docker inspect -f {{.HostConfig.Runtime}} id: exit status 1: Error: No such object: id\nmore"},
		{"brief", func(d *Docker) error { _, err := d.ContainerRuntime(context.Background(), "id"); return err }, failing("", "Error: No such object: id\nmore\n").Brief(time.Second),
			"docker inspect -f {{.HostConfig.Runtime}} id: exit status 1: Error: No such object: id"},
		{"nothing on stderr", func(d *Docker) error { _, err := d.ComposeLogs(context.Background(), p, "kms", 0); return err }, failing("", ""),
			"docker compose -p demo -f a.yml logs --no-log-prefix kms: exit status 1: "},
		{"streamed", func(d *Docker) error { return d.ComposeDown(context.Background(), p, true, io.Discard) }, failing("", "Removing"),
			"docker compose -p demo -f a.yml down --remove-orphans --volumes: exit status 1"},
		{"no image", func(d *Docker) error { _, err := d.Image(context.Background(), "me/x:1"); return err }, failing("[]", "Error response from daemon: No such image: me/x:1"),
			"me/x:1: no such image on this engine"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call(tc.d)
			if err == nil || err.Error() != tc.want {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
			if ee := (*Error)(nil); tc.name != "no image" && (!errors.As(err, &ee) || ee.Err.Error() != "exit status 1") {
				t.Errorf("%v is not an *Error wrapping the command's error", err)
			}
		})
	}
}

// TestVolumes: only names that begin with the prefix, whatever else docker's filter matched.
func TestVolumes(t *testing.T) {
	var args []string
	d := With(func(_ context.Context, c Command) error {
		args = c.Args
		fmt.Fprint(c.Stdout, "demo_audit-kms\nold-demo_audit-kms\ndemo_audit-net\n")
		return nil
	})
	got, err := d.Volumes(context.Background(), "demo_audit-")
	if err != nil || !cmp.Equal(got, []string{"demo_audit-kms", "demo_audit-net"}) {
		t.Errorf("got %q, %v", got, err)
	}
	if want := []string{"volume", "ls", "--filter", "name=demo_audit-", "--format", "{{.Name}}"}; !cmp.Equal(args, want) {
		t.Errorf("docker %q, want %q", args, want)
	}
}

// TestProjectObjects: a project's containers, networks and volumes are found by compose's
// project label, run containers included, and removed by name; an unreadable ps line is an
// error, not a container fewer.
func TestProjectObjects(t *testing.T) {
	var calls [][]string
	answers := map[string]string{
		"ps":      "0123abcd\tdemo-kms-1\trunning\tkms\tFalse\nfedc9876\tdemo-agent-run-1a2b3c\texited\tagent\tTrue\n",
		"network": "demo_edge-agent-bash\ndemo_edge-agent-fs\n",
		"volume":  "demo_audit-kms\ndemo_gate-fs\n",
	}
	d := With(func(_ context.Context, c Command) error {
		calls = append(calls, c.Args)
		fmt.Fprint(c.Stdout, answers[c.Args[0]])
		return nil
	})
	ctx := context.Background()
	cs, err := d.ProjectContainers(ctx, "demo")
	want := []Container{{ID: "0123abcd", Name: "demo-kms-1", State: "running", Service: "kms"}, {ID: "fedc9876", Name: "demo-agent-run-1a2b3c", State: "exited", Service: "agent", OneOff: true}}
	if diff := cmp.Diff(want, cs); err != nil || diff != "" {
		t.Errorf("ProjectContainers: %v (-want +got):\n%s", err, diff)
	}
	nets, err := d.ProjectNetworks(ctx, "demo")
	if err != nil || !cmp.Equal(nets, []string{"demo_edge-agent-bash", "demo_edge-agent-fs"}) {
		t.Errorf("ProjectNetworks: %q, %v", nets, err)
	}
	vols, err := d.ProjectVolumes(ctx, "demo")
	if err != nil || !cmp.Equal(vols, []string{"demo_audit-kms", "demo_gate-fs"}) {
		t.Errorf("ProjectVolumes: %q, %v", vols, err)
	}
	for _, err := range []error{d.StopContainers(ctx, 10*time.Second, "0123abcd", "fedc9876"), d.RemoveContainer(ctx, "0123abcd", "fedc9876"),
		d.RemoveNetwork(ctx, nets...), d.RemoveVolumes(ctx, vols...), d.StopContainers(ctx, time.Second), d.RemoveContainer(ctx), d.RemoveNetwork(ctx), d.RemoveVolumes(ctx)} {
		if err != nil {
			t.Error(err)
		}
	}
	label := "label=com.docker.compose.project=demo"
	wantCalls := [][]string{
		{"ps", "--all", "--no-trunc", "--filter", label, "--format", `{{.ID}}\t{{.Names}}\t{{.State}}\t{{.Label "com.docker.compose.service"}}\t{{.Label "com.docker.compose.oneoff"}}`},
		{"network", "ls", "--filter", label, "--format", "{{.Name}}"},
		{"volume", "ls", "--filter", label, "--format", "{{.Name}}"},
		{"stop", "--time", "10", "0123abcd", "fedc9876"},
		{"rm", "-f", "0123abcd", "fedc9876"},
		{"network", "rm", "demo_edge-agent-bash", "demo_edge-agent-fs"},
		{"volume", "rm", "demo_audit-kms", "demo_gate-fs"},
	} // and nothing for an empty list
	if diff := cmp.Diff(wantCalls, calls); diff != "" {
		t.Errorf("docker calls (-want +got):\n%s", diff)
	}
	answers["ps"] = "0123abcd demo-kms-1 running\n"
	if _, err := d.ProjectContainers(ctx, "demo"); err == nil {
		t.Error("an unreadable ps line was not an error")
	}
}
