// Package resolve is net's name resolution: Go's own resolver (never cgo, which reads 127.1 as
// an address: docs/pitfalls.md), with each name's answer kept for its DNS time to live, clamped,
// so that a proxy that checks every request does not also ask the resolver for every request.
//
// It checks nothing: every address it returns, cached or fresh, must still be checked by the
// caller (egress.Pick) on every use, and the one checked is the one to dial. Caching therefore
// cannot let an unchecked address through; it can only make a name's answer live up to its
// clamped TTL, so a re-pointed name (DNS rebinding) is seen up to that late, and then checked.
//
// What it does not guarantee: fresh answers (a TTL under MinTTL counts as MinTTL), or that the
// TTL it reads is the one the resolver meant (it is read from the DNS answers Go's resolver
// accepts; answers from /etc/hosts, or none it could read, count as MinTTL). The cache is shared
// by every caller of net, so how fast a name answers tells a caller whether another caller (or
// itself) asked for it lately; net decides before it resolves, so only about names the caller
// may reach.
package resolve

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"
)

// Limits bound what the cache keeps and for how long.
type Limits struct {
	MinTTL, MaxTTL time.Duration // an answer is kept for its TTL clamped to these
	FailTTL        time.Duration // a failed lookup is remembered this long (0: not at all)
	MaxNames       int           // names kept at once
	MaxLookups     int           // lookups in flight at once (at least 1), each holding up to two sockets
	Timeout        time.Duration // one lookup, whoever waits for it, its wait for a turn included
}

// DefaultLimits: 5 s at least (Envoy's default minimum refresh; a TTL of 0 would otherwise mean
// a lookup per request), 5 minutes at most (a moved service is found within that), failures
// for 2 s (a flood for a name that does not resolve asks once per 2 s, and a transient failure
// heals quickly), 4096 names (a wildcard rule lets a caller invent names), 32 lookups at once
// (a lookup outlives a caller who gave up on it, so without a bound invented names could take
// every file descriptor net has).
var DefaultLimits = Limits{MinTTL: 5 * time.Second, MaxTTL: 5 * time.Minute, FailTTL: 2 * time.Second,
	MaxNames: 4096, MaxLookups: 32, Timeout: 10 * time.Second}

// LookupFunc resolves host to its addresses and the TTL of the answer (0: unknown).
type LookupFunc func(ctx context.Context, host string) ([]netip.Addr, time.Duration, error)

// Cache resolves names through a LookupFunc and keeps each answer for its TTL. Concurrent
// lookups of one name wait for a single one.
type Cache struct {
	lookup LookupFunc
	lim    Limits
	now    func() time.Time

	turns chan struct{} // one per lookup in flight

	mu    sync.Mutex
	names map[string]*entry
}

// entry is one name's answer; ready is closed once addrs, err and expires are set.
type entry struct {
	ready   chan struct{}
	addrs   []netip.Addr
	err     error
	expires time.Time
}

// New returns a Cache over Go's own resolver, asking server (ip:port) when given, else the
// system's servers (/etc/resolv.conf).
func New(server string, lim Limits) *Cache { return NewCache(goLookup(server), lim) }

// NewCache returns a Cache over lookup.
func NewCache(lookup LookupFunc, lim Limits) *Cache {
	return &Cache{lookup: lookup, lim: lim, now: time.Now, turns: make(chan struct{}, max(lim.MaxLookups, 1)), names: map[string]*entry{}}
}

// Lookup returns host's addresses: the cached answer while it lives, else a fresh one. The
// slice is the caller's. Every address must still be checked before it is dialled.
func (c *Cache) Lookup(ctx context.Context, host string) ([]netip.Addr, error) {
	c.mu.Lock()
	e, ok := c.names[host]
	if !ok || e.done() && !c.now().Before(e.expires) {
		e = &entry{ready: make(chan struct{})}
		if !c.makeRoom() {
			c.mu.Unlock()
			addrs, _, err := c.resolve(ctx, host)
			return addrs, err
		}
		c.names[host] = e
		go c.fill(e, host)
	}
	c.mu.Unlock()
	select {
	case <-e.ready:
		return slices.Clone(e.addrs), e.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// fill looks host up for e, detached from whoever asked first: a caller that gives up does
// not fail the others waiting.
func (c *Cache) fill(e *entry, host string) {
	addrs, ttl, err := c.resolve(context.Background(), host)
	life := min(max(ttl, c.lim.MinTTL), c.lim.MaxTTL)
	if err != nil {
		life = c.lim.FailTTL
	}
	c.mu.Lock()
	e.addrs, e.err, e.expires = addrs, err, c.now().Add(life)
	c.mu.Unlock()
	close(e.ready)
}

func (c *Cache) resolve(ctx context.Context, host string) ([]netip.Addr, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, c.lim.Timeout)
	defer cancel()
	select {
	case c.turns <- struct{}{}:
		defer func() { <-c.turns }()
	case <-ctx.Done():
		return nil, 0, ctx.Err()
	}
	addrs, ttl, err := c.lookup(ctx, host)
	if err == nil && len(addrs) == 0 {
		err = errors.New("no address")
	}
	return addrs, ttl, err
}

// makeRoom makes room for one more name, c.mu held: expired names go first, then any one
// that is not being looked up. It reports false when every name is still being looked up.
func (c *Cache) makeRoom() bool {
	if len(c.names) < c.lim.MaxNames {
		return true
	}
	now := c.now()
	for h, e := range c.names {
		if e.done() && !now.Before(e.expires) {
			delete(c.names, h)
		}
	}
	for h, e := range c.names { // Go's map order is random: no name can be pinned
		if len(c.names) < c.lim.MaxNames {
			break
		}
		if e.done() {
			delete(c.names, h)
		}
	}
	return len(c.names) < c.lim.MaxNames
}

func (e *entry) done() bool {
	select {
	case <-e.ready:
		return true
	default:
		return false
	}
}

// goLookup is Go's resolver with the TTL of the answers it accepted (ttl.go).
func goLookup(server string) LookupFunc {
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, address string) (net.Conn, error) {
		if server != "" {
			address = server
		}
		c, err := (&net.Dialer{}).DialContext(ctx, network, address)
		if seen, ok := ctx.Value(ttlKey{}).(*ttlSeen); ok && err == nil {
			return seen.watch(c), nil
		}
		return c, err
	}}
	return func(ctx context.Context, host string) ([]netip.Addr, time.Duration, error) {
		seen := &ttlSeen{}
		addrs, err := r.LookupNetIP(context.WithValue(ctx, ttlKey{}, seen), "ip", host)
		return addrs, seen.get(), err
	}
}
