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
			"docker compose -p demo -f a.yml down --volumes: exit status 1"},
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
