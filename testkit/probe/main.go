// Command sharness-probe tries every side door of the agent container from inside it (the
// side-door suite, docs/architecture.md, "The wall") and prints one JSON line per attempt, {"door", "expected", "got",
// "ok", "reason"}, then {"summary": {"passed", "failed"}}. A door is ok only when the attempt
// failed for the expected reason: a success, or a failure of another kind, fails it. The
// allowed paths (curl and git over HTTPS through net) must succeed.
//
// It proves only what it tries, from where it runs: the same attempts from another container,
// or attempts it does not make (timing channels, an allowed host that accepts uploads), are
// outside its reach. Its verdicts on net's refusals assume the e2e policy: allowed.sharness.test
// on 80 and 443, private/metadata/loopback.sharness.test allowed by name so that the range
// check is what refuses them.
//
// Environment:
//
//	SHARNESS_PROBE_WORLD_ADDR  the world's IPv4 address, for direct attempts
//	SHARNESS_PROBE_HOST_ADDRS  ip:port,... services on the Docker host the agent must not reach
//	SHARNESS_PROBE_CA_PEM      the world CA's certificate (PEM), written to a file in $TMPDIR for
//	                           curl and git: a mounted file would be a mount the policy does not list
//	HTTPS_PROXY, HTTP_PROXY    net (http://net:3128), as the stack sets them
//	SPIFFE_ENDPOINT_SOCKET     the agent's Workload API socket, as the stack sets it
//
// It is meant for the agent's container. Run elsewhere it does what it says: it forks up to 256
// processes, fills /tmp with up to 1 GiB, maps up to 2 GiB, and calls mount, unshare and setns
// with arguments chosen to be harmless if they get through.
//
// Exit codes: 0 every door ok, 1 a door failed, 2 usage or configuration error.
package main

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/sharness-ai/sharness/testkit/reexec"
	"github.com/sharness-ai/sharness/testkit/sidedoor"
)

// maxPIDs is the agent's pids limit in the default policy (L3-agent, sized for Claude Code): the
// fork bomb must stop below it.
const maxPIDs = 256

// budget bounds the whole run.
const budget = 85 * time.Second

type config struct {
	world            netip.Addr
	hostAddrs        []netip.AddrPort
	ca               string // the world CA's PEM file, once written; "" without one
	caPEM            string
	proxy, httpProxy *url.URL
	spiffe           string
	resolver         string // ip:53 of the container's resolver
}

func main() {
	reexec.Init() // a re-executed copy runs its attempt and exits here
	if len(os.Args) != 1 {
		fmt.Fprintln(os.Stderr, "usage: sharness-probe (configured by its environment)")
		os.Exit(2)
	}
	resolvConf, _ := os.ReadFile("/etc/resolv.conf")
	cfg, err := configFrom(os.Getenv, string(resolvConf))
	if err != nil {
		fmt.Fprintln(os.Stderr, "sharness-probe:", err)
		os.Exit(2)
	}
	if cfg.caPEM != "" { // curl and git read the world's CA from a file
		if cfg.ca, err = sidedoor.TempFile("world-ca-*.pem", cfg.caPEM); err != nil {
			fmt.Fprintln(os.Stderr, "sharness-probe:", err)
			os.Exit(2)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	code := run(ctx, cfg, os.Stdout)
	cancel()
	os.Exit(code)
}

// configFrom reads the environment; a malformed value is an error, a missing one leaves its
// doors failing as "not configured".
func configFrom(getenv func(string) string, resolvConf string) (config, error) {
	cfg := config{caPEM: getenv("SHARNESS_PROBE_CA_PEM"),
		spiffe: getenv("SPIFFE_ENDPOINT_SOCKET"), resolver: sidedoor.ResolverAddr(resolvConf)}
	var errs []error
	var err error
	if s := getenv("SHARNESS_PROBE_WORLD_ADDR"); s != "" {
		cfg.world, err = netip.ParseAddr(s)
		errs = append(errs, named("SHARNESS_PROBE_WORLD_ADDR", err))
	}
	for s := range strings.SplitSeq(getenv("SHARNESS_PROBE_HOST_ADDRS"), ",") {
		if s = strings.TrimSpace(s); s != "" {
			ap, err := netip.ParseAddrPort(s)
			cfg.hostAddrs, errs = append(cfg.hostAddrs, ap), append(errs, named("SHARNESS_PROBE_HOST_ADDRS "+s, err))
		}
	}
	cfg.proxy, err = sidedoor.ProxyURL(cmp.Or(getenv("HTTPS_PROXY"), getenv("https_proxy")))
	errs = append(errs, named("HTTPS_PROXY", err))
	cfg.httpProxy, err = sidedoor.ProxyURL(cmp.Or(getenv("HTTP_PROXY"), getenv("http_proxy")))
	return cfg, errors.Join(append(errs, named("HTTP_PROXY", err))...)
}

// named says which setting an error is about; nil stays nil.
func named(setting string, err error) error {
	if err != nil {
		return fmt.Errorf("%s: %w", setting, err)
	}
	return nil
}

// run tries the network doors concurrently, then the local ones one at a time, the process
// limits last (while they hit, everything else may stall), and returns the exit code.
func run(ctx context.Context, cfg config, out io.Writer) int {
	sum, err := sidedoor.Report(ctx, out,
		sidedoor.Group{Doors: slices.Concat(networkDoors(cfg), proxyDoors(cfg)), Par: 16},
		sidedoor.Group{Doors: slices.Concat(allowedDoors(cfg), fileDoors(cfg), syscallDoors()), Par: 1},
		sidedoor.Group{Doors: procDoors(), Par: 1})
	if err != nil || sum.Failed > 0 {
		return 1 // a report that cannot be written is a failed report
	}
	return 0
}

// procDoors run in re-executed children: each could stop, replace or exhaust the probe.
func procDoors() []door {
	const long = 10 * time.Second
	return []door{
		{Name: "ptrace/traceme", Expected: "EPERM", Why: "tracing, hence reading and steering, another process", Try: reexec.Traceme},
		{Name: "memfd-exec/execveat", Expected: "EPERM", Why: "running code that never touched a file system", Try: reexec.MemfdExecveat},
		{Name: "memfd-exec/sealed-fexecve", Expected: "EACCES", Why: "running a sealed memfd through /proc/self/fd", Try: reexec.SealedMemfdExec},
		{Name: "tmp-fill", Expected: "ENOSPC", Limit: 5 * time.Second, Why: "filling memory through a tmpfs without a size",
			Try: func(ctx context.Context) (string, string) { return reexec.Fill(ctx, os.TempDir(), 1024) }},
		{Name: "tmp-exec", Expected: "EACCES", Why: "running a downloaded binary from the writable tmpfs",
			Try: func(ctx context.Context) (string, string) { return reexec.TmpExec(ctx, os.TempDir()) }},
		{Name: "fork-bomb", Expected: "EAGAIN", Limit: long, Why: "exhausting the host's process table",
			Try: func(ctx context.Context) (string, string) { return reexec.ForkBomb(ctx, maxPIDs) }},
		{Name: "memory-exhaustion", Expected: "SIGKILL", Limit: long, Why: "exhausting the host's memory", Try: reexec.MemoryExhaustion},
		{Name: "alive-after-limits", Expected: "alive", Why: "the limits must stop the offender, not the container", Try: reexec.Alive},
	}
}

// token is n random bytes in hex: fresh names defeat caches, on the way out and in the logs.
func token(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
