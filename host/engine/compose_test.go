package engine

import (
	"fmt"
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
