package gate

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const orderID = "OOOOOOOOOOOOOOOOOOOOOOOOOO"

// testOrder is the order an operator signs at t0 for kms in the table tests.
func testOrder() Order {
	return Order{V: 1, ID: orderID, Component: "kms", Op: "seal_to", Policy: hash('a'), Args: `{"v":1,"all":true}`,
		IssuedAt: t0, NotAfter: t0.Add(DefaultOrderTTL), Nonce: "NNNNNNNNNNNNNNNNNNNNNNNNNN"}
}

func orderToken(t testing.TB, key ed25519.PrivateKey, edit func(*Order)) []byte {
	t.Helper()
	o := testOrder()
	if edit != nil {
		edit(&o)
	}
	b, err := signOrder(o, key)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// signOrderRaw signs payload as it is, canonical or not.
func signOrderRaw(key ed25519.PrivateKey, payload string) []byte {
	env := envelope{Payload: base64.StdEncoding.EncodeToString([]byte(payload)), Key: "k",
		Sig: base64.StdEncoding.EncodeToString(ed25519.Sign(key, append([]byte(orderContext), payload...)))}
	b, _ := json.Marshal(env)
	return b
}

type orderCase struct {
	name  string
	token []byte
	now   time.Time // t0 when zero
	spent []string
	want  Reason // "" for an order to carry out
}

func orderCases(t testing.TB) []orderCase {
	canon, _ := testOrder().canonical()
	good := orderToken(t, operator, nil)
	flipped := bytes.Clone(good)
	if i := bytes.Index(flipped, []byte(`"sig":"`)) + 8; flipped[i] == 'A' {
		flipped[i] = 'B'
	} else {
		flipped[i] = 'A'
	}
	// A decision is signed by the same key, under another context: it is no order, even with
	// the order's claims in it.
	decision := signRaw(operator, string(canon))
	return []orderCase{
		{name: "valid", token: good},
		{name: "within the skew after expiry", token: good, now: t0.Add(DefaultOrderTTL + Skew - time.Second)},
		{name: "forged: bad signature", token: flipped, want: ReasonSignature},
		{name: "forged: another key", token: orderToken(t, intruder, nil), want: ReasonSignature},
		{name: "forged: a decision's signature", token: decision, want: ReasonSignature},
		{name: "wrong id", token: orderToken(t, operator, func(o *Order) { o.ID = "BBBBBBBBBBBBBBBBBBBBBBBBBB" }), want: ReasonMismatch},
		{name: "wrong component", token: orderToken(t, operator, func(o *Order) { o.Component = "fs" }), want: ReasonMismatch},
		{name: "wrong policy", token: orderToken(t, operator, func(o *Order) { o.Policy = hash('b') }), want: ReasonMismatch},
		{name: "expired", token: good, now: t0.Add(DefaultOrderTTL + Skew + time.Second), want: ReasonExpired},
		{name: "not yet valid", token: good, now: t0.Add(-Skew - time.Second), want: ReasonNotYetValid},
		{name: "replay of the id", token: good, spent: []string{orderID}, want: ReasonReplayed},
		{name: "replay of the nonce", token: good, spent: []string{testOrder().Nonce}, want: ReasonReplayed},
		{name: "oversized", token: append(bytes.Clone(good), bytes.Repeat([]byte(" "), MaxOrder)...), want: ReasonInvalid},
		{name: "not json", token: []byte("export everything"), want: ReasonInvalid},
		{name: "empty", token: nil, want: ReasonInvalid},
		{name: "duplicate envelope key", token: []byte(`{"payload":"","payload":"","key":"","sig":""}`), want: ReasonInvalid},
		{name: "unknown envelope field", token: bytes.Replace(good, []byte(`{`), []byte(`{"alg":"none",`), 1), want: ReasonInvalid},
		{name: "signature not base64", token: bytes.Replace(good, []byte(`"sig":"`), []byte(`"sig":"!`), 1), want: ReasonInvalid},
		{name: "unknown claim", token: signOrderRaw(operator, strings.Replace(string(canon), `{`, `{"admin":true,`, 1)), want: ReasonInvalid},
		{name: "claims not canonical", token: signOrderRaw(operator, strings.Replace(string(canon), `,"component"`, `, "component"`, 1)), want: ReasonInvalid},
		{name: "claim missing", token: signOrderRaw(operator, strings.Replace(string(canon), `"v":1`, `"w":1`, 1)), want: ReasonInvalid},
		{name: "claims not json", token: signOrderRaw(operator, "seal_to everything"), want: ReasonInvalid},
		{name: "version 2", token: orderToken(t, operator, func(o *Order) { o.V = 2 }), want: ReasonInvalid},
		{name: "op not a name", token: orderToken(t, operator, func(o *Order) { o.Op = "Seal To" }), want: ReasonInvalid},
		{name: "policy not a hash", token: orderToken(t, operator, func(o *Order) { o.Policy = "any" }), want: ReasonInvalid},
		{name: "no nonce", token: orderToken(t, operator, func(o *Order) { o.Nonce = "" }), want: ReasonInvalid},
		{name: "validity over the cap", token: orderToken(t, operator, func(o *Order) { o.NotAfter = t0.Add(MaxTTL + time.Second) }), want: ReasonInvalid},
		{name: "validity negative", token: orderToken(t, operator, func(o *Order) { o.NotAfter = t0.Add(-time.Second) }), want: ReasonInvalid},
	}
}

func TestCheckOrder(t *testing.T) {
	for _, tc := range orderCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			used := emptySet(t)
			if len(tc.spent) > 0 {
				if err := used.Add(t0.Add(time.Hour), tc.spent...); err != nil {
					t.Fatal(err)
				}
			}
			now := tc.now
			if now.IsZero() {
				now = t0
			}
			o, reason, err := CheckOrder(tc.token, pub(operator), orderID, "kms", hash('a'), now, used)
			if reason != tc.want {
				t.Fatalf("CheckOrder: reason %q (%v), want %q", reason, err, tc.want)
			}
			if (err == nil) != (tc.want == "") {
				t.Errorf("CheckOrder: error %v with reason %q", err, reason)
			}
			if tc.want == "" && (o.ID != orderID || o.Args != testOrder().Args) {
				t.Errorf("CheckOrder returned %+v", o)
			}
		})
	}
}

