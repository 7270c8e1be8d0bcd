package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
)

// ServerVersion is the engine's version; without an engine, the error says why.
func (d *Docker) ServerVersion(ctx context.Context) (string, error) {
	v, err := call(ctx, d, "version", func(ctx context.Context, c *client.Client) (client.ServerVersionResult, error) {
		return c.ServerVersion(ctx, client.ServerVersionOptions{})
	})
	if err == nil && v.Version == "" {
		err = &Error{Command: "docker API version", Err: errors.New("the engine names no version")}
	}
	return v.Version, err
}

// Info is what the engine says of its configuration.
type Info struct {
	Runtimes        []string // the registered runtimes' names, sorted
	DefaultRuntime  string
	SecurityOptions []string
}

// Info asks the engine for its configuration.
func (d *Docker) Info(ctx context.Context) (Info, error) {
	r, err := call(ctx, d, "info", func(ctx context.Context, c *client.Client) (client.SystemInfoResult, error) {
		return c.Info(ctx, client.InfoOptions{})
	})
	if err != nil {
		return Info{}, err
	}
	return Info{Runtimes: slices.Sorted(maps.Keys(r.Info.Runtimes)), DefaultRuntime: r.Info.DefaultRuntime, SecurityOptions: r.Info.SecurityOptions}, nil
}

// inspect is what the engine holds of one container.
func (d *Docker) inspect(ctx context.Context, id string) (container.InspectResponse, error) {
	r, err := call(ctx, d, "inspect container "+id, func(ctx context.Context, c *client.Client) (client.ContainerInspectResult, error) {
		return c.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	})
	return r.Container, err
}

// ContainerRuntime is the runtime the container was created with ("sharness": the shim).
func (d *Docker) ContainerRuntime(ctx context.Context, id string) (string, error) {
	c, err := d.inspect(ctx, id)
	if err != nil {
		return "", err
	}
	if c.HostConfig == nil || c.HostConfig.Runtime == "" {
		return "", &Error{Command: "docker API inspect container " + id, Err: errors.New("the engine names no runtime")}
	}
	return c.HostConfig.Runtime, nil
}

// list is the containers, running or not, that carry every label of labels (key=value).
func (d *Docker) list(ctx context.Context, labels ...string) ([]container.Summary, error) {
	r, err := call(ctx, d, "list containers labelled "+strings.Join(labels, ", "), func(ctx context.Context, c *client.Client) (client.ContainerListResult, error) {
		return c.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: make(client.Filters).Add("label", labels...)})
	})
	return r.Items, err
}

// ContainersOf returns the ID and state of every container of a compose project's service, running
// or not, found by compose's labels: without the project's compose files.
func (d *Docker) ContainersOf(ctx context.Context, project, service string) ([]Container, error) {
	items, err := d.list(ctx, projectLabel+"="+project, serviceLabel+"="+service)
	if err != nil {
		return nil, err
	}
	var cs []Container
	for _, c := range items {
		cs = append(cs, Container{ID: c.ID, State: string(c.State), Service: service})
	}
	return cs, nil
}

// ContainerLogs writes what the container printed to w, its stdout and its stderr alike.
func (d *Docker) ContainerLogs(ctx context.Context, id string, w io.Writer) error {
	c, err := d.inspect(ctx, id)
	if err != nil {
		return err
	}
	return d.do(ctx, "logs of container "+id, func(ctx context.Context, cl *client.Client) error {
		rc, err := cl.ContainerLogs(ctx, id, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true})
		if err != nil {
			return err
		}
		defer rc.Close()
		if c.Config != nil && c.Config.Tty { // one raw stream; otherwise stdout and stderr multiplexed
			_, err = io.Copy(w, rc)
		} else {
			_, err = stdcopy.StdCopy(w, w, rc)
		}
		return err
	})
}

// RunSpec is a container Run starts, waits for and removes.
type RunSpec struct {
	Name, Image, Network string
	DNS                  string // the resolver the container is given, an IP address
	Entrypoint           string
	Args                 []string
}

