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

	"github.com/sharness-ai/sharness/internal/egress"
	"github.com/sharness-ai/sharness/internal/egress/proxy"
)

// forward serves an absolute-URI http:// request: decide, resolve once, check, and send a
// fresh request that can only be dialled to the checked address. A 3xx goes back to the
// caller as it is; the caller's next request is checked on its own (DESIGN.md §6).
func (s *server) forward(c net.Conn, req *http.Request, rec *record) bool {
	if req.URL.Scheme != "http" {
		s.refuse(c, rec, http.StatusBadRequest, egress.Decision{Rule: "scheme-not-supported", Reason: "only http:// URLs are forwarded; use CONNECT for https"})
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
	tooBig := egress.Decision{Rule: "body-too-large", Reason: fmt.Sprintf("the request body is over %d bytes", s.lim.maxBody)}
	if req.ContentLength > s.lim.maxBody {
		s.refuse(c, rec, http.StatusRequestEntityTooLarge, tooBig)
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.lim.dialTimeout)
	addr, ok := s.resolve(ctx, c, host, rec)
	cancel()
	if !ok {
		return false
	}
	hostPort, u := net.JoinHostPort(host.String(), strconv.Itoa(int(port))), *req.URL
	if u.Host = host.String(); explicitPort {
		u.Host = hostPort
	}
	ctx, cancel = context.WithCancel(proxy.WithTarget(context.Background(), hostPort, netip.AddrPortFrom(addr, port)))
	defer cancel()
	resp, err := proxy.Forward(ctx, s.tr, c, req, &u, s.lim.maxBody, s.lim.Idle)
	if _, over := errors.AsType[*http.MaxBytesError](err); over {
		s.refuse(c, rec, http.StatusRequestEntityTooLarge, tooBig)
		return false
	} else if err != nil {
		s.fail(c, rec, s.failKind, err)
		return false
	}
	defer resp.Body.Close()
	keep := !req.Close && req.ContentLength == 0 // a body might be left unread: close
	if rec.in, keep, err = proxy.WriteResponse(c, req, resp, keep, s.lim.Idle); err != nil {
		rec.failure = "upstream"
	}
	return keep && err == nil
}
