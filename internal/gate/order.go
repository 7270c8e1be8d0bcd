package gate

// Orders run the gate the other way round: the operator asks a component for something, and
// the component decides nothing but whether the order is genuine. The host writes a signed order
// to <dir>/orders/<id>.json (PlaceOrder); the component polls that folder (ServeOrders), checks
// each order (CheckOrder: signed by the pinned operator key, for this component and this policy,
// within its validity, never used), spends it in the same record of spent approvals as
// decisions, carries it out and answers in <dir>/results/<id>.json, which the host reads
// (ReadResult). Like decisions, orders need no endpoint: the folder is the component's own
// volume. The first user is `sharness-ai export`, which orders kms to re-seal secrets to a
// person's recipient key (docs/exit.md).
//
// What it does not guarantee: that the result is genuine. A result is written by the component
// into its own folder and is not signed; the host treats it as the component's word (for kms,
// sealed files, which the recipient's key authenticates when it opens them).

import (
	"bytes"
	"cmp"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/gowebpki/jcs"

	"github.com/sharness-ai/sharness/internal/strictjson"
	"github.com/sharness-ai/sharness/policies/keys"
)

// Limits of orders.
const (
	MaxOrder        = 64 << 10         // bytes of an order file: its args hold a bundle and names
	MaxResult       = 8 << 20          // bytes of a result file: up to a few hundred sealed files
	DefaultOrderTTL = 10 * time.Minute // how long an order stays valid when the host gives no ttl
)

// ResultDone is the reason of an order carried out.
const ResultDone = "done"

// orderContext separates order signatures from decisions and every other use of the key.
const orderContext = "sharness-ai gate order v1\x00"

// Order is what the operator signs: one op for one component under one policy, once, within
// [IssuedAt, NotAfter]. Args are the op's arguments, the component's own JSON; public material
// only (an order file is readable by the component and the host).
type Order struct {
	V         int       `json:"v"`
	ID        string    `json:"id"` // names the files; spent with Nonce
	Component string    `json:"component"`
	Op        string    `json:"op"`
	Policy    string    `json:"policy"`
	Args      string    `json:"args"`
	IssuedAt  time.Time `json:"issued_at"`
	NotAfter  time.Time `json:"not_after"`
	Nonce     string    `json:"nonce"`
}

// Result is a component's answer to an order, as it writes it to <dir>/results/<id>.json.
type Result struct {
	V         int    `json:"v"`
	ID        string `json:"id"`
	Component string `json:"component"`
	Op        string `json:"op"`                // "" when the order could not be read
	Reason    string `json:"reason"`            // ResultDone, or why not: a gate Reason or the component's own
	Message   string `json:"message,omitempty"` // what went wrong, for the person; never secret material
	Output    string `json:"output,omitempty"`  // a done order's output, the component's JSON; public material only
}

// Done reports whether the order was carried out.
func (r Result) Done() bool { return r.Reason == ResultDone }

func orderFile(id string) string  { return "orders/" + id + ".json" }
func resultFile(id string) string { return "results/" + id + ".json" }

func (o Order) canonical() ([]byte, error) {
	b, err := json.Marshal(o)
	if err != nil {
		return nil, err
	}
	return jcs.Transform(b)
}

