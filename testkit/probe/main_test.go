package main

import (
	"net/netip"
	"strings"
	"testing"
)

func TestConfigFrom(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	cfg, err := configFrom(env(map[string]string{
		"SHARNESS_PROBE_WORLD_ADDR": "172.30.99.10",
		"SHARNESS_PROBE_HOST_ADDRS": "172.30.99.1:22, 10.0.2.15:2375,",
		"https_proxy":               "http://net:3128",
		"HTTP_PROXY":                "http://net:3128",
		"SPIFFE_ENDPOINT_SOCKET":    "unix:///run/sharness/identity/agent/agent.sock",
		"SHARNESS_PROBE_CA_PEM":     "-----BEGIN CERTIFICATE-----",
	}), "nameserver 127.0.0.11\noptions ndots:0\n")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.world != netip.MustParseAddr("172.30.99.10") || len(cfg.hostAddrs) != 2 || cfg.hostAddrs[1].Port() != 2375 ||
		cfg.proxy.Host != "net:3128" || cfg.httpProxy.Host != "net:3128" || cfg.caPEM != "-----BEGIN CERTIFICATE-----" ||
		cfg.resolver != "127.0.0.11:53" || !strings.HasSuffix(cfg.spiffe, "agent.sock") {
		t.Errorf("configFrom = %+v", cfg)
	}
	if cfg.worldPort(7) != "172.30.99.10:7" || (config{}).worldPort(7) != "" {
		t.Errorf("worldPort = %q", cfg.worldPort(7))
	}
	empty, err := configFrom(env(nil), "")
	if err != nil || empty.world.IsValid() || empty.proxy != nil || empty.resolver != "127.0.0.11:53" {
		t.Errorf("empty environment: %+v, %v", empty, err)
	}
	for key, bad := range map[string]string{
		"SHARNESS_PROBE_WORLD_ADDR": "world",
		"SHARNESS_PROBE_HOST_ADDRS": "172.30.99.1",
		"HTTPS_PROXY":               "net:3128",
		"HTTP_PROXY":                "https://net:3128",
	} {
		if _, err := configFrom(env(map[string]string{key: bad}), ""); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("%s=%q: error %v, want one naming the value", key, bad, err)
		}
	}
}

// TestCatalogue checks the doors without trying them (they are meant for the agent's
// container): unique names, an expectation and a reason each, and the expectations the e2e
// policy relies on.
func TestCatalogue(t *testing.T) {
	cfg, err := configFrom(func(k string) string {
		return map[string]string{"SHARNESS_PROBE_WORLD_ADDR": "172.30.99.10", "SHARNESS_PROBE_HOST_ADDRS": "172.30.99.1:22"}[k]
	}, "")
	if err != nil {
		t.Fatal(err)
	}
	all := map[string]door{}
	for _, group := range [][]door{networkDoors(cfg), proxyDoors(cfg), allowedDoors(cfg), fileDoors(cfg), syscallDoors(), procDoors()} {
		for _, d := range group {
			if _, dup := all[d.Name]; dup {
				t.Errorf("door %q twice", d.Name)
			}
			if d.Name == "" || d.Expected == "" || d.Why == "" || d.Try == nil {
				t.Errorf("door %+v lacks a name, an expectation, a reason or an attempt", d)
			}
			all[d.Name] = d
		}
	}
	want := map[string]string{
		"ip-literal/decimal":             ruleIPLiteral,
		"ip-literal/ipv4-mapped":         ruleIPLiteral,
		"ip-literal/world-address":       ruleIPLiteral,
		"special-range/private":          "403 special-range:private-use",
		"special-range/metadata":         "403 special-range:cloud-metadata",
		"disallowed-port/8443":           "403 port-not-allowed",
		"redirect/to-denied-host":        "302 then 403 host-not-allowed|302 then 403 deny-host",
		"direct-udp/world":               "ENETUNREACH|EHOSTUNREACH|timeout",
		"host-service/172.30.99.1:22":    "ENETUNREACH|EHOSTUNREACH|timeout|EACCES", // EACCES: Landlock
		"direct-tcp/world":               "ENETUNREACH|EHOSTUNREACH|timeout|EACCES",
		"landlock/exec-unlisted":         "EACCES",
		"landlock/connect-unlisted-port": "EACCES",
		"memfd-exec/unsealed-create":     "EPERM",
		"fork-bomb":                      "EAGAIN",
		"allowed-curl":                   "hello from allowed.sharness.test",
	}
	for name, expected := range want {
		if d, ok := all[name]; !ok || d.Expected != expected {
			t.Errorf("door %s expects %q, want %q", name, d.Expected, expected)
		}
	}
	if len(all) < 55 {
		t.Errorf("%d doors; the catalogue lost some", len(all))
	}
}
