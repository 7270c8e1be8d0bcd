package proxy

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"net/url"
)

// ParseUpstream parses the address of an upstream proxy, http://[user:pass@]host:port; ""
// means none.
func ParseUpstream(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if s == "" {
		return nil, nil
	}
	if err != nil || u.Scheme != "http" || u.Port() == "" || u.Hostname() == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
		return nil, errors.New("the upstream proxy must be http://[user:pass@]host:port")
	}
	return u, nil
}

// Lookup returns a resolver function using Go's own resolver (never cgo, which reads 127.1 as
// an address: DESIGN.md §10), asking server (ip:port) when given, else the system's servers.
func Lookup(server string) func(context.Context, string) ([]netip.Addr, error) {
	r := &net.Resolver{PreferGo: true}
	if server != "" {
		r.Dial = func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, server)
		}
	}
	return func(ctx context.Context, host string) ([]netip.Addr, error) { return r.LookupNetIP(ctx, "ip", host) }
}
