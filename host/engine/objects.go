package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ServerVersion is the engine's version. Without an engine, docker prints the client's half and
// fails, and the error says why.
func (d *Docker) ServerVersion(ctx context.Context) (string, error) {
	var v struct{ Server *struct{ Version string } }
	out, err := d.output(ctx, nil, "version", "--format", "json")
	if jerr := json.Unmarshal(out, &v); jerr != nil || v.Server == nil || v.Server.Version == "" {
		if err = errors.Join(err, jerr); err == nil {
			err = errors.New("docker version names no server")
		}
		return "", err
	}
	return v.Server.Version, nil
}

// Info is what the engine says of its configuration.
type Info struct {
	Runtimes        []string // the registered runtimes' names, sorted
	DefaultRuntime  string
	SecurityOptions []string
}

// Info asks the engine for its configuration.
func (d *Docker) Info(ctx context.Context) (Info, error) {
	var info struct {
		Runtimes        map[string]json.RawMessage
		DefaultRuntime  string
		SecurityOptions []string
	}
	out, err := d.output(ctx, nil, "info", "--format", "json")
	if err == nil {
		err = json.Unmarshal(out, &info)
	}
	if err != nil {
		return Info{}, err
	}
	return Info{Runtimes: slices.Sorted(maps.Keys(info.Runtimes)), DefaultRuntime: info.DefaultRuntime, SecurityOptions: info.SecurityOptions}, nil
}

// ContainerRuntime is the runtime the container was created with ("sharness": the shim).
func (d *Docker) ContainerRuntime(ctx context.Context, id string) (string, error) {
	out, err := d.output(ctx, nil, "inspect", "-f", "{{.HostConfig.Runtime}}", id)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}

// ContainersOf returns the ID and state of every container of a compose project's service, running
// or not, found by compose's labels: without the project's compose files.
func (d *Docker) ContainersOf(ctx context.Context, project, service string) ([]Container, error) {
	out, err := d.output(ctx, nil, "ps", "--all", "--filter", "label=com.docker.compose.project="+project,
		"--filter", "label=com.docker.compose.service="+service, "--format", "{{.ID}} {{.State}}")
	if err != nil {
		return nil, err
	}
	var cs []Container
	for line := range strings.Lines(string(out)) {
		if line = strings.TrimSpace(line); line != "" {
			id, state, _ := strings.Cut(line, " ")
			cs = append(cs, Container{ID: id, State: state, Service: service})
		}
	}
	return cs, nil
}

// ContainerLogs writes what the container printed to w, its stdout and its stderr alike.
func (d *Docker) ContainerLogs(ctx context.Context, id string, w io.Writer) error {
	return d.stream(ctx, nil, w, w, "logs", id)
}

// RunSpec is a container Run starts, waits for and removes.
type RunSpec struct {
	Name, Image, Network string
	DNS                  string // the resolver the container is given
	Entrypoint           string
	Args                 []string
}

// Run runs a container to its end and removes it, never pulling its image. A container that ran
// and exited with a code other than 0 is an error with that code (ExitCode()), as is docker's own
// failure (125 and up).
func (d *Docker) Run(ctx context.Context, r RunSpec) error {
	_, err := d.output(ctx, nil, append([]string{"run", "--rm", "--name", r.Name, "--pull", "never", "--network", r.Network, "--dns", r.DNS,
		"--entrypoint", r.Entrypoint, r.Image}, r.Args...)...)
	return err
}

// projectLabel is the label compose puts on every container, network and volume of a project.
const projectLabel = "com.docker.compose.project"

// ProjectContainers returns every container of a compose project, running or not, found by
// compose's labels: those `docker compose run` started too, and without the project's files.
func (d *Docker) ProjectContainers(ctx context.Context, project string) ([]Container, error) {
	out, err := d.output(ctx, nil, "ps", "--all", "--no-trunc", "--filter", "label="+projectLabel+"="+project,
		"--format", `{{.ID}}\t{{.Names}}\t{{.State}}\t{{.Label "com.docker.compose.service"}}\t{{.Label "com.docker.compose.oneoff"}}`)
	if err != nil {
		return nil, err
	}
	var cs []Container
	for line := range strings.Lines(string(out)) {
		if line = strings.TrimRight(line, "\r\n"); line == "" {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) != 5 || f[0] == "" {
			return nil, fmt.Errorf("read docker ps output: line %q is not ID, name, state, service and one-off", line)
		}
		cs = append(cs, Container{ID: f[0], Name: f[1], State: f[2], Service: f[3], OneOff: f[4] == "True"})
	}
	return cs, nil
}

// StopContainers stops containers as `docker stop` does: SIGTERM, then SIGKILL after timeout, so
// that a component has the time to sign its log's shutdown checkpoint.
func (d *Docker) StopContainers(ctx context.Context, timeout time.Duration, ids ...string) error {
	if len(ids) == 0 {
		return nil
	}
	_, err := d.output(ctx, nil, append([]string{"stop", "--time", strconv.Itoa(int(timeout.Seconds()))}, ids...)...)
	return err
}

