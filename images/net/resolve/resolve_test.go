package resolve

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// clock is a fake time the cache reads.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) get() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// fake is a LookupFunc with fixed answers that counts its calls per name.
type fake struct {
	mu      sync.Mutex
	answers map[string][]netip.Addr
	ttl     time.Duration
	err     error
	calls   map[string]int
}

func (f *fake) lookup(_ context.Context, host string) ([]netip.Addr, time.Duration, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[host]++
	if f.err != nil {
		return nil, 0, f.err
	}
	return slices.Clone(f.answers[host]), f.ttl, nil
}

func (f *fake) count(host string) int { f.mu.Lock(); defer f.mu.Unlock(); return f.calls[host] }

var testLimits = Limits{MinTTL: 5 * time.Second, MaxTTL: 5 * time.Minute, FailTTL: 2 * time.Second, MaxNames: 100, MaxLookups: 8, Timeout: time.Second}

func newTestCache(f *fake, lim Limits) (*Cache, *clock) {
	clk := &clock{now: time.Unix(1e9, 0)}
	c := NewCache(f.lookup, lim)
	c.now = clk.get
	return c, clk
}

func addr(s string) netip.Addr { return netip.MustParseAddr(s) }

// kept is how many names c holds: the map Lookup fills and makeRoom bounds.
func kept(c *Cache) int { c.mu.Lock(); defer c.mu.Unlock(); return len(c.names) }

func mustLookup(t *testing.T, c *Cache, host string) []netip.Addr {
	t.Helper()
	got, err := c.Lookup(context.Background(), host)
	if err != nil {
		t.Fatalf("Lookup(%s): %v", host, err)
	}
	return got
}

// TestCacheLifetime: an answer lives for its TTL clamped to [MinTTL, MaxTTL], then is asked
// again; a failure lives for FailTTL only.
func TestCacheLifetime(t *testing.T) {
	for _, tc := range []struct {
		name string
		ttl  time.Duration
		err  error
		life time.Duration
	}{
		{"its ttl", 42 * time.Second, nil, 42 * time.Second},
		{"ttl 0 counts as the minimum", 0, nil, 5 * time.Second},
		{"ttl under the minimum", time.Second, nil, 5 * time.Second},
		{"ttl over the maximum", 24 * time.Hour, nil, 5 * time.Minute},
		{"a failure, briefly", time.Hour, errors.New("servfail"), 2 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fake{answers: map[string][]netip.Addr{"a.test": {addr("192.0.2.1")}}, ttl: tc.ttl, err: tc.err, calls: map[string]int{}}
			c, clk := newTestCache(f, testLimits)
			c.Lookup(context.Background(), "a.test")
			clk.add(tc.life - time.Nanosecond)
			if _, err := c.Lookup(context.Background(), "a.test"); f.count("a.test") != 1 || !errors.Is(err, tc.err) {
				t.Fatalf("within %s: %d lookups, err %v; want 1, %v", tc.life, f.count("a.test"), err, tc.err)
			}
			clk.add(time.Nanosecond)
			c.Lookup(context.Background(), "a.test")
			if f.count("a.test") != 2 {
				t.Fatalf("after %s: %d lookups; want 2", tc.life, f.count("a.test"))
			}
		})
	}
}

// TestCacheAnswerChanges: a new answer is seen once the old one expired (the caller checks
// each, cached or not).
func TestCacheAnswerChanges(t *testing.T) {
	f := &fake{answers: map[string][]netip.Addr{"a.test": {addr("192.0.2.1")}}, ttl: 10 * time.Second, calls: map[string]int{}}
	c, clk := newTestCache(f, testLimits)
	mustLookup(t, c, "a.test")
	f.mu.Lock()
	f.answers["a.test"] = []netip.Addr{addr("10.0.0.1")}
	f.mu.Unlock()
	if got := mustLookup(t, c, "a.test"); !slices.Equal(got, []netip.Addr{addr("192.0.2.1")}) {
		t.Fatalf("within the TTL: %v", got)
	}
	clk.add(10 * time.Second)
	if got := mustLookup(t, c, "a.test"); !slices.Equal(got, []netip.Addr{addr("10.0.0.1")}) {
		t.Fatalf("after the TTL: %v", got)
	}
}

// TestCacheReturnsCopies: a caller that changes its slice does not change the cache.
func TestCacheReturnsCopies(t *testing.T) {
	f := &fake{answers: map[string][]netip.Addr{"a.test": {addr("192.0.2.1")}}, ttl: time.Minute, calls: map[string]int{}}
	c, _ := newTestCache(f, testLimits)
	mustLookup(t, c, "a.test")[0] = addr("10.0.0.1")
	if got := mustLookup(t, c, "a.test"); got[0] != addr("192.0.2.1") {
		t.Fatalf("the cached answer changed: %v", got)
	}
}

