// Package enginetest is a fake Docker Engine for the tests of host/engine and its callers: an
// in-memory engine (containers, images, networks, volumes) behind an httptest server that speaks
// the Engine API as Engine 20.10 does (API 1.41), answering with the moby api types' JSON, and
// records the requests the Go client sends. Like all of testkit/, it never ships
// (internal/zones_test.go).
//
// It models what sharness-ai asks of an engine, not an engine: label and name filters, create,
// start (a container runs Engine.Run and exits at once), wait, stop, remove, logs. A request it
// does not model is answered 404, as an engine answers a path it does not know.
package enginetest

import (
	"archive/tar"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	dockerspec "github.com/moby/docker-image-spec/specs-go/v1"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/image"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/api/types/system"
	"github.com/moby/moby/api/types/volume"
	"github.com/moby/moby/client"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/sharness-ai/sharness/host/engine"
)

// APIVersion is the API version the fake engine speaks: Engine 20.10's.
const APIVersion = "1.41"

// Engine is the fake engine's state; set its fields before Start, and read or change them
// under Lock while it serves.
type Engine struct {
	Version         string   // GET /version's; "" answers 500, an engine that cannot say
	Runtimes        []string // GET /info's
	DefaultRuntime  string
	SecurityOptions []string

	Containers []Container
	Images     []Image
	Networks   []Network
	Volumes    []Volume

	// Run is what a container started through the API does before it exits: its exit code. Nil:
	// it exits 0.
	Run func(c Created) int
	// Hook answers a request before the model does (path without the version prefix); false
	// leaves it to the model.
	Hook func(w http.ResponseWriter, r *http.Request, path string) bool

	mu       sync.Mutex
	requests []string
	versions []string // the API versions requests named
	nextID   int
}

// Container is a container of the fake engine.
type Container struct {
	ID, Name, State string // State: created, running, exited
	Labels          map[string]string
	Runtime         string // HostConfig.Runtime; "" is "runc"
	Tty             bool
	Stdout, Stderr  string // what GET /containers/{id}/logs replays
	ExitCode        int
	Stuck           bool     // DELETE answers 204 and leaves it, as an engine whose removal is stuck
	Created         *Created // how it was created through the API, if it was
}

// Created is what a container create asked for.
type Created struct {
	Name       string
	Image      string
	Entrypoint []string
	Cmd        []string
	Network    string
	DNS        []string
}

// Image is a local image.
type Image struct {
	Refs            []string // the names it answers to (its ID always does)
	ID              string
	Size            int64
	Entrypoint, Cmd []string
	Volumes         []string
	Files           map[string][]byte // what GET /containers/{id}/archive of a container of it finds
}

// Network is a network of the fake engine.
type Network struct {
	ID, Name string
	Internal bool
	Labels   map[string]string
}

// Volume is a local volume.
type Volume struct {
	Name       string
	Labels     map[string]string
	Mountpoint string // "" is /var/lib/docker/volumes/<name>/_data
}

// Lock holds e's state still while a test reads or changes it; Unlock lets it serve again.
func (e *Engine) Lock()   { e.mu.Lock() }
func (e *Engine) Unlock() { e.mu.Unlock() }

// Start serves e until the test ends and returns an engine whose API is e and whose compose
// commands run runs (nil: every compose command fails).
func (e *Engine) Start(t testing.TB, run engine.Runner) *engine.Docker {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(e.serve))
	t.Cleanup(srv.Close)
	if run == nil {
		run = func(_ context.Context, c engine.Command) error {
			return fmt.Errorf("docker %s: not faked", strings.Join(c.Args, " "))
		}
	}
	return engine.With(run, client.WithHost("tcp://"+srv.Listener.Addr().String()))
}

// NoEngine is an engine that cannot be reached: its socket does not exist.
func NoEngine(t testing.TB, run engine.Runner) *engine.Docker {
	return engine.With(run, client.WithHost("unix://"+filepath.Join(t.TempDir(), "docker.sock")))
}

// Requests are the requests served, "GET /containers/json?all=1&filters={...}" (the query
// unescaped, its keys sorted), without the version prefix and the client's pings.
func (e *Engine) Requests() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.requests)
}

// APIVersions are the versions the requests named in their path, one per request.
func (e *Engine) APIVersions() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.versions)
}

var versioned = regexp.MustCompile(`^/v([0-9]+\.[0-9]+)(/.*)$`)