// RemoveContainer removes containers, stopping (killing) any still running first.
func (d *Docker) RemoveContainer(ctx context.Context, names ...string) error {
	if len(names) == 0 {
		return nil
	}
	_, err := d.output(ctx, nil, append([]string{"rm", "-f"}, names...)...)
	return err
}

// Image is what the engine holds of a local image.
type Image struct {
	ID              string
	Size            int64    // bytes
	Entrypoint, Cmd []string // nil when the image sets none
	Volumes         []string // the paths it declares as volumes, sorted
}

// ErrNoImage says the engine has no image of that name.
var ErrNoImage = errors.New("no such image on this engine")

// Image describes a local image (a name, tag or digest); an absent one is ErrNoImage.
func (d *Docker) Image(ctx context.Context, ref string) (*Image, error) {
	out, err := d.output(ctx, nil, "image", "inspect", "--format", "{{json .}}", "--", ref)
	if err != nil {
		if strings.Contains(strings.ToLower(err.Error()), "no such image") {
			return nil, fmt.Errorf("%s: %w", ref, ErrNoImage)
		}
		return nil, err
	}
	var info struct {
		ID     string `json:"Id"`
		Size   int64  `json:"Size"`
		Config struct {
			Entrypoint []string            `json:"Entrypoint"`
			Cmd        []string            `json:"Cmd"`
			Volumes    map[string]struct{} `json:"Volumes"`
		} `json:"Config"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(out), &info); err != nil {
		return nil, fmt.Errorf("read docker image inspect %s: %w", ref, err)
	}
	var vols []string
	if len(info.Config.Volumes) > 0 {
		vols = slices.Sorted(maps.Keys(info.Config.Volumes))
	}
	return &Image{ID: info.ID, Size: info.Size, Entrypoint: info.Config.Entrypoint, Cmd: info.Config.Cmd, Volumes: vols}, nil
}

// ImageID is the ID of a local image; the error says why there is none.
func (d *Docker) ImageID(ctx context.Context, ref string) (string, error) {
	out, err := d.output(ctx, nil, "image", "inspect", "--format", "{{.Id}}", ref)
	return strings.TrimSpace(string(out)), err
}

// Network is a network CreateNetwork makes.
type Network struct {
	Name     string
	Internal bool     // no route out of the host
	Labels   []string // key=value
}

// CreateNetwork makes a bridge network.
func (d *Docker) CreateNetwork(ctx context.Context, n Network) error {
	args := []string{"network", "create"}
	if n.Internal {
		args = append(args, "--internal")
	}
	for _, l := range n.Labels {
		args = append(args, "--label", l)
	}
	_, err := d.output(ctx, nil, append(args, n.Name)...)
	return err
}

// RemoveNetwork removes networks.
func (d *Docker) RemoveNetwork(ctx context.Context, names ...string) error {
	if len(names) == 0 {
		return nil
	}
	_, err := d.output(ctx, nil, append([]string{"network", "rm"}, names...)...)
	return err
}

// ProjectNetworks returns the names of a compose project's networks, found by compose's label.
func (d *Docker) ProjectNetworks(ctx context.Context, project string) ([]string, error) {
	out, err := d.output(ctx, nil, "network", "ls", "--filter", "label="+projectLabel+"="+project, "--format", "{{.Name}}")
	if err != nil {
		return nil, err
	}
	return strings.Fields(string(out)), nil
}

// ProjectVolumes returns the names of a compose project's volumes, found by compose's label.
func (d *Docker) ProjectVolumes(ctx context.Context, project string) ([]string, error) {
	out, err := d.output(ctx, nil, "volume", "ls", "--filter", "label="+projectLabel+"="+project, "--format", "{{.Name}}")
	if err != nil {
		return nil, err
	}
	return strings.Fields(string(out)), nil
}

// RemoveVolumes deletes volumes, and what they hold.
func (d *Docker) RemoveVolumes(ctx context.Context, names ...string) error {
	if len(names) == 0 {
		return nil
	}
	_, err := d.output(ctx, nil, append([]string{"volume", "rm"}, names...)...)
	return err
}

// Volumes returns the names of the volumes whose name begins with prefix.
func (d *Docker) Volumes(ctx context.Context, prefix string) ([]string, error) {
	out, err := d.output(ctx, nil, "volume", "ls", "--filter", "name="+prefix, "--format", "{{.Name}}")
	if err != nil {
		return nil, err
	}
	var names []string
	for _, v := range strings.Fields(string(out)) {
		if strings.HasPrefix(v, prefix) { // docker's name filter matches anywhere in the name
			names = append(names, v)
		}
	}
	return names, nil
}

// VolumeMountpoint is the folder on the host that holds a local volume's files. An engine that
// cannot say is an *Error; one that names no absolute path, another error.
func (d *Docker) VolumeMountpoint(ctx context.Context, name string) (string, error) {
	out, err := d.output(ctx, nil, "volume", "inspect", "--format", "{{.Mountpoint}}", name)
	if err != nil {
		return "", err
	}
	dir := strings.TrimSpace(string(out))
	if !filepath.IsAbs(dir) {
		return "", fmt.Errorf("volume %s: mountpoint %q is not an absolute path", name, dir)
	}
	return dir, nil
}
