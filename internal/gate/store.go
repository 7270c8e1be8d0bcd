package gate

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sharness-ai/sharness/internal/artefact"
)

// usedFile holds a gate directory's spent approvals, one "<unix not_after> <key>" per line.
const usedFile = "used"

var errReplayed = errors.New("spent already")

// Set is the record of spent approvals (request ids and nonces), kept in the gate directory so
// that a restarted component still refuses a token it accepted before. An entry is forgotten
// once its approval is past not_after by more than Skew, when Check refuses it anyway.
type Set struct {
	mu   sync.Mutex
	root *os.Root
	m    map[string]time.Time
}

// OpenSet loads the spent approvals of the gate directory dir, forgetting those expired at now.
// The Set keeps dir open for its lifetime.
func OpenSet(dir string, now time.Time) (*Set, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("open gate directory: %w", err)
	}
	data, err := readFile(root, usedFile, 16<<20)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("read spent approvals: %w", err)
	}
	s := &Set{root: root, m: map[string]time.Time{}}
	f := strings.Fields(string(data))
	for i := 0; i < len(f); i += 2 {
		until, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil || i+1 == len(f) || !idPattern.MatchString(f[i+1]) {
			return nil, errors.New("read spent approvals: malformed")
		}
		if t := time.Unix(until, 0); t.Add(Skew).After(now) {
			s.m[f[i+1]] = t
		}
	}
	return s, nil
}

// Has reports whether key (a request id or a nonce) is spent.
func (s *Set) Has(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.m[key]
	return ok
}

// Add records keys as spent until until: on disk (the file replaced atomically), then in memory.
// If any key is spent already it records nothing.
func (s *Set) Add(until time.Time, keys ...string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := maps.Clone(s.m)
	for _, k := range keys {
		if _, ok := m[k]; ok {
			return fmt.Errorf("approval key %s: %w", k, errReplayed)
		}
		m[k] = until
	}
	var b strings.Builder
	for k, t := range m {
		fmt.Fprintf(&b, "%d %s\n", t.Unix(), k)
	}
	if err := writeFile(s.root, usedFile, []byte(b.String()), 0o600, false); err != nil {
		return fmt.Errorf("record spent approval: %w", err)
	}
	s.m = m
	return nil
}

// readFile reads the regular file name under root, refusing more than max bytes. O_NONBLOCK
// keeps a FIFO planted in a gate directory from hanging the reader.
func readFile(root *os.Root, name string, max int64) ([]byte, error) {
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", name)
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err == nil && int64(len(data)) > max {
		err = fmt.Errorf("%s: more than %d bytes", name, max)
	}
	return data, err
}

// writeFile is artefact.WriteIn: every file of a gate directory is written all at once.
var writeFile = artefact.WriteIn