func (e *Engine) serve(w http.ResponseWriter, r *http.Request) {
	e.mu.Lock()
	defer e.mu.Unlock()
	path := r.URL.Path
	if m := versioned.FindStringSubmatch(path); m != nil {
		e.versions = append(e.versions, m[1])
		path = m[2]
	}
	if path == "/_ping" {
		w.Header().Set("Api-Version", APIVersion)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprint(w, "OK")
		return
	}
	line := r.Method + " " + path
	if q, _ := url.QueryUnescape(r.URL.Query().Encode()); q != "" {
		line += "?" + q
	}
	e.requests = append(e.requests, line)
	if e.Hook != nil && e.Hook(w, r, path) {
		return
	}
	e.model(w, r, path)
}

// fail answers as the engine does: {"message": ...} with the status.
func fail(w http.ResponseWriter, status int, format string, args ...any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"message": fmt.Sprintf(format, args...)})
}

func answer(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// filters is the request's filters: term → values.
func filters(r *http.Request) (map[string][]string, error) {
	f := map[string][]string{}
	raw := r.URL.Query().Get("filters")
	if raw == "" {
		return f, nil
	}
	var m map[string]map[string]bool
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		return nil, err
	}
	for term, vs := range m {
		for v := range vs {
			f[term] = append(f[term], v)
		}
	}
	return f, nil
}

// labelled says whether labels carry every one of want ("key" or "key=value").
func labelled(labels map[string]string, want []string) bool {
	for _, l := range want {
		k, v, hasValue := strings.Cut(l, "=")
		if got, ok := labels[k]; !ok || hasValue && got != v {
			return false
		}
	}
	return true
}

