package relay

import (
	"errors"
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
