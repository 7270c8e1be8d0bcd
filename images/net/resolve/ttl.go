package resolve

import (
	"net"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// Go's resolver does not return TTLs, so goLookup watches the connections it dials to the DNS
// server: each query it writes and each answer it reads. An answer counts only when it is one
// Go accepts too (a response, the query's ID and question; golang.org/issue/13281), so a
// forged packet Go ignores cannot shorten or lengthen what is cached; and whatever is read,
// the cache clamps it (Limits).

type ttlKey struct{}

// ttlSeen is the lowest TTL among the answers of one lookup (A and AAAA, over UDP or TCP).
type ttlSeen struct {
	mu  sync.Mutex
	ttl uint32
	any bool
}

func (s *ttlSeen) note(query, resp []byte) {
	ttl, ok := answerTTL(query, resp)
	if !ok {
		return
	}
	s.mu.Lock()
	if !s.any || ttl < s.ttl {
		s.ttl, s.any = ttl, true
	}
	s.mu.Unlock()
}

// get is the lowest TTL seen, 0 when none was.
func (s *ttlSeen) get() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return time.Duration(s.ttl) * time.Second
}

// watch wraps a connection Go's resolver dialled. A UDP one must stay a net.PacketConn: that
// is how the resolver tells datagrams from a stream with length prefixes.
func (s *ttlSeen) watch(c net.Conn) net.Conn {
	if u, ok := c.(*net.UDPConn); ok {
		return &udpWatch{UDPConn: u, seen: s}
	}
	return &streamWatch{Conn: c, seen: s}
}

// udpWatch sees one query per Write and one message per Read.
type udpWatch struct {
	*net.UDPConn
	seen  *ttlSeen
	query []byte
}

func (w *udpWatch) Write(p []byte) (int, error) {
	w.query = append(w.query[:0], p...)
	return w.UDPConn.Write(p)
}

func (w *udpWatch) Read(p []byte) (int, error) {
	n, err := w.UDPConn.Read(p)
	if n > 0 {
		w.seen.note(w.query, p[:n])
	}
	return n, err
}

// streamWatch sees a query and an answer with two-byte length prefixes (RFC 1035 §4.2.2), the
// answer in as many reads as the resolver makes.
type streamWatch struct {
	net.Conn
	seen        *ttlSeen
	query, resp []byte
}

func (w *streamWatch) Write(p []byte) (int, error) {
	if len(w.query)+len(p) <= 2+65535 {
		w.query = append(w.query, p...)
	}
	return w.Conn.Write(p)
}

func (w *streamWatch) Read(p []byte) (int, error) {
	n, err := w.Conn.Read(p)
	if len(w.resp)+n <= 2+65535 {
		w.resp = append(w.resp, p[:n]...)
	}
	if q, r := w.query, w.resp; len(q) > 2 && len(r) > 2 && len(r) == 2+(int(r[0])<<8|int(r[1])) {
		w.seen.note(q[2:], r[2:])
	}
	return n, err
}

// answerTTL is the lowest TTL in resp when it answers query: that of the answer records (a
// CNAME chain included), or, for an answer with none, the SOA's negative-caching TTL (RFC
// 2308 §5: the lower of the record's TTL and its MINIMUM). It reports false for anything else.
func answerTTL(query, resp []byte) (uint32, bool) {
	var qp, rp dnsmessage.Parser
	qh, err := qp.Start(query)
	if err != nil {
		return 0, false
	}
	q, err := qp.Question()
	if err != nil {
		return 0, false
	}
	rh, err := rp.Start(resp)
	if err != nil || !rh.Response || rh.ID != qh.ID {
		return 0, false
	}
	rq, err := rp.Question()
	if err != nil || rq.Type != q.Type || rq.Class != q.Class || !strings.EqualFold(rq.Name.String(), q.Name.String()) {
		return 0, false
	}
	if rp.SkipAllQuestions() != nil {
		return 0, false
	}
	ttl, any := uint32(0), false
	for {
		h, err := rp.AnswerHeader()
		if err == dnsmessage.ErrSectionDone {
			break
		}
		if err != nil || rp.SkipAnswer() != nil {
			return 0, false
		}
		ttl, any = lower(ttl, any, h.TTL), true
	}
	if any {
		return ttl, true
	}
	for {
		h, err := rp.AuthorityHeader()
		if err != nil {
			return ttl, any
		}
		if h.Type != dnsmessage.TypeSOA {
			if rp.SkipAuthority() != nil {
				return 0, false
			}
			continue
		}
		soa, err := rp.SOAResource()
		if err != nil {
			return 0, false
		}
		ttl, any = lower(lower(ttl, any, h.TTL), true, soa.MinTTL), true
	}
}

func lower(cur uint32, set bool, v uint32) uint32 {
	if !set || v < cur {
		return v
	}
	return cur
}
