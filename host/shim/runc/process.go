package runc

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/sharness-ai/sharness/internal/strictjson"
)

// Files is where a command's documents are read from: the --process or --resources file, or
// stdin for `--resources -`. The caller caps the size of each.
type Files interface {
	ReadFile(path string) ([]byte, error)
	ReadStdin() ([]byte, error) // read at most once
}

// maxDepth is deeper than a process or resources document nests.
const maxDepth = 64

// decodeStrict decodes a process.json or resources document, refusing duplicate and case-folded
// keys and unknown fields: it is written by whoever drives the Docker API.
func decodeStrict(data []byte, v any) error { return strictjson.Decode(data, maxDepth, v) }

// Process returns the process `runc exec` would start: the --process file as is (runc then
// ignores the other process flags), with the bytes read, or the container's own process with the
// flags applied the way runc 1.1's getProcess applies them (and no bytes).
func (cmd Command) Process(f Files, base *specs.Process) (*specs.Process, []byte, error) {
	if path, ok := cmd.Flag("process"); ok {
		data, err := f.ReadFile(path)
		if err != nil {
			return nil, nil, err
		}
		var p specs.Process
		if err := decodeStrict(data, &p); err != nil {
			return nil, nil, fmt.Errorf("parse %s: %w", path, err)
		}
		return &p, data, nil
	}
	if base == nil {
		return nil, nil, errors.New("the container's config has no process")
	}
	var p specs.Process // a deep copy: the container's spec stays as read
	if b, err := json.Marshal(base); err != nil || json.Unmarshal(b, &p) != nil {
		return nil, nil, errors.New("copy the container's process")
	}
	if v, ok := cmd.Flag("cwd"); ok && v != "" {
		p.Cwd = v
	}
	if v, ok := cmd.Flag("apparmor"); ok && v != "" {
		p.ApparmorProfile = v
	}
	if v, ok := cmd.Flag("process-label"); ok && v != "" {
		p.SelinuxLabel = v
	}
	if caps := cmd.flags["cap"]; len(caps) > 0 {
		if p.Capabilities == nil {
			p.Capabilities = &specs.LinuxCapabilities{}
		}
		c := p.Capabilities // every set older runc versions also added to: fail closed
		for _, sets := range []*[]string{&c.Bounding, &c.Effective, &c.Permitted, &c.Inheritable, &c.Ambient} {
			*sets = append(*sets, caps...)
		}
	}
	p.Env = append(p.Env, cmd.flags["env"]...)
	p.Terminal = false
	if v, ok := cmd.Flag("tty"); ok {
		p.Terminal = v == "true"
	}
	if v, ok := cmd.Flag("no-new-privs"); ok { // --no-new-privs=false turns it off
		p.NoNewPrivileges = v == "true"
	}
	if v, ok := cmd.Flag("user"); ok && v != "" {
		uid, gid, hasGID := strings.Cut(v, ":")
		u, err := strconv.ParseUint(uid, 10, 32)
		if err != nil {
			return nil, nil, fmt.Errorf("parse --user %q: %w", v, err)
		}
		p.User.UID = uint32(u)
		if hasGID {
			g, err := strconv.ParseUint(gid, 10, 32)
			if err != nil {
				return nil, nil, fmt.Errorf("parse --user %q: %w", v, err)
			}
			p.User.GID = uint32(g)
		}
	}
	for _, v := range cmd.flags["additional-gids"] {
		g, err := strconv.ParseUint(v, 10, 32)
		if err != nil {
			return nil, nil, fmt.Errorf("parse --additional-gids %q: %w", v, err)
		}
		p.User.AdditionalGids = append(p.User.AdditionalGids, uint32(g))
	}
	return &p, nil, nil
}