// PlaceOrder signs an order for o.Component to do o.Op with o.Args under o.Policy, valid for
// ttl (0 is DefaultOrderTTL, at most MaxTTL), and writes it to <dir>/orders/<id>.json. It fills
// in V, ID, IssuedAt, NotAfter and Nonce, and returns the order as written. The orders folder is
// the component's (ServeOrders makes it): an order for a component that does not serve them is
// refused here rather than left for nobody.
func PlaceOrder(dir string, o Order, key ed25519.PrivateKey, ttl time.Duration) (Order, error) {
	ttl = orDefault(ttl, DefaultOrderTTL)
	switch {
	case !namePattern.MatchString(o.Component) || !namePattern.MatchString(o.Op):
		return Order{}, fmt.Errorf("order: component %q or op %q is not a lower-case name", o.Component, o.Op)
	case !digestPattern.MatchString(o.Policy):
		return Order{}, fmt.Errorf("order: policy %q is not sha256:<hex>", o.Policy)
	case ttl > MaxTTL:
		return Order{}, fmt.Errorf("order: an order may last at most %s, not %s", MaxTTL, ttl)
	case len(key) != ed25519.PrivateKeySize:
		return Order{}, errors.New("order: no operator key")
	}
	now := time.Now().UTC().Truncate(time.Second)
	o.V, o.ID, o.IssuedAt, o.NotAfter, o.Nonce = 1, rand.Text(), now, now.Add(ttl), rand.Text()
	token, err := signOrder(o, key)
	if err != nil {
		return Order{}, err
	}
	if len(token) > MaxOrder {
		return Order{}, fmt.Errorf("order: %d bytes, more than %d", len(token), MaxOrder)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return Order{}, fmt.Errorf("open gate directory: %w", err)
	}
	defer root.Close()
	if st, err := root.Stat("orders"); err != nil || !st.IsDir() {
		return Order{}, fmt.Errorf("%s has no orders folder: the component does not take orders (is it running, with its operator key?)", dir)
	}
	if err := writeFile(root, orderFile(o.ID), token, 0o644, true); err != nil {
		return Order{}, fmt.Errorf("write order: %w", err)
	}
	return o, nil
}

func signOrder(o Order, key ed25519.PrivateKey) ([]byte, error) {
	payload, err := o.canonical()
	if err != nil {
		return nil, fmt.Errorf("encode order: %w", err)
	}
	env := envelope{
		Payload: base64.StdEncoding.EncodeToString(payload),
		Key:     keys.ID(key.Public().(ed25519.PublicKey)),
		Sig:     base64.StdEncoding.EncodeToString(ed25519.Sign(key, append([]byte(orderContext), payload...))),
	}
	data, err := json.Marshal(env)
	return append(data, '\n'), err
}

// ReadResult reads the component's answer to order id from dir; an error wrapping
// fs.ErrNotExist means there is none yet.
func ReadResult(dir, id string) (Result, error) {
	if !idPattern.MatchString(id) {
		return Result{}, fmt.Errorf("%q is not an order id", id)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return Result{}, fmt.Errorf("open gate directory: %w", err)
	}
	defer root.Close()
	data, err := readFile(root, resultFile(id), MaxResult)
	if err != nil {
		return Result{}, err
	}
	var r Result
	if err := strictjson.Decode(data, 1, &r); err != nil {
		return Result{}, fmt.Errorf("result %s: %w", id, err)
	}
	if r.V != 1 || r.ID != id || r.Reason == "" {
		return Result{}, fmt.Errorf("result %s: not version 1, not for this order, or without a reason", id)
	}
	return r, nil
}