// host plays the operator against g's folder: it places an order, and waits for the result.
func placeAndWait(t *testing.T, dir string, key ed25519.PrivateKey, edit func(*Order)) (Order, Result) {
	t.Helper()
	o := Order{Component: "kms", Op: "seal_to", Policy: hash('a'), Args: `{"v":1}`}
	if edit != nil {
		edit(&o)
	}
	o, err := PlaceOrder(dir, o, key, 0)
	if err != nil {
		t.Fatal(err)
	}
	return o, waitResult(t, dir, o.ID)
}

func waitResult(t *testing.T, dir, id string) Result {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		r, err := ReadResult(dir, id)
		if err == nil {
			return r
		}
		if !errors.Is(err, fs.ErrNotExist) || time.Now().After(deadline) {
			t.Fatalf("ReadResult(%s): %v", id, err)
		}
	}
}

// served runs g's order loop; what execute got and what was recorded are returned.
type served struct {
	mu       sync.Mutex
	executed []Order
	recorded []Result
}

func serveOrders(t *testing.T, g *Gate, answer func(Order) (string, string, string)) *served {
	t.Helper()
	s := &served{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- g.ServeOrders(ctx, func(_ context.Context, o Order) (string, string, string) {
			s.mu.Lock()
			s.executed = append(s.executed, o)
			s.mu.Unlock()
			return answer(o)
		}, func(r Result) {
			s.mu.Lock()
			s.recorded = append(s.recorded, r)
			s.mu.Unlock()
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(g.cfg.Dir, "results")); err == nil {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatal("ServeOrders made no results folder")
		}
	}
}

func (s *served) counts() (int, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.executed), len(s.recorded)
}

