package stack

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/sharness-ai/sharness/host/shim"
	"github.com/sharness-ai/sharness/internal/artefact"
	"github.com/sharness-ai/sharness/policies/compile"
	"github.com/sharness-ai/sharness/policies/pbp"
)

// Install compiles m and writes every component's config.json and seccomp.json where
// sharness-runtime reads them: root/<the hash's hex>/<component>/. It returns that folder, and
// already=true when an identical policy was there.
func Install(m *pbp.Manifest, root string, replace bool) (dir string, already bool, err error) {
	arts, err := compile.Compile(m)
	if err != nil {
		return "", false, err
	}
	files := make(map[string][]byte)
	for p, data := range arts {
		if rel, ok := strings.CutPrefix(p, compile.Dir+"/"); ok {
			files[rel] = data
		}
	}
	return installPolicy(root, m.Hash, files, replace)
}

// installPolicy writes files (paths relative to the policy's folder) into root/<hash>. It returns
// the folder, and already=true when an identical policy was there. A different one there is an
// error unless replace, which swaps the two folders in one rename (RENAME_EXCHANGE): the shim reads
// the old policy or the new one, never a mix and never none.
func installPolicy(root, hash string, files map[string][]byte, replace bool) (dir string, already bool, err error) {
	dir = shim.PolicyDir(root, hash)
	if dir == "" {
		return "", false, fmt.Errorf("install policy: %q is not a policy hash", hash)
	}
	var old string
	if same, err := sameTree(dir, files); err == nil {
		switch {
		case same:
			return dir, true, nil
		case !replace:
			return "", false, fmt.Errorf("install policy: %s holds a different policy under the same hash (another compiler version?): remove it, or pass --replace", dir)
		}
		old = dir
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", false, fmt.Errorf("install policy: read %s: %w", dir, err)
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", false, fmt.Errorf("install policy: %w", err)
	}
	tmp, err := os.MkdirTemp(root, "."+filepath.Base(dir)+".tmp-")
	if err != nil {
		return "", false, fmt.Errorf("install policy: %w", err)
	}
	defer os.RemoveAll(tmp) // gone after the rename; what a failure leaves otherwise
	for p := range files {
		if !filepath.IsLocal(filepath.FromSlash(p)) {
			return "", false, fmt.Errorf("install policy: artefact %q leaves the policy folder", p)
		}
	}
	if err := artefact.Write(tmp, files); err != nil {
		return "", false, fmt.Errorf("install policy: %w", err)
	}
	if err := ownTree(tmp); err != nil {
		return "", false, fmt.Errorf("install policy: %w", err)
	}
	if old != "" {
		// tmp holds the old policy afterwards, and the deferred RemoveAll takes it away.
		if err := unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, old, unix.RENAME_EXCHANGE); err != nil {
			return "", false, fmt.Errorf("install policy: swap in the new policy: %w", err)
		}
		return dir, false, syncDir(root)
	}
	if err := os.Rename(tmp, dir); err != nil {
		// Another install may have won the race: identical is fine.
		if same, serr := sameTree(dir, files); serr == nil && same {
			return dir, true, nil
		}
		return "", false, fmt.Errorf("install policy: %w", err)
	}
	if err := syncDir(root); err != nil {
		return "", false, fmt.Errorf("install policy: %w", err)
	}
	return dir, false, nil
}

// ownTree gives every folder (0755) and file (0644) under dir to root when run as root, whatever
// the umask and the parent's set-group-ID bit say, and syncs the folders.
func ownTree(dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		mode := os.FileMode(0o644)
		if d.IsDir() {
			mode = 0o755
		}
		if os.Geteuid() == 0 {
			if err := os.Lchown(p, 0, 0); err != nil {
				return err
			}
		}
		if err := os.Chmod(p, mode); err != nil {
			return err
		}
		if d.IsDir() {
			return syncDir(p)
		}
		return nil
	})
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// sameTree reports whether dir holds exactly files (artefact.Check finds no drift). The error
// wraps fs.ErrNotExist when dir does not exist.
func sameTree(dir string, files map[string][]byte) (bool, error) {
	if _, err := os.Lstat(dir); err != nil {
		return false, err
	}
	// The code record is this machine's, rewritten by every install (RecordCode), not compiled.
	if code, err := os.ReadFile(filepath.Join(dir, shim.CodeFile)); err == nil {
		files = maps.Clone(files)
		files[shim.CodeFile] = code
	}
	drift, err := artefact.Check(dir, files, ".")
	return err == nil && len(drift) == 0, err
}