// Run runs a container to its end and removes it, never pulling its image (the Engine API's
// create does not pull). A container that ran and exited with a code other than 0 is an *Error
// wrapping an *ExitError with that code (ExitCode()); one the engine could not create or start
// is an *Error without one.
func (d *Docker) Run(ctx context.Context, r RunSpec) error {
	dns, err := netip.ParseAddr(r.DNS)
	if err != nil {
		return fmt.Errorf("run container %s: dns %q: %w", r.Name, r.DNS, err)
	}
	what := "run container " + r.Name
	created, err := call(ctx, d, what+": create", func(ctx context.Context, c *client.Client) (client.ContainerCreateResult, error) {
		return c.ContainerCreate(ctx, client.ContainerCreateOptions{
			Name:       r.Name,
			Config:     &container.Config{Image: r.Image, Entrypoint: []string{r.Entrypoint}, Cmd: r.Args},
			HostConfig: &container.HostConfig{NetworkMode: container.NetworkMode(r.Network), DNS: []netip.Addr{dns}},
		})
	})
	if err != nil {
		return err
	}
	defer func() { // also when ctx ended: the container must not outlive the call
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		d.do(ctx, what+": remove", func(ctx context.Context, c *client.Client) error {
			_, err := c.ContainerRemove(ctx, created.ID, client.ContainerRemoveOptions{Force: true})
			return err
		})
	}()
	if err := d.do(ctx, what+": start", func(ctx context.Context, c *client.Client) error {
		_, err := c.ContainerStart(ctx, created.ID, client.ContainerStartOptions{})
		return err
	}); err != nil {
		return err
	}
	code, err := call(ctx, d, what+": wait", func(ctx context.Context, c *client.Client) (int64, error) {
		w := c.ContainerWait(ctx, created.ID, client.ContainerWaitOptions{Condition: container.WaitConditionNotRunning})
		select {
		case res := <-w.Result:
			if res.Error != nil && res.Error.Message != "" {
				return 0, errors.New(res.Error.Message)
			}
			return res.StatusCode, nil
		case err := <-w.Error:
			return 0, err
		}
	})
	if err != nil {
		return err
	}
	if code != 0 {
		return &Error{Command: "docker API " + what, Err: &ExitError{Code: int(code)}}
	}
	return nil
}

// The labels compose puts on every container of a project (the first on its networks and
// volumes too).
const (
	projectLabel = "com.docker.compose.project"
	serviceLabel = "com.docker.compose.service"
	oneOffLabel  = "com.docker.compose.oneoff"
)

// ProjectContainers returns every container of a compose project, running or not, found by
// compose's labels: those `docker compose run` started too, and without the project's files.
func (d *Docker) ProjectContainers(ctx context.Context, project string) ([]Container, error) {
	items, err := d.list(ctx, projectLabel+"="+project)
	if err != nil {
		return nil, err
	}
	var cs []Container
	for _, c := range items {
		if c.ID == "" || len(c.Names) == 0 {
			return nil, fmt.Errorf("list the containers of project %s: the engine names a container without an ID or a name", project)
		}
		cs = append(cs, Container{ID: c.ID, Name: strings.TrimPrefix(c.Names[0], "/"), State: string(c.State),
			Service: c.Labels[serviceLabel], OneOff: c.Labels[oneOffLabel] == "True"})
	}
	return cs, nil
}

