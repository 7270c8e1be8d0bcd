package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"

	"github.com/sharness-ai/sharness/images/net/egress"
	"github.com/sharness-ai/sharness/images/net/relay"
)

// forward serves an absolute-URI http:// request: decide, resolve once, check, and send a
// fresh request that can only be dialled to the checked address. A 3xx goes back to the
// caller as it is; the caller's next request is checked on its own (docs/pitfalls.md).
func (s *server) forward(c net.Conn, req *http.Request, rec *record) bool {
	if req.URL.Scheme != "http" {
		s.refuse(c, rec, egress.Deny(egress.RuleScheme, ""))
		return false
	}
	authority, explicitPort := req.URL.Host, true
	if strings.LastIndexByte(authority, ':') <= strings.LastIndexByte(authority, ']') {
		authority, explicitPort = authority+":80", false
	}
	host, port, ok := s.check(c, authority, rec)
	if !ok {
		return false
	}
	if req.ContentLength > s.lim.maxBody {
		return s.tooBig(c, rec)
	}
	addr, ok := s.resolve(context.Background(), c, host, rec) // the lookup bounds its own time
	if !ok {
		return false
	}
	// Direct, the URL names the checked address, so the Transport keeps idle connections per
	// address and a request only reuses one to the address it checked; the Host field names
	// the host. Through an upstream proxy the URL keeps the name, which the upstream resolves.
	field, u, to := host.String(), *req.URL, netip.AddrPortFrom(addr, port)
	if explicitPort {
		field = net.JoinHostPort(field, strconv.Itoa(int(port)))
	}
	if u.Host = to.String(); s.upstream != nil {
		u.Host = field
	}
	resp, err := relay.Forward(relay.WithTarget(context.Background(), to.String(), to), s.tr, c, req, &u, field, s.lim.maxBody, s.lim.Idle)
	if _, over := errors.AsType[*http.MaxBytesError](err); over {
		return s.tooBig(c, rec)
	} else if err != nil {
		s.fail(c, rec, s.failKind, err)
		return false
	}
	defer resp.Body.Close()
	keep := !req.Close && req.ContentLength == 0 // a body might be left unread: close
	if rec.in, keep, err = relay.WriteResponse(c, req, resp, keep, s.lim.Idle); err != nil {
		rec.failure = "upstream"
	}
	return keep && err == nil
}

func (s *server) tooBig(c net.Conn, rec *record) bool {
	s.refuse(c, rec, egress.Deny(egress.RuleBodyTooLarge, fmt.Sprintf("the request body is over %d bytes", s.lim.maxBody)))
	return false
}
