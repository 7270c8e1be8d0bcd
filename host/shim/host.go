package shim

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"

	"github.com/sharness-ai/sharness/host/shim/restrict"
	"github.com/sharness-ai/sharness/host/shim/runc"
)

const (
	maxFile  = 8 << 20 // config.json, process.json, resources
	maxStdin = 1 << 20 // the default pipe-max-size: what a pipe can hold
	// maxCode caps the binary HashInRoot reads: Claude Code's is about 200 MiB.
	maxCode = 1 << 30
)

// osHost is the machine as the decision sees it.
type osHost struct {
	ctx  context.Context
	runc string
}

func (osHost) ReadFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readCapped(f, maxFile, path)
}

func (osHost) ReadStdin() ([]byte, error) { return readCapped(os.Stdin, maxStdin, "stdin") }

func readCapped(r io.Reader, limit int64, name string) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("read %s: larger than %d bytes", name, limit)
	}
	return data, nil
}

func (osHost) LandlockABI() int { return restrict.ABI() }

func (osHost) HashInRoot(root, path string) (string, error) {
	dir, err := os.Open(root)
	if err != nil {
		return "", fmt.Errorf("open root %s: %w", root, err)
	}
	defer dir.Close()
	fd, err := unix.Openat2(int(dir.Fd()), path, &unix.OpenHow{Flags: unix.O_RDONLY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS})
	if err != nil {
		return "", fmt.Errorf("open %s in %s: %w", path, root, err)
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, io.LimitReader(f, maxCode+1))
	switch {
	case err != nil:
		return "", fmt.Errorf("read %s: %w", path, err)
	case n > maxCode:
		return "", fmt.Errorf("%s is larger than %d bytes", path, maxCode)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

func (osHost) Exists(path string) (bool, error) {
	_, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

func (h osHost) Bundle(root, id string) (string, error) { return runc.Bundle(h.ctx, h.runc, root, id) }
