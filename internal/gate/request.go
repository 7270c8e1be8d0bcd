package gate

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/sharness-ai/sharness/internal/strictjson"
)

// MaxSummary caps a request's summary, in runes: one line for a person to read.
const MaxSummary = 200

var (
	idPattern     = regexp.MustCompile(`^[A-Z2-7]{26,52}$`) // crypto/rand.Text
	namePattern   = regexp.MustCompile(`^[a-z][a-z0-9._-]{0,63}$`)
	digestPattern = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
)

// Request is an action waiting for a person, as the component writes it to
// <dir>/pending/<id>.json and the host reads it.
type Request struct {
	ID        string    `json:"id"`        // random, names the files
	Component string    `json:"component"` // "fs", "bash", ...
	Action    string    `json:"action"`    // "fs.write", "bash.admin", ...
	Digest    string    `json:"digest"`    // sha256:<hex> of the canonical bytes of the exact request
	Summary   string    `json:"summary"`   // for the person; never secret material, never trusted
	Policy    string    `json:"policy"`    // the hash of the policy the component enforces
	Tier      Tier      `json:"tier"`      // once or every: whether a session approval may cover it
	Created   time.Time `json:"created"`
	Expires   time.Time `json:"expires"` // the component stops waiting then
}

func (r Request) validate() error {
	switch {
	case !idPattern.MatchString(r.ID):
		return errors.New("malformed id")
	case !namePattern.MatchString(r.Component) || !namePattern.MatchString(r.Action):
		return errors.New("component or action is not a lower-case name")
	case !digestPattern.MatchString(r.Digest) || !digestPattern.MatchString(r.Policy):
		return errors.New("digest or policy is not sha256:<hex>")
	case r.Tier != Once && r.Tier != Every:
		return fmt.Errorf("tier %q is neither once nor every", r.Tier)
	case cleanSummary(r.Summary) != r.Summary:
		return errors.New("summary holds control characters or is too long")
	case !r.Expires.After(r.Created):
		return errors.New("expires before it was created")
	}
	return nil
}

// cleanSummary makes s safe to print on the operator's terminal: a component's summary may
// quote what the agent asked for, so escape sequences and bidirectional overrides
// (CVE-2021-42574) become '?', and the text is cut to MaxSummary runes.
func cleanSummary(s string) string {
	s = strings.Map(func(r rune) rune {
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			return '?'
		}
		return r
	}, s)
	if utf8.RuneCountInString(s) > MaxSummary {
		s = string([]rune(s)[:MaxSummary-1]) + "…"
	}
	return s
}

func pendingFile(id string) string  { return "pending/" + id + ".json" }
func decisionFile(id string) string { return "decisions/" + id + ".json" }

// readRequest reads and checks the pending request id under root.
func readRequest(root *os.Root, id string) (Request, error) {
	if !idPattern.MatchString(id) {
		return Request{}, fmt.Errorf("%q is not a request id: %w", id, fs.ErrNotExist)
	}
	data, err := readFile(root, pendingFile(id), 4096)
	if err != nil {
		return Request{}, err
	}
	var r Request
	if err := strictjson.Decode(data, 1, &r); err != nil {
		return Request{}, fmt.Errorf("request %s: %w", id, err)
	}
	if err := r.validate(); err != nil {
		return Request{}, fmt.Errorf("request %s: %w", id, err)
	}
	if r.ID != id {
		return Request{}, fmt.Errorf("request %s: names id %q", id, r.ID)
	}
	return r, nil
}

// ErrNotOpened: a gate directory whose component has not opened its gate (never started, or
// not yet): it holds no requests.
var ErrNotOpened = errors.New("no component has opened this gate directory")

// List returns the requests of the gate directory dir that wait for a decision, oldest first:
// not expired and not decided. A pending file that cannot be read or is invalid is left out
// and named in the error, which is then returned with the readable requests.
func List(dir string) ([]Request, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("open gate directory: %w", err)
	}
	defer root.Close()
	entries, err := fs.ReadDir(root.FS(), "pending")
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s has no pending/ folder", ErrNotOpened, dir)
	} else if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	var reqs []Request
	var errs []error
	now := time.Now()
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || !idPattern.MatchString(id) {
			continue // a temporary file, or not ours
		}
		r, err := readRequest(root, id)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if _, err := root.Lstat(decisionFile(id)); err == nil || !now.Before(r.Expires) {
			continue
		}
		reqs = append(reqs, r)
	}
	slices.SortFunc(reqs, func(a, b Request) int { return cmp.Or(a.Created.Compare(b.Created), strings.Compare(a.ID, b.ID)) })
	return reqs, errors.Join(errs...)
}
