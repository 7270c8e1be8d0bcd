package main

import (
	"bytes"
	"context"
	"debug/buildinfo"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sharness-ai/sharness/policies/pbp"
)

// Peer names, in the order the report lists them.
const (
	peerDirect      = "direct"
	peerStdlib      = "stdlib"
	peerStdlibCopy  = "stdlib-copy"
	peerNet         = "net"
	peerNetNoLimit  = "net-nolimit"
	peerSmokescreen = "smokescreen"
)

// peer is one way to reach the origin: directly, or through a proxy process.
type peer struct {
	name    string
	proxy   string // the proxy's ip:port; "" dials the origin directly
	version string
	note    string
	cmd     *exec.Cmd
	exited  chan struct{}
	log     string // the proxy's stdout and stderr
}

func (p *peer) stop() {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	select {
	case <-p.exited:
		return
	default:
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		p.cmd.Process.Kill()
		<-p.exited
	}
}

// cpu is the user and system CPU time the proxy process has used so far (all its threads).
func (p *peer) cpu() (time.Duration, bool) {
	if p.cmd == nil || p.cmd.Process == nil {
		return 0, false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		return 0, false
	}
	_, rest, ok := bytes.Cut(b, []byte(") ")) // after the command name, which may hold spaces
	f := strings.Fields(string(rest))
	if !ok || len(f) < 13 {
		return 0, false
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64) // fields 14 and 15 of proc(5), in clock ticks
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(utime+stime) * time.Second / clockTicks, true
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's times: 100 on every Linux ABI Go
// supports.
const clockTicks = 100

// logTail is the end of the proxy's log, to explain a failure.
func (p *peer) logTail() string {
	b, err := os.ReadFile(p.log)
	if p.log == "" || err != nil || len(b) == 0 {
		return ""
	}
	return "\n--- end of " + p.log + " ---\n" + string(b[max(0, len(b)-2000):])
}

// startPeers starts every proxy of cfg and waits until each accepts connections. It returns
// the peers started so far even on error, so the caller can stop them.
func startPeers(ctx context.Context, cfg config, w *world) ([]*peer, error) {
	peers := []*peer{{name: peerDirect, note: "TLS straight to the origin on loopback"}}
	self, err := os.Executable()
	if err != nil {
		return peers, err
	}
	std, err := startStdlib(cfg, self, w, false)
	if err != nil {
		return peers, err
	}
	peers = append(peers, std)
	if cfg.stdlibCopy {
		if std, err = startStdlib(cfg, self, w, true); err != nil {
			return peers, err
		}
		peers = append(peers, std)
	}
	policy, hash, err := netPolicy(cfg, w)
	if err != nil {
		return peers, err
	}
	n, err := startNet(cfg, peerNet, policy, hash, w)
	if err != nil {
		return peers, err
	}
	n.note = "as built from this tree, its defaults as shipped (policy " + hash[:19] + "…)"
	peers = append(peers, n)
	if cfg.netNoLimit != "" {
		if n, err = startNet(cfg, peerNetNoLimit, policy, hash, w, "-rate-per-caller", cfg.netNoLimit); err != nil {
			return peers, err
		}
		n.note = "diagnostic: the same binary with -rate-per-caller " + cfg.netNoLimit + ", its flood brake out of the way; not the shipped default"
		peers = append(peers, n)
	}
	if cfg.smokescreen != "" {
		s, err := startSmokescreen(cfg, w)
		if err != nil {
			return peers, err
		}
		peers = append(peers, s)
	}
	for _, p := range peers[1:] {
		if err := waitReady(ctx, p); err != nil {
			return peers, err
		}
	}
	return peers, nil
}

// startProcess runs a proxy with a minimal environment, its output in the work folder; it is
// killed if netbench dies.
func startProcess(cfg config, p *peer, env []string, extra []*os.File, args ...string) error {
	f, err := os.Create(filepath.Join(cfg.work, p.name+".log"))
	if err != nil {
		return err
	}
	defer f.Close()
	p.log = f.Name()
	p.cmd = exec.Command(args[0], args[1:]...)
	p.cmd.Env = append([]string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}, env...)
	p.cmd.Stdout, p.cmd.Stderr, p.cmd.ExtraFiles = f, f, extra
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	p.exited = make(chan struct{})
	go func() { p.cmd.Wait(); close(p.exited) }()
	return nil
}

func startStdlib(cfg config, self string, w *world, userCopy bool) (*peer, error) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	defer ln.Close()
	f, err := ln.(*net.TCPListener).File()
	if err != nil {
		return nil, err
	}
	defer f.Close()
	p := &peer{name: peerStdlib, proxy: ln.Addr().String(), version: "netbench stdproxy",
		note: "minimal stdlib proxy: CONNECT = dial + 200 + two io.Copy (splice); absolute URI = http.Transport"}
	args := []string{self, "stdproxy", "-resolver", w.dns}
	if userCopy {
		p.name, p.note = peerStdlibCopy, "diagnostic: the stdlib proxy copying tunnels through user space (no splice)"
		args = append(args, "-copy")
	}
	return p, startProcess(cfg, p, nil, []*os.File{f}, args...)
}

