// Package probe gathers the facts doctor decides on: it runs the docker CLI, reads /proc, /sys
// and resolv.conf, tries the Landlock and memfd_secret syscalls, and with --live runs the DNS-leak
// probe, which creates (and removes) a network and a container. The decisions are doctor's, pure.
//
// What it does not guarantee: the kernel facts are the machine's probe runs on, the engine's
// only when the engine is local.
package probe

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/sharness-ai/sharness/host/doctor"
)

// Env is how probe learns about the host. Host is the real one; tests pass fakes.
type Env struct {
	Docker      func(ctx context.Context, args ...string) ([]byte, error) // stdout; the error carries stderr
	ReadFile    func(name string) ([]byte, error)
	Landlock    func() (int, error) // the Landlock ABI version
	MemfdSecret func() error        // try memfd_secret(2), close what it made
	Listen      func(network, addr string) (net.PacketConn, error)
}

// Host gathers from this machine: the docker CLI, /proc and /sys, syscalls.
func Host() Env {
	return Env{Docker: docker, ReadFile: os.ReadFile, Landlock: landlockABI, MemfdSecret: memfdSecret, Listen: net.ListenPacket}
}

// callTimeout bounds each docker call: an engine that hangs is reported, not waited on.
const callTimeout = 30 * time.Second

func docker(ctx context.Context, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "docker", args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		msg, _, _ := strings.Cut(strings.TrimSpace(stderr.String()), "\n")
		return out, fmt.Errorf("docker %s: %w: %s", strings.Join(args, " "), err, msg)
	}
	return out, nil
}

// Gather collects the facts; with live it also runs DNSLeak. KMS is the caller's to fill: the
// kms bundle comes through the CLI's compose plumbing.
func Gather(ctx context.Context, env Env, live bool) doctor.Facts {
	f := doctor.Facts{Files: map[string]string{}}
	f.Engine = engine(ctx, env)
	out, err := env.Docker(ctx, "compose", "version")
	f.Compose = doctor.Compose{Output: strings.TrimSpace(string(out)), Err: err}
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

func engine(ctx context.Context, env Env) doctor.Engine {
	var e doctor.Engine
	var v struct{ Server *struct{ Version string } }
	out, err := env.Docker(ctx, "version", "--format", "json")
	// Without an engine, docker version prints the client's half and exits 1.
	if jerr := json.Unmarshal(out, &v); jerr != nil || v.Server == nil || v.Server.Version == "" {
		if e.Err = errors.Join(err, jerr); e.Err == nil {
			e.Err = errors.New("docker version names no server")
		}
		return e
	}
	e.Version = v.Server.Version
	var info struct {
		Runtimes        map[string]json.RawMessage
		DefaultRuntime  string
		SecurityOptions []string
	}
	if out, err = env.Docker(ctx, "info", "--format", "json"); err == nil {
		err = json.Unmarshal(out, &info)
	}
	if err != nil {
		e.InfoErr = err
		return e
	}
	for name := range info.Runtimes {
		e.Runtimes = append(e.Runtimes, name)
	}
	slices.Sort(e.Runtimes)
	e.DefaultRuntime, e.SecurityOptions = info.DefaultRuntime, info.SecurityOptions
	return e
}
