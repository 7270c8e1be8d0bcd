package audit

import (
	"cmp"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/spiffe/go-spiffe/v2/svid/x509svid"
)

// Defaults of Config.Every and Config.Interval.
const (
	DefaultEvery    = 100
	DefaultInterval = 5 * time.Second
)

// Config is what a component's Writer needs.
type Config struct {
	Component string          // the component's name; its SVID must be spiffe://<td>/<Component>
	Policy    string          // the policy hash M, sha256:<hex>
	SessionCA string          // hex SHA-256 of the session CA certificate (CAHash)
	SVID      x509svid.Source // the component's SVID (an *x509svid.SVID is one); its key signs checkpoints
	Every     int             // a checkpoint after this many unsigned lines (DefaultEvery)
	Interval  time.Duration   // and at most this long after the first unsigned line (DefaultInterval)
	Now       func() time.Time
	// UnsafeNoSync skips the fsync at start, checkpoints and Close, for benchmarks only: a
	// machine crash can then lose signed lines.
	UnsafeNoSync bool
}

// CAHash is the hex SHA-256 of a CA certificate's DER, as the launcher records it for the session.
func CAHash(ca *x509.Certificate) string { return hashLine(ca.Raw) }

// Writer appends to one component's audit log. It is safe for concurrent use.
type Writer struct {
	mu      sync.Mutex
	f       *os.File
	c       Config
	seq     uint64
	prev    string
	pending int // lines since the last checkpoint
	timer   *time.Timer
	err     error // the first failure: the log takes no line after it
	closed  bool
}

// Open opens or creates the log at path, holding an exclusive lock on it, and writes a start
// record. An existing log must be this component's, of this session and policy, with an intact
// chain: Open continues its seq and prev, or refuses it naming the first bad line. An
// unterminated last line (a crash mid-write) is removed and named in the start record.
func Open(path string, c Config) (*Writer, error) {
	c.Every, c.Interval = cmp.Or(c.Every, DefaultEvery), cmp.Or(c.Interval, DefaultInterval)
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Component == "" || !isHash(c.Policy, "sha256:") || !isHash(c.SessionCA, "") || c.SVID == nil || c.Every < 0 || c.Interval < 0 {
		return nil, errors.New("open audit log: the config needs a component, a policy hash sha256:<hex>, the session CA's hex SHA-256 and an SVID")
	}
	if err := sign(c, &record{}); err != nil { // fail now, not at the first checkpoint
		return nil, fmt.Errorf("open audit log: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open audit log: %w", err)
	}
	w := &Writer{f: f, c: c}
	w.timer = time.AfterFunc(c.Interval, func() { w.Checkpoint() })
	w.timer.Stop()
	if err := w.resume(); err != nil {
		w.timer.Stop()
		f.Close()
		return nil, fmt.Errorf("open audit log %s: %w", path, err)
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil && !c.UnsafeNoSync { // a new file's name is durable too
		d.Sync()
		d.Close()
	}
	return w, nil
}

func (w *Writer) resume() error {
	if err := syscall.Flock(int(w.f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return fmt.Errorf("another writer holds it: %w", err)
	}
	c := &chain{rep: Report{Component: w.c.Component, Policy: w.c.Policy, SessionCA: w.c.SessionCA}}
	tail, err := c.read(w.f)
	if f := c.rep.Failures; err == nil && len(f) > 0 {
		err = fmt.Errorf("line %d: %s: refusing to continue a broken chain", f[0].Line, f[0].Reason)
	}
	start := record{Type: "start", SessionCA: w.c.SessionCA}
	if err == nil && len(tail) > 0 {
		start.Dropped, start.DroppedBytes = hashLine(tail), len(tail)
		var st os.FileInfo
		if st, err = w.f.Stat(); err == nil {
			err = w.f.Truncate(st.Size() - int64(len(tail)))
		}
	}
	if err != nil {
		return err
	}
	w.seq, w.prev = c.seq, c.prev
	w.append(&start)
	w.sync()
	return w.err
}

// Log appends one event. Once a write or checkpoint has failed it fails, and keeps failing.
func (w *Writer) Log(e Event) error {
	if err := e.check(); err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return errors.New("audit: log closed")
	}
	w.append(&record{Type: "event", Event: e})
	if w.pending >= w.c.Every {
		w.checkpoint(false)
	}
	return w.err
}

// Err is the failure that stopped the log (a full or read-only volume, a failed sync; or the
// log closed), or nil while it takes lines; a nil Writer (no record) has none. A component asks it before a
// decision and refuses once the log cannot take the decision's line: a full disk stops the
// component's decisions rather than drop their records (issue 22). The log takes no line after
// its first failure, so the refusals go on until the component is restarted on a volume with
// room, where Open continues the chain (less an unterminated last line, named in its start
// record).
func (w *Writer) Err() error {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil && w.closed {
		return errors.New("audit: log closed")
	}
	return w.err
}

// Checkpoint signs the chain head now, if a line is unsigned, and syncs the file.
func (w *Writer) Checkpoint() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed && w.pending > 0 {
		w.checkpoint(false)
	}
	return w.err
}