func openOrderGate(t *testing.T, dir string) *Gate {
	t.Helper()
	g, err := Open(Config{Dir: dir, Component: "kms", Policy: hash('a'), Operator: pub(operator), Poll: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestOrderRoundTrip: an order placed by the host is carried out once, answered, recorded and
// removed; the same order file put back is refused as replayed, by the same process and by a
// restarted one; a forged one is refused without being carried out; a refusal of the
// component's own is passed on.
func TestOrderRoundTrip(t *testing.T) {
	dir := t.TempDir()
	g := openOrderGate(t, dir)
	s := serveOrders(t, g, func(o Order) (string, string, string) {
		if o.Args == `{"v":1,"name":"nope"}` {
			return "", "unknown_secret", "no sealed secret nope"
		}
		return `{"v":1,"ok":true}`, "", ""
	})

	o, r := placeAndWait(t, dir, operator, nil)
	if !r.Done() || r.Output != `{"v":1,"ok":true}` || r.Op != "seal_to" || r.Component != "kms" {
		t.Fatalf("result %+v, want done with the output", r)
	}
	if _, err := os.Stat(filepath.Join(dir, orderFile(o.ID))); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the order file is still there after its result: %v", err)
	}
	token, _ := signOrder(o, operator) // the same order, byte for byte (ed25519 is deterministic)
	if err := Withdraw(dir, o.ID); err != nil {
		t.Fatal(err)
	}

	replay := func(t *testing.T) {
		t.Helper()
		tmp := filepath.Join(dir, "orders", ".replay")
		if err := os.WriteFile(tmp, token, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, orderFile(o.ID))); err != nil { // all at once, as the host writes
			t.Fatal(err)
		}
		if r := waitResult(t, dir, o.ID); r.Reason != string(ReasonReplayed) || r.Output != "" {
			t.Errorf("replayed order: %+v, want %s", r, ReasonReplayed)
		}
		Withdraw(dir, o.ID)
	}
	t.Run("replayed", replay)
	t.Run("replayed after a restart", func(t *testing.T) {
		g2 := openOrderGate(t, dir) // reloads the spent record from disk
		serveOrders(t, g2, func(Order) (string, string, string) { return "{}", "", "" })
		replay(t)
	})
	t.Run("forged", func(t *testing.T) {
		_, r := placeAndWait(t, dir, intruder, nil)
		if r.Reason != string(ReasonSignature) || !strings.Contains(r.Message, "signature") {
			t.Errorf("forged order: %+v", r)
		}
	})
	t.Run("other policy", func(t *testing.T) {
		_, r := placeAndWait(t, dir, operator, func(o *Order) { o.Policy = hash('b') })
		if r.Reason != string(ReasonMismatch) {
			t.Errorf("order under another policy: %+v", r)
		}
	})
	t.Run("refused by the component", func(t *testing.T) {
		_, r := placeAndWait(t, dir, operator, func(o *Order) { o.Args = `{"v":1,"name":"nope"}` })
		if r.Reason != "unknown_secret" || r.Message != "no sealed secret nope" || r.Output != "" {
			t.Errorf("refused order: %+v", r)
		}
	})
	executed, recorded := s.counts() // every result is recorded before it is written
	if executed != 2 {
		t.Errorf("the first server carried out %d orders, want 2 (the valid one and the refused one)", executed)
	}
	if recorded < 5 {
		t.Errorf("the first server recorded %d results, want every one", recorded)
	}
}

// TestProcessOrdersOddFiles: a file that is not <id>.json is removed unanswered, the host's
// temporary files are left alone, and a FIFO or a malformed file is answered approval_invalid
// without hanging.
func TestProcessOrdersOddFiles(t *testing.T) {
	dir := t.TempDir()
	g := openOrderGate(t, dir)
	for _, d := range []string{"orders", "results"} {
		os.Mkdir(filepath.Join(dir, d), 0o755)
	}
	fifo := "FFFFFFFFFFFFFFFFFFFFFFFFFF"
	if err := syscall.Mkfifo(filepath.Join(dir, orderFile(fifo)), 0o644); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "orders", "notes.txt"), []byte("x"), 0o644)
	os.WriteFile(filepath.Join(dir, "orders", ".tmp-of-the-host"), []byte("x"), 0o644)
	os.WriteFile(filepath.Join(dir, orderFile(orderID)), []byte("{}"), 0o644)
	var results []Result
	err := g.ProcessOrders(context.Background(), func(context.Context, Order) (string, string, string) {
		t.Error("an odd file was carried out")
		return "", "", ""
	}, func(r Result) { results = append(results, r) })
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 2 || results[0].Reason != string(ReasonInvalid) || results[1].Reason != string(ReasonInvalid) {
		t.Errorf("results %+v, want two approval_invalid", results)
	}
	left, _ := os.ReadDir(filepath.Join(dir, "orders"))
	if len(left) != 1 || left[0].Name() != ".tmp-of-the-host" {
		t.Errorf("left in orders: %v, want only the host's temporary file", left)
	}
}