// Resources returns the resources `runc update` would apply, and the bytes it read from stdin
// (nil when it read none) so that runc can be given them again. With --resources runc ignores the
// other flags; without it, unset flags leave a value unchanged.
func (cmd Command) Resources(f Files) (*specs.LinuxResources, []byte, error) {
	var r specs.LinuxResources
	if path, ok := cmd.Flag("resources"); ok {
		var data []byte
		var err error
		if path == "-" {
			data, err = f.ReadStdin()
		} else {
			data, err = f.ReadFile(path)
		}
		if err != nil {
			return nil, nil, err
		}
		if err := decodeStrict(data, &r); err != nil {
			return nil, nil, fmt.Errorf("parse resources: %w", err)
		}
		if path != "-" {
			data = nil
		} else if data == nil {
			data = []byte{}
		}
		return &r, data, nil
	}
	ints := map[string]**int64{}
	uints := map[string]**uint64{}
	if _, ok := cmd.Flag("memory"); ok || anySet(cmd, "memory-reservation", "memory-swap", "kernel-memory", "kernel-memory-tcp") {
		r.Memory = &specs.LinuxMemory{}
		ints["memory"], ints["memory-reservation"], ints["memory-swap"] = &r.Memory.Limit, &r.Memory.Reservation, &r.Memory.Swap
		//lint:ignore SA1019 runc 1.1 still applies kernel memory limits on cgroup v1
		ints["kernel-memory"], ints["kernel-memory-tcp"] = &r.Memory.Kernel, &r.Memory.KernelTCP
	}
	if anySet(cmd, "cpu-period", "cpu-quota", "cpu-share", "cpu-rt-period", "cpu-rt-runtime", "cpuset-cpus", "cpuset-mems", "cpu-idle") {
		r.CPU = &specs.LinuxCPU{}
		uints["cpu-period"], uints["cpu-share"], uints["cpu-rt-period"] = &r.CPU.Period, &r.CPU.Shares, &r.CPU.RealtimePeriod
		ints["cpu-quota"], ints["cpu-rt-runtime"], ints["cpu-idle"] = &r.CPU.Quota, &r.CPU.RealtimeRuntime, &r.CPU.Idle
		r.CPU.Cpus, _ = cmd.Flag("cpuset-cpus")
		r.CPU.Mems, _ = cmd.Flag("cpuset-mems")
	}
	for name, dst := range ints {
		if v, ok := cmd.Flag(name); ok {
			n, err := bytesOrInt(name, v)
			if err != nil {
				return nil, nil, err
			}
			*dst = &n
		}
	}
	for name, dst := range uints {
		if v, ok := cmd.Flag(name); ok {
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return nil, nil, fmt.Errorf("parse --%s %q: %w", name, v, err)
			}
			*dst = &n
		}
	}
	if v, ok := cmd.Flag("pids-limit"); ok {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, nil, fmt.Errorf("parse --pids-limit %q: %w", v, err)
		}
		r.Pids = &specs.LinuxPids{Limit: &n}
	}
	if v, ok := cmd.Flag("blkio-weight"); ok {
		n, err := strconv.ParseUint(v, 10, 16)
		if err != nil {
			return nil, nil, fmt.Errorf("parse --blkio-weight %q: %w", v, err)
		}
		w := uint16(n)
		r.BlockIO = &specs.LinuxBlockIO{Weight: &w}
	}
	return &r, nil, nil
}

func anySet(cmd Command, names ...string) bool {
	for _, n := range names {
		if _, ok := cmd.Flag(n); ok {
			return true
		}
	}
	return false
}

// bytesOrInt parses runc's memory flags (docker's RAMInBytes: "512m", "1.5g", "-1") and its
// plain integer ones.
func bytesOrInt(name, v string) (int64, error) {
	if !strings.Contains(name, "memory") || v == "-1" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("parse --%s %q: %w", name, v, err)
		}
		return n, nil
	}
	s := strings.TrimSuffix(strings.TrimSuffix(strings.ToLower(strings.TrimSpace(v)), "b"), "i")
	mult := int64(1)
	if i := len(s) - 1; i >= 0 {
		if k := strings.IndexByte("kmgtp", s[i]); k >= 0 {
			mult, s = int64(1)<<(10*(k+1)), strings.TrimSpace(s[:i])
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 || strings.ContainsAny(s, "eEnNxX+-") || f*float64(mult) >= 1<<63 {
		return 0, fmt.Errorf("parse --%s %q: not a size", name, v)
	}
	return int64(f * float64(mult)), nil
}