// Withdraw removes order id and its result from dir: the host is done with them (or gave up
// waiting, so that the component does not carry the order out later). Missing files are fine.
func Withdraw(dir, id string) error {
	if !idPattern.MatchString(id) {
		return fmt.Errorf("%q is not an order id", id)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("open gate directory: %w", err)
	}
	defer root.Close()
	var errs []error
	for _, f := range []string{orderFile(id), resultFile(id)} {
		if err := root.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// CheckOrder decides whether token, the file <id>.json of the orders folder, is an order the
// component may carry out: signed by pub, naming id, component and policy, within its validity
// (±Skew), and neither its id nor its nonce spent according to used. It records nothing: the
// caller spends the order (ServeOrders does). Every refusal has its Reason and an error naming
// its cause.
func CheckOrder(token []byte, pub ed25519.PublicKey, id, component, policy string, now time.Time, used *Set) (Order, Reason, error) {
	payload, reason, err := openSigned(token, pub, orderContext, MaxOrder)
	if err != nil {
		return Order{}, reason, fmt.Errorf("order: %w", err)
	}
	o, err := parseOrder(payload)
	if err != nil {
		return Order{}, ReasonInvalid, err
	}
	for _, f := range [][3]string{{"id", o.ID, id}, {"component", o.Component, component}, {"policy", o.Policy, policy}} {
		if f[1] != f[2] {
			return o, ReasonMismatch, fmt.Errorf("order is for %s %q, here it is %q", f[0], f[1], f[2])
		}
	}
	switch {
	case now.Add(Skew).Before(o.IssuedAt):
		return o, ReasonNotYetValid, fmt.Errorf("order issued at %s, in the future", o.IssuedAt.Format(time.RFC3339))
	case now.Add(-Skew).After(o.NotAfter):
		return o, ReasonExpired, fmt.Errorf("order expired at %s", o.NotAfter.Format(time.RFC3339))
	case used == nil:
		return o, ReasonUnavailable, errors.New("no record of spent orders to check against")
	case used.Has(o.ID) || used.Has(o.Nonce):
		return o, ReasonReplayed, fmt.Errorf("order %s was carried out already", o.ID)
	}
	return o, "", nil
}

// openSigned reads an envelope and returns its payload once the signature under context holds.
func openSigned(token []byte, pub ed25519.PublicKey, context string, max int) ([]byte, Reason, error) {
	if len(token) > max {
		return nil, ReasonInvalid, fmt.Errorf("more than %d bytes", max)
	}
	var env envelope
	if err := strictjson.Decode(token, 1, &env); err != nil {
		return nil, ReasonInvalid, err
	}
	payload, perr := base64.StdEncoding.Strict().DecodeString(env.Payload)
	sig, serr := base64.StdEncoding.Strict().DecodeString(env.Sig)
	switch {
	case perr != nil || serr != nil || len(sig) != ed25519.SignatureSize:
		return nil, ReasonInvalid, errors.New("payload or signature is not standard base64 of the right size")
	case len(pub) != ed25519.PublicKeySize:
		return nil, ReasonSignature, fmt.Errorf("operator key: %d bytes, not an Ed25519 public key", len(pub))
	case !ed25519.Verify(pub, append([]byte(context), payload...), sig):
		return nil, ReasonSignature, fmt.Errorf("signature does not verify with the operator key %s (it names %.80q)", keys.ID(pub), env.Key)
	}
	return payload, "", nil
}

// parseOrder reads signed claims, which must be exactly the canonical encoding of what they
// decode to, as decisions must.
func parseOrder(payload []byte) (Order, error) {
	var o Order
	if err := strictjson.Decode(payload, 1, &o); err != nil {
		return Order{}, fmt.Errorf("order claims: %w", err)
	}
	canon, err := o.canonical()
	switch {
	case err != nil || !bytes.Equal(canon, payload):
		return Order{}, errors.New("order claims: not in canonical form or missing a field")
	case o.V != 1:
		return Order{}, fmt.Errorf("order claims: unknown version %d", o.V)
	case !idPattern.MatchString(o.ID) || !idPattern.MatchString(o.Nonce):
		return Order{}, errors.New("order claims: malformed id or nonce")
	case !namePattern.MatchString(o.Component) || !namePattern.MatchString(o.Op):
		return Order{}, errors.New("order claims: component or op is not a lower-case name")
	case !digestPattern.MatchString(o.Policy):
		return Order{}, errors.New("order claims: policy is not sha256:<hex>")
	case !o.NotAfter.After(o.IssuedAt) || o.NotAfter.Sub(o.IssuedAt) > MaxTTL:
		return Order{}, fmt.Errorf("order claims: validity must be positive and at most %s", MaxTTL)
	}
	return o, nil
}

// Execute carries out an order that passed CheckOrder and was spent. It returns the output
// (public material only), or the reason and a message for the person when it refuses.
type Execute func(ctx context.Context, o Order) (output string, reason, message string)

// ServeOrders makes the orders and results folders and handles the orders that arrive until ctx
// ends, looking every Poll. record, if not nil, is told each result just before it is written,
// to audit it: whoever reads a result finds the order in the component's record.
//
// A nil Gate (no operator key or no gate folder: Settings.Open) serves no orders and returns.
func (g *Gate) ServeOrders(ctx context.Context, execute Execute, record func(Result)) error {
	if g == nil {
		return nil
	}
	for _, d := range []string{"orders", "results"} {
		if err := g.root.Mkdir(d, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("gate: %w", err)
		}
	}
	tick := time.NewTicker(g.cfg.Poll)
	defer tick.Stop()
	for {
		if err := g.ProcessOrders(ctx, execute, record); err != nil {
			g.cfg.Log.Error("gate: orders", "error", err.Error())
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// ProcessOrders handles the orders waiting in the orders folder now, one at a time. A file
// whose name is not <id>.json cannot be answered and is removed; the host's temporary files
// (".…") are left alone.
func (g *Gate) ProcessOrders(ctx context.Context, execute Execute, record func(Result)) error {
	entries, err := fs.ReadDir(g.root.FS(), "orders")
	if err != nil {
		return fmt.Errorf("list orders: %w", err)
	}
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") {
			continue
		}
		id, ok := strings.CutSuffix(name, ".json")
		if !ok || !idPattern.MatchString(id) {
			g.root.Remove("orders/" + name)
			g.cfg.Log.Warn("gate: removed a file that is no order", "file", name)
			continue
		}
		r, ok := g.order(ctx, id, execute)
		if !ok {
			continue // withdrawn by the host before it was read
		}
		g.cfg.Log.Info("gate order", "component", g.cfg.Component, "order", id, "op", r.Op, "reason", r.Reason)
		if record != nil {
			record(r) // before the answer: the host reads the record after it
		}
		if err := writeFile(g.root, resultFile(id), resultBytes(r), 0o644, true); err != nil {
			// A result is there already (a replayed order's first answer): keep the first.
			g.cfg.Log.Warn("gate: result not written", "order", id, "error", err.Error())
		}
	}
	return nil
}

// order checks, spends, removes and carries out order id; false if it is gone.
func (g *Gate) order(ctx context.Context, id string, execute Execute) (Result, bool) {
	r := Result{V: 1, ID: id, Component: g.cfg.Component}
	token, err := readFile(g.root, orderFile(id), MaxOrder)
	if errors.Is(err, fs.ErrNotExist) {
		return r, false
	}
	g.root.Remove(orderFile(id)) // read or not, it is answered once
	var o Order
	reason := ReasonInvalid
	if err == nil {
		o, reason, err = CheckOrder(token, g.cfg.Operator, id, g.cfg.Component, g.cfg.Policy, time.Now(), g.used)
		r.Op = o.Op
	}
	if err == nil {
		if err = g.used.Add(o.NotAfter, o.ID, o.Nonce); errors.Is(err, errReplayed) {
			reason = ReasonReplayed
		} else if err != nil {
			reason = ReasonUnavailable
		}
	}
	if err != nil {
		r.Reason, r.Message = string(reason), clip(err.Error())
		return r, true
	}
	out, why, msg := execute(ctx, o)
	r.Reason, r.Message = cmp.Or(why, ResultDone), clip(msg)
	if r.Done() {
		r.Output = out
	}
	return r, true
}

func resultBytes(r Result) []byte {
	data, _ := json.Marshal(r) // strings and an int cannot fail
	return append(data, '\n')
}

// clip keeps a message to one printable line of at most 1000 runes.
func clip(s string) string {
	s = strings.Map(func(r rune) rune {
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			return '?'
		}
		return r
	}, s)
	if utf8.RuneCountInString(s) > 1000 {
		s = string([]rune(s)[:999]) + "…"
	}
	return s
}
