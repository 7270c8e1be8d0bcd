package metrics

import (
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

func TestServe(t *testing.T) {
	m := New(func() int { return 3 }, func() int { return 5 })
	m.Observe("agent", true, "hosts", 10, 20)
	m.Observe("agent", false, "host-not-allowed", 0, 0)
	server, client := net.Pipe()
	go func() { m.Serve(server, time.Second); server.Close() }()
	body, _ := io.ReadAll(client)
	for _, want := range []string{
		"HTTP/1.1 200", "Cache-Control: no-store",
		`sharness_net_decisions_total{allow="true",caller="agent",rule="hosts"} 1`,
		`sharness_net_decisions_total{allow="false",caller="agent",rule="host-not-allowed"} 1`,
		`sharness_net_bytes_total{direction="in"} 10`, `sharness_net_bytes_total{direction="out"} 20`,
		"sharness_net_tunnels_open 3", "sharness_net_conns_open 5",
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %q:\n%s", want, body)
		}
	}
}