// netPolicy writes the bench's manifest: the default policy's layers, net allowing the agent
// to reach the origin's name on its three ports, one edge, agent → net, so the agent's edge
// subnet is 10.213.0.0/24, and a test_world that gives net the bench's DNS server and exempts the
// origin's loopback address (net takes both from its policy alone). It locks the layer hashes with sharness-ai and returns the folder
// and the policy hash.
func netPolicy(cfg config, w *world) (string, string, error) {
	dir := filepath.Join(cfg.work, "policy")
	if err := os.CopyFS(dir, os.DirFS("policies/default")); err != nil {
		return "", "", fmt.Errorf("copy policies/default (run from the repository root): %w", err)
	}
	// The default net layer up to its business rules, then the bench's rules.
	lf := filepath.Join(dir, "layers", "L3-net.yaml")
	def, err := os.ReadFile(lf)
	if err != nil {
		return "", "", err
	}
	head, _, _ := strings.Cut(string(def), "\n  business:\n")
	layer := fmt.Sprintf("%s\n  business:\n    net:\n      callers:\n        - caller: agent\n          hosts: [%s]\n          ports: [%d, %d, %d]\n",
		strings.TrimRight(head, "\n"), w.name, w.tlsPort, w.httpPort, w.rawPort)
	zero := "sha256:" + strings.Repeat("0", 64)
	manifest := fmt.Sprintf(`pbp: 1
kind: manifest
name: netbench
trust_domain: sharness.local
layers:
  - id: L0-os
    file: layers/L0-os.yaml
    sha256: %[1]s
  - id: L1-static-go
    file: layers/L1-static-go.yaml
    sha256: %[1]s
  - id: L3-agent
    file: layers/L3-agent.yaml
    sha256: %[1]s
  - id: L3-net
    file: layers/L3-net.yaml
    sha256: %[1]s
components:
  net:
    kind: net
    layers: [L0-os, L1-static-go, L3-net]
  agent:
    kind: app
    layers: [L0-os, L1-static-go, L3-agent]
edges:
  - {from: agent, to: net}
test_world:
  reason: netbench's origin and DNS server, on the loopback
  resolver: %[2]q
  allow_addrs: [%[3]q]
`, zero, w.dns, w.addr.String())
	mf := filepath.Join(dir, "manifest.yaml")
	if err := errors.Join(os.WriteFile(lf, []byte(layer), 0o644),
		os.WriteFile(mf, []byte(manifest), 0o644)); err != nil {
		return "", "", err
	}
	if out, err := exec.Command(cfg.cli, "-f", mf, "lock").CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("sharness-ai lock: %w: %s", err, out)
	}
	out, err := exec.Command(cfg.cli, "-f", mf, "hash").Output()
	if err != nil {
		return "", "", fmt.Errorf("sharness-ai hash: %w", err)
	}
	m, err := pbp.Load(os.DirFS(dir), "manifest.yaml")
	if err != nil {
		return "", "", err
	}
	if e, ok := m.EdgeOf(cfg.src); !ok || e.From != "agent" || e.To != "net" {
		return "", "", fmt.Errorf("source %s is not on the agent → net edge of the bench's manifest", cfg.src)
	}
	return dir, string(bytes.TrimSpace(out)), nil
}

// netInNamespace runs net with the policy folder at session.PolicyDir in a private mount
// namespace: net has no flag for another folder. /etc there is an empty tmpfs, as in net's
// FROM scratch image; the host's /etc is untouched.
const netInNamespace = `set -e
mount -t tmpfs -o size=1m,mode=0755 netbench-etc /etc
mkdir -p /etc/sharness/policy
mount --bind "$1" /etc/sharness/policy
mount -o remount,bind,ro /etc/sharness/policy
shift
exec "$@"`

func startNet(cfg config, name, policy, hash string, w *world, extra ...string) (*peer, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	p := &peer{name: name, proxy: addr, version: cfg.netVersion}
	env := []string{"SHARNESS_AI_POLICY_HASH=" + hash, "SHARNESS_AI_COMPONENT=net"}
	args := append([]string{"unshare", "--mount", "--propagation", "private", "--",
		"/bin/sh", "-c", netInNamespace, "sh", policy,
		cfg.net, "-listen", addr, "-mtls-listen", "127.0.0.1:0"}, extra...)
	return p, startProcess(cfg, p, env, nil, args...)
}

// startSmokescreen runs smokescreen with an ACL whose default rule allows only the origin's
// name (requests carry no client certificate, so every request gets the default rule), and
// with the origin's address allowed although it is loopback.
func startSmokescreen(cfg config, w *world) (*peer, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	ap := netip.MustParseAddrPort(addr)
	acl := filepath.Join(cfg.work, "smokescreen-acl.yaml")
	conf := filepath.Join(cfg.work, "smokescreen.yaml")
	if err := errors.Join(
		os.WriteFile(acl, []byte(fmt.Sprintf("version: v1\nservices: []\ndefault:\n  name: netbench\n  project: netbench\n  action: enforce\n  allowed_domains: [%s]\n", w.name)), 0o644),
		os.WriteFile(conf, []byte(fmt.Sprintf("ip: %s\nport: %d\nallow_ranges: [%s/32]\nresolver_addresses: [%q]\nacl_file: %s\nallow_missing_role: true\n",
			ap.Addr(), ap.Port(), w.addr, w.dns, acl)), 0o644)); err != nil {
		return nil, err
	}
	p := &peer{name: peerSmokescreen, proxy: addr, version: "smokescreen " + moduleVersion(cfg.smokescreen),
		note: "ACL default rule allows the origin's name; allow_ranges 127.0.0.1/32"}
	return p, startProcess(cfg, p, nil, nil, cfg.smokescreen, "--config-file", conf)
}

func moduleVersion(bin string) string {
	if bi, err := buildinfo.ReadFile(bin); err == nil {
		return bi.Main.Version + " (" + bi.GoVersion + ")"
	}
	return "unknown"
}

// freeAddr returns a loopback address with a port nothing listens on right now.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// waitReady waits until p's proxy accepts a connection.
func waitReady(ctx context.Context, p *peer) error {
	deadline := time.Now().Add(15 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", p.proxy, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-p.exited:
			return fmt.Errorf("%s exited before it listened%s", p.name, p.logTail())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s does not listen on %s%s", p.name, p.proxy, p.logTail())
		}
	}
}