// each calls f for every name at once, as the CLI's stop and rm do, so that stopping n
// containers takes one stop timeout, not n.
func each(names []string, f func(name string) error) error {
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, n := range names {
		wg.Go(func() { errs[i] = f(n) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// StopContainers stops containers as `docker stop` does: SIGTERM, then SIGKILL after timeout, so
// that a component has the time to sign its log's shutdown checkpoint.
func (d *Docker) StopContainers(ctx context.Context, timeout time.Duration, ids ...string) error {
	secs := int(timeout.Seconds())
	return each(ids, func(id string) error {
		return d.do(ctx, "stop container "+id, func(ctx context.Context, c *client.Client) error {
			_, err := c.ContainerStop(ctx, id, client.ContainerStopOptions{Timeout: &secs})
			return err
		})
	})
}

// RemoveContainer removes containers, stopping (killing) any still running first.
func (d *Docker) RemoveContainer(ctx context.Context, names ...string) error {
	return each(names, func(name string) error {
		return d.do(ctx, "remove container "+name, func(ctx context.Context, c *client.Client) error {
			_, err := c.ContainerRemove(ctx, name, client.ContainerRemoveOptions{Force: true})
			return err
		})
	})
}

// Image is what the engine holds of a local image.
type Image struct {
	ID              string
	Size            int64    // bytes
	Entrypoint, Cmd []string // nil when the image sets none
	Volumes         []string // the paths it declares as volumes, sorted
	Labels          map[string]string
}

// ErrNoImage says the engine has no image of that name.
var ErrNoImage = errors.New("no such image on this engine")

// Image describes a local image (a name, tag or digest); an absent one is ErrNoImage.
func (d *Docker) Image(ctx context.Context, ref string) (*Image, error) {
	r, err := call(ctx, d, "inspect image "+ref, func(ctx context.Context, c *client.Client) (client.ImageInspectResult, error) {
		return c.ImageInspect(ctx, ref)
	})
	if cerrdefs.IsNotFound(err) {
		return nil, fmt.Errorf("%s: %w", ref, ErrNoImage)
	} else if err != nil {
		return nil, err
	}
	img := &Image{ID: r.ID, Size: r.Size}
	if r.Config != nil {
		img.Entrypoint, img.Cmd, img.Labels = r.Config.Entrypoint, r.Config.Cmd, r.Config.Labels
		if len(r.Config.Volumes) > 0 {
			img.Volumes = slices.Sorted(maps.Keys(r.Config.Volumes))
		}
	}
	return img, nil
}

// ImageID is the ID of a local image; the error says why there is none (ErrNoImage when the
// engine has no image of that name).
func (d *Docker) ImageID(ctx context.Context, ref string) (string, error) {
	img, err := d.Image(ctx, ref)
	if err != nil {
		return "", err
	}
	return img.ID, nil
}

// Network is a network CreateNetwork makes.
type Network struct {
	Name     string
	Internal bool     // no route out of the host
	Labels   []string // key=value
}

// CreateNetwork makes a bridge network.
func (d *Docker) CreateNetwork(ctx context.Context, n Network) error {
	labels := map[string]string{}
	for _, l := range n.Labels {
		k, v, _ := strings.Cut(l, "=") // a bare key is a label with an empty value, as for the CLI
		labels[k] = v
	}
	return d.do(ctx, "create network "+n.Name, func(ctx context.Context, c *client.Client) error {
		_, err := c.NetworkCreate(ctx, n.Name, client.NetworkCreateOptions{Driver: network.NetworkBridge, Internal: n.Internal, Labels: labels})
		return err
	})
}

// RemoveNetwork removes networks.
func (d *Docker) RemoveNetwork(ctx context.Context, names ...string) error {
	var errs []error
	for _, n := range names {
		errs = append(errs, d.do(ctx, "remove network "+n, func(ctx context.Context, c *client.Client) error {
			_, err := c.NetworkRemove(ctx, n, client.NetworkRemoveOptions{})
			return err
		}))
	}
	return errors.Join(errs...)
}

// ProjectNetworks returns the names of a compose project's networks, found by compose's label,
// sorted.
func (d *Docker) ProjectNetworks(ctx context.Context, project string) ([]string, error) {
	what := "list networks labelled " + projectLabel + "=" + project
	r, err := call(ctx, d, what, func(ctx context.Context, c *client.Client) (client.NetworkListResult, error) {
		return c.NetworkList(ctx, client.NetworkListOptions{Filters: make(client.Filters).Add("label", projectLabel+"="+project)})
	})
	if err != nil {
		return nil, err
	}
	var names []string
	for _, n := range r.Items {
		names = append(names, n.Name)
	}
	slices.Sort(names)
	return names, nil
}

// volumes is the names of the volumes filter selects, sorted.
func (d *Docker) volumes(ctx context.Context, what string, filter client.Filters) ([]string, error) {
	r, err := call(ctx, d, what, func(ctx context.Context, c *client.Client) (client.VolumeListResult, error) {
		return c.VolumeList(ctx, client.VolumeListOptions{Filters: filter})
	})
	if err != nil {
		return nil, err
	}
	var names []string
	for _, v := range r.Items {
		names = append(names, v.Name)
	}
	slices.Sort(names)
	return names, nil
}

// ProjectVolumes returns the names of a compose project's volumes, found by compose's label,
// sorted.
func (d *Docker) ProjectVolumes(ctx context.Context, project string) ([]string, error) {
	label := projectLabel + "=" + project
	return d.volumes(ctx, "list volumes labelled "+label, make(client.Filters).Add("label", label))
}

// RemoveVolumes deletes volumes, and what they hold.
func (d *Docker) RemoveVolumes(ctx context.Context, names ...string) error {
	var errs []error
	for _, n := range names {
		errs = append(errs, d.do(ctx, "remove volume "+n, func(ctx context.Context, c *client.Client) error {
			_, err := c.VolumeRemove(ctx, n, client.VolumeRemoveOptions{})
			return err
		}))
	}
	return errors.Join(errs...)
}

// Volumes returns the names of the volumes whose name begins with prefix, sorted.
func (d *Docker) Volumes(ctx context.Context, prefix string) ([]string, error) {
	all, err := d.volumes(ctx, "list volumes named "+prefix+"*", make(client.Filters).Add("name", prefix))
	// The engine's name filter matches anywhere in the name.
	return slices.DeleteFunc(all, func(v string) bool { return !strings.HasPrefix(v, prefix) }), err
}

// VolumeMountpoint is the folder on the host that holds a local volume's files. An engine that
// cannot say is an *Error; one that names no absolute path, another error.
func (d *Docker) VolumeMountpoint(ctx context.Context, name string) (string, error) {
	r, err := call(ctx, d, "inspect volume "+name, func(ctx context.Context, c *client.Client) (client.VolumeInspectResult, error) {
		return c.VolumeInspect(ctx, name, client.VolumeInspectOptions{})
	})
	if err != nil {
		return "", err
	}
	if dir := r.Volume.Mountpoint; !filepath.IsAbs(dir) {
		return "", fmt.Errorf("volume %s: mountpoint %q is not an absolute path", name, dir)
	}
	return r.Volume.Mountpoint, nil
}