func (e *Engine) model(w http.ResponseWriter, r *http.Request, path string) {
	f, err := filters(r)
	if err != nil {
		fail(w, http.StatusBadRequest, "invalid filter: %v", err)
		return
	}
	for term := range f {
		if term != "label" && term != "name" {
			fail(w, http.StatusBadRequest, "invalid filter '%s'", term)
			return
		}
	}
	get, post, del := r.Method == http.MethodGet, r.Method == http.MethodPost, r.Method == http.MethodDelete
	switch {
	case get && path == "/version":
		if e.Version == "" {
			fail(w, http.StatusInternalServerError, "the fake engine has no version")
			return
		}
		answer(w, 200, system.VersionResponse{Version: e.Version, APIVersion: APIVersion, MinAPIVersion: "1.12", Os: "linux", Arch: "amd64"})
	case get && path == "/info":
		rts := map[string]system.RuntimeWithStatus{}
		for _, n := range e.Runtimes {
			rts[n] = system.RuntimeWithStatus{Runtime: system.Runtime{Path: n}}
		}
		answer(w, 200, system.Info{ServerVersion: e.Version, Runtimes: rts, DefaultRuntime: e.DefaultRuntime, SecurityOptions: e.SecurityOptions})
	case get && path == "/containers/json":
		all := r.URL.Query().Get("all") == "1"
		items := []container.Summary{}
		for _, c := range e.Containers {
			if (all || c.State == "running") && labelled(c.Labels, f["label"]) {
				items = append(items, container.Summary{ID: c.ID, Names: []string{"/" + c.Name}, Labels: c.Labels, State: container.ContainerState(c.State), Image: "sharness/x:dev"})
			}
		}
		answer(w, 200, items)
	case post && path == "/containers/create":
		e.create(w, r)
	case strings.HasPrefix(path, "/containers/"):
		e.containerCall(w, r, strings.TrimPrefix(path, "/containers/"))
	case get && strings.HasPrefix(path, "/images/") && strings.HasSuffix(path, "/json"):
		ref := strings.TrimSuffix(strings.TrimPrefix(path, "/images/"), "/json")
		i := slices.IndexFunc(e.Images, func(img Image) bool { return img.ID == ref || slices.Contains(img.Refs, ref) })
		if i < 0 {
			fail(w, http.StatusNotFound, "No such image: %s", ref)
			return
		}
		img := e.Images[i]
		cfg := &dockerspec.DockerOCIImageConfig{ImageConfig: ocispec.ImageConfig{Entrypoint: img.Entrypoint, Cmd: img.Cmd}}
		if len(img.Volumes) > 0 {
			cfg.Volumes = map[string]struct{}{}
			for _, v := range img.Volumes {
				cfg.Volumes[v] = struct{}{}
			}
		}
		answer(w, 200, image.InspectResponse{ID: img.ID, RepoTags: img.Refs, Size: img.Size, Config: cfg, Os: "linux", Architecture: "amd64"})
	case post && path == "/networks/create":
		var req network.CreateRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			fail(w, http.StatusBadRequest, "%v", err)
			return
		}
		if slices.ContainsFunc(e.Networks, func(n Network) bool { return n.Name == req.Name }) {
			fail(w, http.StatusConflict, "network with name %s already exists", req.Name)
			return
		}
		e.nextID++
		id := fmt.Sprintf("%064x", e.nextID)
		e.Networks = append(e.Networks, Network{ID: id, Name: req.Name, Internal: req.Internal, Labels: req.Labels})
		answer(w, http.StatusCreated, network.CreateResponse{ID: id})
	case get && path == "/networks":
		items := []network.Summary{}
		for _, n := range e.Networks {
			if labelled(n.Labels, f["label"]) {
				items = append(items, network.Summary{Network: network.Network{Name: n.Name, ID: n.ID, Driver: "bridge", Scope: "local", Internal: n.Internal, Labels: n.Labels}})
			}
		}
		answer(w, 200, items)
	case del && strings.HasPrefix(path, "/networks/"):
		name := strings.TrimPrefix(path, "/networks/")
		n := len(e.Networks)
		e.Networks = slices.DeleteFunc(e.Networks, func(nw Network) bool { return nw.Name == name || nw.ID == name })
		if len(e.Networks) == n {
			fail(w, http.StatusNotFound, "network %s not found", name)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	case get && path == "/volumes":
		items := []volume.Volume{}
		for _, v := range e.Volumes {
			if labelled(v.Labels, f["label"]) && !slices.ContainsFunc(f["name"], func(n string) bool { return !strings.Contains(v.Name, n) }) {
				items = append(items, e.volume(v))
			}
		}
		answer(w, 200, volume.ListResponse{Volumes: items, Warnings: []string{}})
	case get && strings.HasPrefix(path, "/volumes/"):
		name := strings.TrimPrefix(path, "/volumes/")
		i := slices.IndexFunc(e.Volumes, func(v Volume) bool { return v.Name == name })
		if i < 0 {
			fail(w, http.StatusNotFound, "get %s: no such volume", name)
			return
		}
		answer(w, 200, e.volume(e.Volumes[i]))
	case del && strings.HasPrefix(path, "/volumes/"):
		name := strings.TrimPrefix(path, "/volumes/")
		n := len(e.Volumes)
		e.Volumes = slices.DeleteFunc(e.Volumes, func(v Volume) bool { return v.Name == name })
		if len(e.Volumes) == n {
			fail(w, http.StatusNotFound, "get %s: no such volume", name)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	default:
		fail(w, http.StatusNotFound, "page not found")
	}
}

func (e *Engine) volume(v Volume) volume.Volume {
	mp := v.Mountpoint
	if mp == "" {
		mp = "/var/lib/docker/volumes/" + v.Name + "/_data"
	}
	return volume.Volume{Name: v.Name, Driver: "local", Mountpoint: mp, Labels: v.Labels, Scope: "local", Options: map[string]string{}}
}

func (e *Engine) create(w http.ResponseWriter, r *http.Request) {
	var req container.CreateRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Config == nil {
		fail(w, http.StatusBadRequest, "invalid create request: %v", err)
		return
	}
	name := r.URL.Query().Get("name")
	if slices.ContainsFunc(e.Containers, func(c Container) bool { return c.Name == name }) {
		fail(w, http.StatusConflict, `Conflict. The container name "/%s" is already in use`, name)
		return
	}
	if !slices.ContainsFunc(e.Images, func(img Image) bool { return img.ID == req.Image || slices.Contains(img.Refs, req.Image) }) {
		fail(w, http.StatusNotFound, "No such image: %s", req.Image)
		return
	}
	c := &Created{Name: name, Image: req.Image, Entrypoint: req.Entrypoint, Cmd: req.Cmd}
	if req.HostConfig != nil {
		c.Network = string(req.HostConfig.NetworkMode)
		for _, a := range req.HostConfig.DNS {
			c.DNS = append(c.DNS, a.String())
		}
	}
	e.nextID++
	id := fmt.Sprintf("%064x", e.nextID)
	e.Containers = append(e.Containers, Container{ID: id, Name: name, State: "created", Created: c, Labels: req.Labels})
	answer(w, http.StatusCreated, container.CreateResponse{ID: id, Warnings: []string{}})
}

// containerCall answers /containers/{id}/... and DELETE /containers/{id}.
func (e *Engine) containerCall(w http.ResponseWriter, r *http.Request, rest string) {
	id, verb, _ := strings.Cut(rest, "/")
	i := slices.IndexFunc(e.Containers, func(c Container) bool {
		return c.ID == id || c.Name == id || len(id) >= 4 && strings.HasPrefix(c.ID, id)
	})
	if i < 0 {
		fail(w, http.StatusNotFound, "No such container: %s", id)
		return
	}
	c := &e.Containers[i]
	switch {
	case r.Method == http.MethodGet && verb == "json":
		rt := c.Runtime
		if rt == "" {
			rt = "runc"
		}
		answer(w, 200, container.InspectResponse{ID: c.ID, Name: "/" + c.Name,
			State:      &container.State{Status: container.ContainerState(c.State), Running: c.State == "running", ExitCode: c.ExitCode},
			HostConfig: &container.HostConfig{Runtime: rt}, Config: &container.Config{Tty: c.Tty, Labels: c.Labels}})
	case r.Method == http.MethodGet && verb == "logs":
		q := r.URL.Query()
		w.Header().Set("Content-Type", "application/vnd.docker.multiplexed-stream")
		if c.Tty {
			w.Header().Set("Content-Type", "application/vnd.docker.raw-stream")
		}
		w.WriteHeader(200)
		for _, s := range []struct {
			on     bool
			stream byte
			text   string
		}{{q.Get("stdout") == "1", 1, c.Stdout}, {q.Get("stderr") == "1", 2, c.Stderr}} {
			if !s.on || s.text == "" {
				continue
			}
			if c.Tty {
				fmt.Fprint(w, s.text)
				continue
			}
			h := make([]byte, 8)
			h[0] = s.stream
			binary.BigEndian.PutUint32(h[4:], uint32(len(s.text)))
			w.Write(append(h, s.text...))
		}
	case r.Method == http.MethodPost && verb == "start":
		code := 0
		if e.Run != nil && c.Created != nil {
			created := *c.Created
			e.mu.Unlock() // Run may take its time, and call the engine
			code = e.Run(created)
			e.mu.Lock()
			if i = slices.IndexFunc(e.Containers, func(x Container) bool { return x.ID == id || x.Name == id }); i < 0 {
				w.WriteHeader(http.StatusNoContent)
				return
			}
			c = &e.Containers[i]
		}
		c.State, c.ExitCode = "exited", code
		w.WriteHeader(http.StatusNoContent)
	case r.Method == http.MethodGet && verb == "archive":
		e.archive(w, r, c)
	case r.Method == http.MethodPost && verb == "wait":
		answer(w, 200, container.WaitResponse{StatusCode: int64(c.ExitCode)})
	case r.Method == http.MethodPost && verb == "stop":
		if c.State == "running" {
			c.State, c.ExitCode = "exited", 143
		}
		w.WriteHeader(http.StatusNoContent)
	case r.Method == http.MethodDelete && verb == "":
		if c.State == "running" && r.URL.Query().Get("force") != "1" {
			fail(w, http.StatusConflict, "You cannot remove a running container %s. Stop the container before attempting removal or force remove", c.ID)
			return
		}
		if !c.Stuck {
			e.Containers = slices.Delete(e.Containers, i, i+1)
		}
		w.WriteHeader(http.StatusNoContent)
	default:
		fail(w, http.StatusNotFound, "page not found")
	}
}

// archive answers GET /containers/{id}/archive?path=P: the file P of the container's image, as
// the one regular file of a tar stream.
func (e *Engine) archive(w http.ResponseWriter, r *http.Request, c *Container) {
	p := r.URL.Query().Get("path")
	var data []byte
	found := false
	if c.Created != nil {
		for _, img := range e.Images {
			if img.ID == c.Created.Image || slices.Contains(img.Refs, c.Created.Image) {
				data, found = img.Files[p]
			}
		}
	}
	if !found {
		fail(w, http.StatusNotFound, "Could not find the file %s in container %s", p, c.ID)
		return
	}
	stat, _ := json.Marshal(container.PathStat{Name: path.Base(p), Size: int64(len(data)), Mode: 0o755})
	w.Header().Set("X-Docker-Container-Path-Stat", base64.StdEncoding.EncodeToString(stat))
	w.Header().Set("Content-Type", "application/x-tar")
	w.WriteHeader(200)
	tw := tar.NewWriter(w)
	tw.WriteHeader(&tar.Header{Name: path.Base(p), Mode: 0o755, Size: int64(len(data)), Typeflag: tar.TypeReg})
	tw.Write(data)
	tw.Close()
}
