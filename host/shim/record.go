package shim

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/moby/moby/client"

	"github.com/sharness-ai/sharness/host/shim/runc"
)

// EngineRecord is what the engine says of a container the shim is asked to create, from the
// engine itself rather than from the spec, which carries neither the container's image nor its
// networks: the container's own record (dockerd's config.v2.json, root-only) and each of its
// networks as the engine describes it (the Docker API's network inspect).
//
// Ordering: dockerd writes the record when the container is created and again on each
// `docker network connect` before it starts (compose attaches every network that way), and
// runs runc's create only after that, so the networks listed are every network the container's
// namespace will be attached to when it starts. A network connected to a running container is
// never seen by a runtime (no runc command is made for it): the shim refuses every exec into a
// container whose record has changed since (CheckNetworks at exec), and `sharness-ai status`
// reports it; see docs/architecture.md, "The runtime shim".
type EngineRecord struct {
	Image    string    // the image id ("sha256:…") the engine made the root file system from
	Project  string    // the compose project label, "" outside compose
	Service  string    // the compose service label
	Networks []Network // sorted by Name
	Volumes  []Volume  // the named volumes it mounts, sorted by Destination
	// Health is the health check's command (Docker's Test: "CMD" and an argv, "CMD-SHELL" and a
	// line, or "NONE"), nil without one; HealthEvery how often it runs.
	Health      []string
	HealthEvery time.Duration
	// Sharness: the container claims to be SHarness's (a component, the policy or a fixture, by
	// label or environment); Sandbox is its network namespace's path.
	Sharness bool
	Sandbox  string
}

// Volume is one named volume a container mounts, as the engine describes it.
type Volume struct {
	Destination string
	Name        string
	Labels      map[string]string
}

// Network is one network a container is attached to, as the engine describes it.
type Network struct {
	Name     string // the engine's name: <project>_<compose name> for a compose network
	ID       string
	Driver   string
	Internal bool
	Labels   map[string]string
	Options  map[string]string // the driver's options
}

// Compose labels on containers and networks (set by compose itself, after the file's own labels).
const (
	labelProject        = "com.docker.compose.project"
	labelService        = "com.docker.compose.service"
	labelComposeNetwork = "com.docker.compose.network"
)

// EnvDockerRoot overrides where the engine's container records are (dockerd's --data-root).
const EnvDockerRoot = "SHARNESS_RUNTIME_DOCKER_ROOT"

// dockerSocket is the engine's API, which the shim asks about networks.
const dockerSocket = "/var/run/docker.sock"

// maxRecordSize caps dockerd's config.v2.json: a few KiB, more with a long environment.
const maxRecordSize = 4 << 20

// engineAsk bounds each question to the engine: a create waits on it, and an engine that does not
// answer is a refusal, not a hang.
const engineAsk = 5 * time.Second

// configV2 is the part of dockerd's container record (daemon/container, config.v2.json) the shim
// reads.
type configV2 struct {
	ID     string
	Image  string
	Config struct {
		Env         []string
		Labels      map[string]string
		Healthcheck *struct {
			Test     []string
			Interval int64 // nanoseconds; 0 is the engine's default (30 s)
		}
	}
	NetworkSettings struct {
		SandboxKey string // the network namespace's path, /var/run/docker/netns/<id>
		Networks   map[string]struct {
			NetworkID string
		}
	}
	MountPoints map[string]struct {
		Destination string
		Name        string // a named volume's; "" for a bind
		Type        string
	}
}