// Close writes the final (shutdown) checkpoint, syncs and closes the file.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	w.checkpoint(true)
	return cmp.Or(w.err, w.f.Close())
}

// append fills r's chain fields, writes it with one write and advances the chain.
func (w *Writer) append(r *record) {
	if w.err != nil {
		return
	}
	r.Seq, r.Time, r.Component, r.Policy, r.Prev = w.seq+1, w.c.Now().UTC().Format(time.RFC3339Nano), w.c.Component, w.c.Policy, w.prev
	b, err := []byte(nil), error(nil)
	if r.Type == "checkpoint" {
		err = sign(w.c, r) // the SVID may have been rotated since the last checkpoint
	}
	if err == nil {
		b, err = encode(r)
	}
	if err == nil {
		_, err = w.f.Write(append(b, '\n'))
	}
	if err != nil {
		w.err = fmt.Errorf("audit: write line %d: %w", r.Seq, err)
		return
	}
	w.seq, w.prev = r.Seq, hashLine(b)
	if w.pending++; w.pending == 1 {
		w.timer.Reset(w.c.Interval)
	}
}

func (w *Writer) checkpoint(final bool) {
	w.append(&record{Type: "checkpoint", Final: final})
	w.pending = 0
	w.timer.Stop()
	w.sync()
}

func (w *Writer) sync() {
	if w.err == nil && !w.c.UnsafeNoSync {
		if err := w.f.Sync(); err != nil {
			w.err = fmt.Errorf("audit: sync: %w", err)
		}
	}
}

// sign signs checkpoint r with c's SVID (ECDSA over SHA-256, or Ed25519), refusing an SVID
// that is not c.Component's.
func sign(c Config, r *record) error {
	s, err := c.SVID.GetX509SVID()
	if err != nil {
		return fmt.Errorf("get SVID: %w", err)
	}
	if len(s.Certificates) == 0 || s.PrivateKey == nil || s.ID.Path() != "/"+c.Component {
		return fmt.Errorf("SVID %s is not component %s's", s.ID, c.Component)
	}
	for _, cert := range s.Certificates {
		r.Certs = append(r.Certs, cert.Raw)
	}
	msg, err := signedMessage(r)
	opts := crypto.SignerOpts(crypto.SHA256)
	switch s.PrivateKey.Public().(type) {
	case *ecdsa.PublicKey:
		sum := sha256.Sum256(msg)
		msg = sum[:]
	case ed25519.PublicKey:
		opts = crypto.Hash(0)
	default:
		return fmt.Errorf("SVID key %T: checkpoints are signed with ECDSA or Ed25519", s.PrivateKey.Public())
	}
	if err == nil {
		r.Sig, err = s.PrivateKey.Sign(rand.Reader, msg, opts)
	}
	return err
}