func TestPlaceOrderRefuses(t *testing.T) {
	dir := t.TempDir()
	good := Order{Component: "kms", Op: "seal_to", Policy: hash('a')}
	if _, err := PlaceOrder(dir, good, operator, 0); err == nil || !strings.Contains(err.Error(), "no orders folder") {
		t.Errorf("PlaceOrder without the component's orders folder: %v", err)
	}
	os.Mkdir(filepath.Join(dir, "orders"), 0o755)
	for _, tc := range []struct {
		name string
		o    Order
		key  ed25519.PrivateKey
		ttl  time.Duration
	}{
		{"bad component", Order{Component: "KMS", Op: "seal_to", Policy: hash('a')}, operator, 0},
		{"bad policy", Order{Component: "kms", Op: "seal_to", Policy: "x"}, operator, 0},
		{"ttl over the cap", good, operator, MaxTTL + time.Second},
		{"no key", good, nil, 0},
		{"args too large", Order{Component: "kms", Op: "seal_to", Policy: hash('a'), Args: strings.Repeat("a", MaxOrder)}, operator, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := PlaceOrder(dir, tc.o, tc.key, tc.ttl); err == nil {
				t.Error("PlaceOrder accepted it")
			}
		})
	}
	if _, err := ReadResult(dir, "../x"); err == nil {
		t.Error("ReadResult took a path for an id")
	}
}

// FuzzCheckOrder: no input panics, and what is accepted was signed by the operator for this
// order, component and policy.
func FuzzCheckOrder(f *testing.F) {
	for _, tc := range orderCases(f) {
		f.Add(tc.token)
	}
	used := emptySet(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		o, _, err := CheckOrder(data, pub(operator), orderID, "kms", hash('a'), t0, used)
		if err != nil {
			return
		}
		payload, _, serr := openSigned(data, pub(operator), orderContext, MaxOrder)
		canon, _ := o.canonical()
		if serr != nil || !bytes.Equal(payload, canon) || o.ID != orderID || o.Component != "kms" || o.Policy != hash('a') {
			t.Fatalf("accepted %q as %+v (%v)", data, o, serr)
		}
	})
}

// FuzzParseOrder: what the claims parser accepts is exactly the canonical encoding of what it
// returns.
func FuzzParseOrder(f *testing.F) {
	for _, tc := range orderCases(f) {
		var env envelope
		if json.Unmarshal(tc.token, &env) == nil {
			p, _ := base64.StdEncoding.DecodeString(env.Payload)
			f.Add(p)
		}
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		o, err := parseOrder(payload)
		if err != nil {
			return
		}
		if canon, err := o.canonical(); err != nil || !bytes.Equal(canon, payload) {
			t.Fatalf("accepted %q, which encodes as %q", payload, canon)
		}
	})
}
