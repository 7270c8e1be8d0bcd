package stack

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/sharness-ai/sharness/host/shim"
	"github.com/sharness-ai/sharness/policies/pbp"
)

// ReadImageFile is what an image holds at a path: its id and the file's "sha256:<hex>"
// (engine.ImageFile on this machine's engine; tests pass a fake).
type ReadImageFile func(ctx context.Context, image, path string) (id, sum string, err error)

// RecordCode writes the code record of the policy installed in dir (shim.CodeFile): for every
// component, the id of its image on this machine's engine and the SHA-256 of the entrypoint its
// compiled spec runs, read from that image. The runtime shim then knows each component's
// container by what it runs (issue 16, part 2). A component whose image is missing, or whose
// entrypoint cannot be read, is an error naming it: the shim would refuse it anyway. The file
// appears whole (written beside, then renamed), root's 0644 like the compiled specs.
func RecordCode(ctx context.Context, m *pbp.Manifest, dir string, read ReadImageFile) (shim.CodeRecord, error) {
	rec := shim.CodeRecord{Components: map[string]shim.Code{}}
	for _, c := range m.Components {
		data, err := os.ReadFile(filepath.Join(dir, c.Name, "config.json"))
		if err != nil {
			return rec, fmt.Errorf("record code: %w", err)
		}
		spec, err := shim.LoadSpec(data)
		if err != nil {
			return rec, fmt.Errorf("record code: %s: %w", c.Name, err)
		}
		if spec.Process == nil || len(spec.Process.Args) == 0 || !filepath.IsAbs(spec.Process.Args[0]) {
			return rec, fmt.Errorf("record code: %s: the compiled spec names no absolute entrypoint", c.Name)
		}
		path := spec.Process.Args[0]
		if c.Image == "" {
			return rec, fmt.Errorf("record code: %s: the manifest names no image", c.Name)
		}
		id, sum, err := read(ctx, c.Image, path)
		if err != nil {
			return rec, fmt.Errorf("record code: %s (image %s): %w (build the images first: hack/build-images.sh)", c.Name, c.Image, err)
		}
		rec.Components[c.Name] = shim.Code{Image: id, Path: path, SHA256: sum}
	}
	data, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return rec, err
	}
	if _, err := shim.ParseCodeRecord(data); err != nil {
		return rec, fmt.Errorf("record code: %w", err)
	}
	return rec, writeRootFile(filepath.Join(dir, shim.CodeFile), append(data, '\n'))
}

// writeRootFile writes path whole: a temporary file beside it, synced, root's 0644 when run as
// root, renamed over it.
func writeRootFile(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if os.Geteuid() == 0 {
		if err := tmp.Chown(0, 0); err != nil {
			tmp.Close()
			return err
		}
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	return syncDir(filepath.Dir(path))
}
