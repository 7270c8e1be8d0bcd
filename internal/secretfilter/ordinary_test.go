package secretfilter

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// ordinaryModules are modules go.mod pins whose source TestOrdinarySource reads from the module
// cache, beside this repository: networking, an SDK, Unicode tables, system calls, cryptography
// (test keys and all) and tooling. gitleaks is not among them: its tree is a corpus of
// credentials by design.
var ordinaryModules = []string{
	"golang.org/x/net@v0.62.0", "github.com/anthropics/anthropic-sdk-go@v1.84.0", "golang.org/x/text@v0.43.0",
	"golang.org/x/sys@v0.49.0", "golang.org/x/crypto@v0.58.0", "golang.org/x/tools@v0.51.0",
}

type ordinaryFile struct {
	path string
	text []byte
}

// ordinaryFiles returns the text files of this repository and of the ordinary modules found in
// the module cache: at most 1 MiB, no NUL byte in their first 8 KiB, outside .git and this
// package's testdata (fake secrets on purpose).
func ordinaryFiles(t *testing.T) (files []ordinaryFile, roots int) {
	dirs := []string{"../.."}
	if out, err := exec.Command("go", "env", "GOMODCACHE").Output(); err != nil {
		t.Logf("go env GOMODCACHE: %v: the module cache is not read", err)
	} else {
		for _, m := range ordinaryModules {
			p := filepath.Join(strings.TrimSpace(string(out)), m)
			if _, err := os.Stat(p); err != nil {
				t.Logf("skip %s: not in the module cache (go mod download %s fetches it)", m, m)
				continue
			}
			dirs = append(dirs, p)
		}
	}
	for _, root := range dirs {
		filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			switch {
			case err != nil:
				return nil
			case d.IsDir() && (d.Name() == ".git" || strings.HasSuffix(p, filepath.Join("secretfilter", "testdata"))):
				return filepath.SkipDir
			case !d.Type().IsRegular():
				return nil
			}
			b, err := os.ReadFile(p)
			if err != nil || len(b) == 0 || len(b) > 1<<20 || bytes.IndexByte(b[:min(len(b), 8<<10)], 0) >= 0 {
				return nil
			}
			files = append(files, ordinaryFile{p, b})
			return nil
		})
	}
	return files, len(dirs) - 1
}

// TestOrdinarySource: on a large body of ordinary source (this repository and modules of the
// module cache) at most 5% of the files get a hit, counting every hit as a false refusal, even
// the test keys and tokens some of these trees hold on purpose; and the normaliser's views add
// a hit to at most 0.5% of them. The file-level share is what a person meets: a file with one
// hit is a tool result refused or redacted.
func TestOrdinarySource(t *testing.T) {
	f := newTestFilter(t)
	files, modules := ordinaryFiles(t)
	if modules == 0 {
		t.Log("no module of the module cache was read (CI has them): this repository alone")
	}
	size, flagged, byViews := 0, 0, 0
	for _, o := range files {
		size += len(o.text)
		hits := f.Scan(o.text)
		if len(hits) == 0 {
			continue
		}
		flagged++
		plain := f.scan(o.text, normalised(o.text)[:1])
		for _, h := range hits {
			t.Logf("%s: %s %.60q", o.path, h.Rule, o.text[h.Start:h.End])
		}
		if len(plain) < len(hits) {
			byViews++
			t.Logf("%s: %d of its hits come from the normalised views", o.path, len(hits)-len(plain))
		}
	}
	precision := 1 - float64(flagged)/float64(len(files))
	t.Logf("%d files (%.1f MB, %d modules of the module cache): %d with a hit (file-level precision %.4f), %d with a hit only a normalised view finds",
		len(files), float64(size)/1e6, modules, flagged, precision, byViews)
	if len(files) < 100 {
		t.Fatalf("read %d files; the tree was not found", len(files))
	}
	if precision < 0.95 {
		t.Errorf("file-level precision %.4f on ordinary source, want at least 0.95", precision)
	}
	if float64(byViews) > 0.005*float64(len(files)) {
		t.Errorf("the normalised views add hits to %d of %d files, want at most 0.5%%", byViews, len(files))
	}
}