// ParseRecord reads dockerd's config.v2.json for container id: its image, compose labels and the
// networks it lists (names, and ids where the engine has them yet). It refuses a record of
// another container.
func ParseRecord(data []byte, id string) (EngineRecord, map[string]string, error) {
	if len(data) > maxRecordSize {
		return EngineRecord{}, nil, fmt.Errorf("engine record: %d bytes, more than %d", len(data), maxRecordSize)
	}
	var c configV2
	if err := json.Unmarshal(data, &c); err != nil {
		return EngineRecord{}, nil, fmt.Errorf("engine record: %w", err)
	}
	if c.ID != id {
		return EngineRecord{}, nil, fmt.Errorf("engine record: of container %q, not %q", c.ID, id)
	}
	r := EngineRecord{Image: c.Image, Project: c.Config.Labels[labelProject], Service: c.Config.Labels[labelService]}
	r.Sandbox = c.NetworkSettings.SandboxKey
	for _, l := range []string{"ai.sharness.component", labelPolicy} {
		if _, ok := c.Config.Labels[l]; ok {
			r.Sharness = true
		}
	}
	for _, e := range c.Config.Env {
		for _, name := range []string{EnvComponent, EnvPolicy, EnvFixture} {
			if strings.HasPrefix(e, name+"=") {
				r.Sharness = true
			}
		}
	}
	if h := c.Config.Healthcheck; h != nil {
		r.Health, r.HealthEvery = h.Test, time.Duration(h.Interval)
	}
	nets := make(map[string]string, len(c.NetworkSettings.Networks))
	for name, n := range c.NetworkSettings.Networks {
		nets[name] = n.NetworkID
	}
	for _, m := range c.MountPoints {
		if m.Name != "" {
			r.Volumes = append(r.Volumes, Volume{Destination: m.Destination, Name: m.Name})
		}
	}
	slices.SortFunc(r.Volumes, func(a, b Volume) int { return strings.Compare(a.Destination, b.Destination) })
	return r, nets, nil
}

// engineRecord reads the record of container id and asks the engine about each of its networks.
func engineRecord(files runc.Files, root, id string) (EngineRecord, error) {
	r, nets, err := readRecord(files, root, id)
	if err != nil {
		return EngineRecord{}, err
	}
	if len(nets) == 0 && len(r.Volumes) == 0 {
		return r, nil
	}
	cli, err := client.New(client.WithHost("unix://" + dockerSocket)) // it negotiates the API version itself
	if err != nil {
		return EngineRecord{}, fmt.Errorf("engine: %w", err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), engineAsk)
	defer cancel()
	r.Networks = nil // described by the engine below
	for name, nid := range nets {
		ref := nid
		if ref == "" {
			ref = name // created but not started: the engine has the name only
		}
		res, err := cli.NetworkInspect(ctx, ref, client.NetworkInspectOptions{})
		if err != nil {
			return EngineRecord{}, fmt.Errorf("engine: network %s: %w", name, err)
		}
		n := res.Network
		if n.Name != name || nid != "" && n.ID != nid {
			return EngineRecord{}, fmt.Errorf("engine: network %s is %s (%s) now", name, n.Name, n.ID)
		}
		r.Networks = append(r.Networks, Network{Name: n.Name, ID: n.ID, Driver: n.Driver, Internal: n.Internal, Labels: n.Labels, Options: n.Options})
	}
	slices.SortFunc(r.Networks, func(a, b Network) int { return strings.Compare(a.Name, b.Name) })
	for i, v := range r.Volumes {
		res, err := cli.VolumeInspect(ctx, v.Name, client.VolumeInspectOptions{})
		if err != nil {
			return EngineRecord{}, fmt.Errorf("engine: volume %s: %w", v.Name, err)
		}
		r.Volumes[i].Labels = res.Volume.Labels
	}
	return r, nil
}

// readRecord reads the record of container id without asking the engine anything: the networks
// come by name (and id where the engine has one), without their labels or options.
func readRecord(files runc.Files, root, id string) (EngineRecord, map[string]string, error) {
	if !runc.ValidID(id) {
		return EngineRecord{}, nil, fmt.Errorf("engine record: %q is not a container id", id)
	}
	data, err := files.ReadFile(filepath.Join(root, "containers", id, "config.v2.json"))
	if err != nil {
		return EngineRecord{}, nil, fmt.Errorf("engine record: %w", err)
	}
	r, nets, err := ParseRecord(data, id)
	if err != nil {
		return EngineRecord{}, nil, err
	}
	for name, nid := range nets {
		r.Networks = append(r.Networks, Network{Name: name, ID: nid})
	}
	slices.SortFunc(r.Networks, func(a, b Network) int { return strings.Compare(a.Name, b.Name) })
	return r, nets, nil
}

// volumeLabels asks the engine for the labels of volume name.
func volumeLabels(name string) (map[string]string, error) {
	cli, err := client.New(client.WithHost("unix://" + dockerSocket))
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), engineAsk)
	defer cancel()
	res, err := cli.VolumeInspect(ctx, name, client.VolumeInspectOptions{})
	if err != nil {
		return nil, fmt.Errorf("engine: volume %s: %w", name, err)
	}
	return res.Volume.Labels, nil
}
