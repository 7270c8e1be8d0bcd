// Package probe gathers the facts doctor decides on: it asks the engine (host/engine), reads
// /proc, /sys and resolv.conf, tries the Landlock and memfd_secret syscalls, reads the running
// stack's kms bundle and launcher line, and with --live runs the DNS-leak probe, which creates
// (and removes) a network and a container. The decisions are doctor's, pure.
//
// What it does not guarantee: the kernel facts are the machine's probe runs on, the engine's
// only when the engine is local.
package probe

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/sharness-ai/sharness/host/doctor"
	"github.com/sharness-ai/sharness/host/engine"
	"github.com/sharness-ai/sharness/host/stack"
	"github.com/sharness-ai/sharness/internal/seal"
)

// Env is how probe learns about the host. Host is the real one; tests pass fakes.
type Env struct {
	Engine      *engine.Docker
	ReadFile    func(name string) ([]byte, error)
	Landlock    func() (int, error) // the Landlock ABI version
	MemfdSecret func() error        // try memfd_secret(2), close what it made
	Listen      func(network, addr string) (net.PacketConn, error)
}

// Host gathers from this machine: the engine d, /proc and /sys, syscalls.
func Host(d *engine.Docker) Env {
	return Env{Engine: d.Brief(callTimeout), ReadFile: os.ReadFile, Landlock: landlockABI, MemfdSecret: memfdSecret, Listen: net.ListenPacket}
}

// callTimeout bounds each engine call (an API call, a compose command): an engine that hangs is
// reported, not waited on.
const callTimeout = 30 * time.Second

// Gather collects the facts of the host; with live it also runs DNSLeak. Facts.KMS and
// Facts.Stack are about a compose project: the caller fills them with KMS and Stack.
func Gather(ctx context.Context, env Env, live bool) doctor.Facts {
	f := doctor.Facts{Files: map[string]string{}}
	f.Engine = engineFacts(ctx, env)
	out, err := env.Engine.ComposeVersion(ctx)
	f.Compose = doctor.Compose{Output: out, Err: err}
	for _, p := range doctor.Paths {
		if b, err := env.ReadFile(p); err == nil {
			f.Files[p] = string(b)
		}
	}
	f.Landlock, f.LandlockErr = env.Landlock()
	f.MemfdSecretErr = env.MemfdSecret()
	switch {
	case !live:
	case f.Engine.Version == "":
		f.Live.Skip = "no engine to probe"
	default:
		f.Live = DNSLeak(ctx, env, Image)
	}
	return f
}

func engineFacts(ctx context.Context, env Env) doctor.Engine {
	var e doctor.Engine
	if e.Version, e.Err = env.Engine.ServerVersion(ctx); e.Err != nil {
		return e
	}
	info, err := env.Engine.Info(ctx)
	if err != nil {
		e.InfoErr = err
		return e
	}
	e.Runtimes, e.DefaultRuntime, e.SecurityOptions = info.Runtimes, info.DefaultRuntime, info.SecurityOptions
	return e
}

// KMS reads the running kms's bundle from the logs of project p, as `kms bundle` does.
func KMS(ctx context.Context, p stack.Project) doctor.KMS {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	k := doctor.KMS{Project: p.Name}
	logs, err := p.KMSLogs(ctx)
	switch {
	case err != nil:
		k.Err = fmt.Errorf("%w: %v", doctor.ErrNoStack, err)
	case !bytes.Contains(logs, []byte(seal.BundleLogPrefix)):
		k.Err = doctor.ErrNoStack
	default:
		k.Bundle, k.Err = stack.LastBundle(logs)
	}
	return k
}

// Stack reads the policy the running stack of project attests: its launcher's last "session
// started" line (doctor.Stack says why that line). It asks the engine for the project's launcher
// by compose's labels, not compose, which would need the project's files.
func Stack(ctx context.Context, d *engine.Docker, project, supplied string) doctor.Stack {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	s := doctor.Stack{Project: project, Supplied: supplied}
	cs, err := d.ContainersOf(ctx, project, stack.Launcher)
	if err != nil {
		s.Err = fmt.Errorf("%w: %v", doctor.ErrNoStack, err)
		return s
	}
	var id, state string
	for _, c := range cs {
		if id == "" || c.State == "running" && state != "running" {
			id, state = c.ID, c.State // the running one, if any
		}
	}
	switch {
	case id == "":
		s.Err = doctor.ErrNoStack
		return s
	case state != "running":
		s.Err = fmt.Errorf("%w: its launcher is %s", doctor.ErrNoStack, state)
		return s
	}
	var logs bytes.Buffer // the launcher logs to stderr, which ContainerLogs writes with its stdout
	if err := d.ContainerLogs(ctx, id, &logs); err != nil {
		s.Err = err
		return s
	}
	s.Session, s.Err = doctor.ParseSession(logs.Bytes())
	return s
}