// TestCacheBounded: at most MaxNames names; expired names go first.
func TestCacheBounded(t *testing.T) {
	f := &fake{answers: map[string][]netip.Addr{}, ttl: time.Minute, calls: map[string]int{}}
	for i := range 50 {
		f.answers[fmt.Sprintf("n%d.test", i)] = []netip.Addr{addr("192.0.2.1")}
	}
	lim := testLimits
	lim.MaxNames = 3
	c, _ := newTestCache(f, lim)
	for i := range 50 {
		mustLookup(t, c, fmt.Sprintf("n%d.test", i))
		if kept(c) > 3 {
			t.Fatalf("%d names kept; want at most 3", kept(c))
		}
	}

	f.ttl, f.calls = 5*time.Second, map[string]int{}
	c, clk := newTestCache(f, lim)
	mustLookup(t, c, "n0.test") // expires first
	clk.add(time.Second)
	f.ttl = time.Minute
	mustLookup(t, c, "n1.test")
	mustLookup(t, c, "n2.test")
	clk.add(4 * time.Second)
	mustLookup(t, c, "n3.test") // n0 has expired: it makes room
	mustLookup(t, c, "n1.test")
	mustLookup(t, c, "n2.test")
	if f.count("n1.test") != 1 || f.count("n2.test") != 1 || kept(c) != 3 {
		t.Fatalf("live names were evicted before an expired one: n1 %d, n2 %d lookups, %d kept", f.count("n1.test"), f.count("n2.test"), kept(c))
	}
}

// TestCacheOneLookupPerName: concurrent lookups of a name wait for one; a waiter that gives up
// does not end it for the others, and its answer is kept.
func TestCacheOneLookupPerName(t *testing.T) {
	release := make(chan struct{})
	var calls atomic.Int64
	lookup := func(ctx context.Context, host string) ([]netip.Addr, time.Duration, error) {
		calls.Add(1)
		<-release
		return []netip.Addr{addr("192.0.2.1")}, time.Minute, nil
	}
	c := NewCache(lookup, testLimits)
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Lookup(gone, "a.test"); !errors.Is(err, context.Canceled) {
		t.Fatalf("a waiter that gave up: %v", err)
	}
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			if got, err := c.Lookup(context.Background(), "a.test"); err != nil || len(got) != 1 {
				t.Errorf("waiter: %v, %v", got, err)
			}
		})
	}
	time.Sleep(50 * time.Millisecond)
	close(release)
	wg.Wait()
	mustLookup(t, c, "a.test")
	if calls.Load() != 1 {
		t.Fatalf("%d lookups; want 1", calls.Load())
	}
}

// TestCacheFullOfLookups: when every kept name is being looked up, a new name is looked up
// without being kept.
func TestCacheFullOfLookups(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	lookup := func(ctx context.Context, host string) ([]netip.Addr, time.Duration, error) {
		if host == "slow.test" {
			<-release
		}
		return []netip.Addr{addr("192.0.2.1")}, time.Minute, nil
	}
	lim := testLimits
	lim.MaxNames = 1
	c := NewCache(lookup, lim)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	c.Lookup(ctx, "slow.test")
	if got := mustLookup(t, c, "b.test"); len(got) != 1 || kept(c) != 1 {
		t.Fatalf("got %v with %d names kept; want an answer and 1 name", got, kept(c))
	}
}

// TestCacheNoAddress: an empty answer is a failure.
func TestCacheNoAddress(t *testing.T) {
	f := &fake{answers: map[string][]netip.Addr{}, ttl: time.Minute, calls: map[string]int{}}
	c, _ := newTestCache(f, testLimits)
	if got, err := c.Lookup(context.Background(), "empty.test"); err == nil {
		t.Fatalf("an empty answer: %v, no error", got)
	}
}

// TestCacheLookupsBounded: at most MaxLookups lookups are in flight at once, whoever gave up
// on them (each holds sockets, so invented names cannot take every descriptor); a lookup
// waiting for its turn gives up with its Timeout, and a turn freed is taken.
func TestCacheLookupsBounded(t *testing.T) {
	release := make(chan struct{})
	var inFlight, most atomic.Int64
	lookup := func(ctx context.Context, host string) ([]netip.Addr, time.Duration, error) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		if host != "quick.test" {
			<-release
		}
		return []netip.Addr{addr("192.0.2.1")}, time.Minute, nil
	}
	lim := testLimits
	lim.MaxLookups, lim.Timeout = 2, 200*time.Millisecond
	c := NewCache(lookup, lim)
	for i := range 5 { // each waiter gives up at once; the lookups go on without it
		gone, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		c.Lookup(gone, fmt.Sprintf("slow%d.test", i))
		cancel()
	}
	if _, err := c.Lookup(context.Background(), "quick.test"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a lookup past MaxLookups: %v; want it to wait and give up with its Timeout", err)
	}
	if most.Load() != 2 {
		t.Fatalf("%d lookups in flight at once; want MaxLookups, 2", most.Load())
	}
	close(release) // the turns free up; the failed quick.test is remembered for FailTTL: ask another
	if got, err := c.Lookup(context.Background(), "free.test"); err != nil || len(got) != 1 {
		t.Fatalf("a lookup once turns are free: %v, %v", got, err)
	}
}
