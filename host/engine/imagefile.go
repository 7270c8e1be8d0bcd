package engine

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
)

// maxImageFile caps the file ImageFile hashes: a component's static binary is about 15 MB.
const maxImageFile = 256 << 20

// ImageFile is what an image holds at path, as the engine stores it: the image's id and the
// SHA-256 of the file there, which must be a regular file. It reads the file through a container
// created from the image for the purpose and removed at once: created, never started, so no
// runtime runs and nothing in the image executes. `sharness-ai install` records each component's
// entrypoint so (the runtime shim's code record).
func (d *Docker) ImageFile(ctx context.Context, ref, path string) (id, sum string, err error) {
	img, err := call(ctx, d, "inspect image "+ref, func(ctx context.Context, c *client.Client) (client.ImageInspectResult, error) {
		return c.ImageInspect(ctx, ref)
	})
	if err != nil {
		return "", "", err
	}
	created, err := call(ctx, d, "create a container of "+ref+" to read "+path, func(ctx context.Context, c *client.Client) (client.ContainerCreateResult, error) {
		return c.ContainerCreate(ctx, client.ContainerCreateOptions{
			Config:     &container.Config{Image: img.ID, Entrypoint: []string{path}, NetworkDisabled: true, Labels: map[string]string{"ai.sharness.purpose": "read " + path}},
			HostConfig: &container.HostConfig{NetworkMode: "none"},
		})
	})
	if err != nil {
		return "", "", err
	}
	defer func() {
		rerr := d.do(context.WithoutCancel(ctx), "remove the container that read "+path, func(ctx context.Context, c *client.Client) error {
			_, err := c.ContainerRemove(ctx, created.ID, client.ContainerRemoveOptions{Force: true})
			return err
		})
		if err == nil {
			err = rerr
		}
	}()
	err = d.do(ctx, "read "+path+" from "+ref, func(ctx context.Context, c *client.Client) error {
		res, err := c.CopyFromContainer(ctx, created.ID, client.CopyFromContainerOptions{SourcePath: path})
		if err != nil {
			return err
		}
		defer res.Content.Close()
		sum, err = tarFileSHA256(res.Content, path)
		return err
	})
	if err != nil {
		return "", "", err
	}
	return img.ID, sum, nil
}

// tarFileSHA256 is "sha256:<hex>" of the one regular file the engine's copy archive holds.
func tarFileSHA256(r io.Reader, path string) (string, error) {
	tr := tar.NewReader(r)
	h, err := tr.Next()
	if err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	if h.Typeflag != tar.TypeReg {
		return "", fmt.Errorf("%s is not a regular file (tar type %q)", path, h.Typeflag)
	}
	if h.Size > maxImageFile {
		return "", fmt.Errorf("%s: %d bytes, more than %d", path, h.Size, maxImageFile)
	}
	d := sha256.New()
	if _, err := io.Copy(d, io.LimitReader(tr, maxImageFile)); err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	if _, err := tr.Next(); !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("read %s: the archive holds more than the file", path)
	}
	return "sha256:" + hex.EncodeToString(d.Sum(nil)), nil
}
