package main

import (
	"fmt"
	"strconv"
	"sync"

	"github.com/sharness-ai/sharness/images/net/relay"
)

// caps bounds the client connections net holds open, per caller and in all, so that one caller
// cannot take every connection (and with them every file descriptor) net has for the others'
// egress (issue 20). A connection counts from the moment it is accepted until it is closed,
// whatever it carries: net cannot tell a plain request from a CONNECT before it has read one,
// and a connection that has sent nothing yet holds a descriptor all the same. A tunnel also
// needs one of the tunnel slots, so tunnels are a part of the connections.
type caps struct {
	all, per int
	mu       sync.Mutex
	n        int
	open     map[string]int // by caller; "" is every connection not named yet
}

func newCaps(all, per int) *caps { return &caps{all: all, per: per, open: map[string]int{}} }

// take holds one connection for caller. It returns why not, or "" once the connection is held.
func (c *caps) take(caller string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if why := c.full(caller); why != "" {
		return why
	}
	c.n++
	c.open[caller]++
	return ""
}

// rename moves a held connection from one caller to another (an mTLS connection is named
// after its handshake), if the other is under its own cap; the total does not change. It
// returns why not, or "" once the connection is the other's.
func (c *caps) rename(from, to string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if from == to {
		return ""
	}
	if c.open[to] >= c.per {
		return c.perText()
	}
	c.drop(from)
	c.open[to]++
	return ""
}

// give releases a connection take or rename held for caller.
func (c *caps) give(caller string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n--
	c.drop(caller)
}

// held is the number of connections held: the gauge sharness_net_conns_open.
func (c *caps) held() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

func (c *caps) full(caller string) string {
	switch {
	case c.open[caller] >= c.per:
		return c.perText()
	case c.n >= c.all:
		return fmt.Sprintf("net holds its maximum of %d open connections; retry later", c.all)
	}
	return ""
}

func (c *caps) perText() string {
	return fmt.Sprintf("the caller holds its maximum of %d open connections; retry later", c.per)
}

// drop forgets one of caller's connections, c.mu held; a caller with none leaves the map, which
// therefore holds only callers with open connections.
func (c *caps) drop(caller string) {
	if c.open[caller]--; c.open[caller] <= 0 {
		delete(c.open, caller)
	}
}

// fixedFiles are the descriptors net holds whatever its callers do: the standard streams, both
// listeners, the poller, the audit log, the Workload API's connection, the gate's files and
// what the resolver reads (/etc/hosts, /etc/resolv.conf), with room to spare.
const fixedFiles = 32

// files is the most file descriptors net holds at once under l: two per connection (the
// caller's, and one upstream: a tunnel's, or a plain request's while it is forwarded), a
// tunnel's two pipes (relay.PipeFiles: its bytes move by splice(2)), the plain upstream
// connections kept idle, two per DNS lookup in flight (A and AAAA are asked at once), the
// refusals being answered, and fixedFiles.
func (l limits) files() int {
	return 2*l.conns + relay.PipeFiles*min(l.tunnels, l.conns) + l.idlePool + 2*l.dns.MaxLookups + l.refusing + fixedFiles
}

// setConns sets the caps from -conns and -conns-per-caller; "" keeps a default.
func (l *limits) setConns(all, per string) error {
	for _, f := range []struct {
		name, v string
		n       *int
	}{{"conns", all, &l.conns}, {"conns-per-caller", per, &l.connsPerCaller}} {
		if f.v == "" {
			continue
		}
		n, err := strconv.Atoi(f.v)
		if err != nil {
			return fmt.Errorf("%s: %q is not a number", f.name, f.v)
		}
		*f.n = n
	}
	return nil
}

// fit checks that the caps make sense and that what they let net hold fits its file limit
// (RLIMIT_NOFILE, set by the compiled spec: policies/compile). Over the limit net would fail to
// accept or to dial at random, whoever asked; it refuses to start instead (fail closed).
func (l limits) fit(nofile uint64) error {
	switch {
	case l.conns < 1 || l.connsPerCaller < 1 || l.connsPerCaller > l.conns:
		return fmt.Errorf("open connections: %d in all and %d per caller: each must be at least 1, and per caller at most in all", l.conns, l.connsPerCaller)
	case uint64(l.files()) > nofile:
		return fmt.Errorf("open connections: %d connections let net hold up to %d file descriptors, over its file limit (RLIMIT_NOFILE) of %d: lower -conns, or raise the limit in the compiled spec", l.conns, l.files(), nofile)
	}
	return nil
}
