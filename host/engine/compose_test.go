package engine

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// psLine is one line of `docker compose ps --all --format json` as compose v2.40 prints it.
func psLine(service, state, health string) string {
	status := map[string]string{"running": "Up 2 minutes", "exited": "Exited (1) 1 minute ago", "created": "Created"}[state]
	if health != "" {
		status += " (" + health + ")"
	}
	return fmt.Sprintf(`{"Command":"\"/sharness-%[1]s\"","CreatedAt":"2026-03-02 10:14:07 +0000 UTC","ExitCode":0,"Health":%[3]q,"ID":"id-%[1]s","Image":"sharness/%[1]s:dev","Labels":"com.docker.compose.project=sharness,com.docker.compose.service=%[1]s","LocalVolumes":"1","Mounts":"sharness_audit-%[1]s","Name":"sharness-%[1]s-1","Names":"sharness-%[1]s-1","Networks":"sharness_edge-agent-%[1]s","Ports":"","Project":"sharness","Publishers":null,"RunningFor":"2 minutes ago","Service":%[1]q,"Size":"0B","State":%[2]q,"Status":%[4]q}`,
		service, state, health, status)
}

func TestParsePS(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []Container
		wantErr bool
	}{
		{name: "lines (compose 2.21 on)", in: psLine("kms", "running", "") + "\n" + psLine("fs", "running", "unhealthy") + "\n",
			want: []Container{{ID: "id-kms", Name: "sharness-kms-1", Service: "kms", State: "running"}, {ID: "id-fs", Name: "sharness-fs-1", Service: "fs", State: "running", Health: "unhealthy"}}},
		{name: "array (older compose)", in: "[" + psLine("net", "exited", "") + "]\n",
			want: []Container{{ID: "id-net", Name: "sharness-net-1", Service: "net", State: "exited"}}},
		{name: "an exit code", in: strings.Replace(psLine("agent", "exited", ""), `"ExitCode":0`, `"ExitCode":1`, 1) + "\n",
			want: []Container{{ID: "id-agent", Name: "sharness-agent-1", Service: "agent", State: "exited", ExitCode: 1}}},
		{name: "no containers", in: "", want: nil},
		{name: "garbage", in: "{\"Service\":", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parsePS([]byte(tc.in))
			if (err != nil) != tc.wantErr {
				t.Fatalf("err %v, want error %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); !tc.wantErr && diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func FuzzParsePS(f *testing.F) {
	f.Add([]byte(psLine("kms", "running", "healthy") + "\n"))
	f.Add([]byte("[" + psLine("net", "exited", "") + "]"))
	f.Fuzz(func(t *testing.T, data []byte) { parsePS(data) })
}

// TestComposeRun: the agent's exit status is run's result, not an error; the arguments reach
// compose after the service; -T without a terminal; a CLI that cannot start is an error.
func TestComposeRun(t *testing.T) {
	var got []string
	shell := func(code string) Runner {
		return func(ctx context.Context, c Command) error {
			got = c.Args
			return exec.CommandContext(ctx, "sh", "-c", "exit "+code).Run()
		}
	}
	p := Project{Name: "sharness", Files: []string{"docker-compose.yml"}}
	for _, tc := range []struct {
		code string
		tty  bool
		want int
	}{{"0", false, 0}, {"3", true, 3}, {"130", false, 130}} {
		n, err := With(shell(tc.code)).ComposeRun(context.Background(), p, nil, "agent", []string{"-p", "hi"}, tc.tty, nil, nil, nil)
		if err != nil || n != tc.want {
			t.Errorf("exit %s: got %d, %v; want %d", tc.code, n, err, tc.want)
		}
		want := []string{"compose", "-p", "sharness", "-f", "docker-compose.yml", "run", "--rm", "--no-deps", "-T", "agent", "-p", "hi"}
		if tc.tty {
			want = slices.Delete(want, 8, 9)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("args (-want +got):\n%s", diff)
		}
	}
	missing := func(context.Context, Command) error { return exec.ErrNotFound }
	if n, err := With(missing).ComposeRun(context.Background(), p, nil, "agent", nil, false, nil, nil, nil); err == nil || n != -1 {
		t.Errorf("no docker CLI: got %d, %v", n, err)
	}
}
