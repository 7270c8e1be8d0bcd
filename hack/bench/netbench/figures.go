package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"
)

// metric is one figure of the report.
type metric struct {
	Key            string `json:"key"`
	Title          string `json:"title"`
	Unit           string `json:"unit"`
	HigherIsBetter bool   `json:"higher_is_better"`
}

var metrics = []metric{
	{"bulk", "bulk throughput through one tunnel (TLS inside)", "MB/s", true},
	{"bulk_raw", "bulk throughput through one tunnel, plain bytes (nothing inside to decrypt: the proxy's own cost shows)", "MB/s", true},
	{"latency_p50", "new connection: CONNECT + TLS + small GET, p50", "µs", false},
	{"latency_p99", "new connection: CONNECT + TLS + small GET, p99", "µs", false},
	{"rps_keepalive", "HTTPS keep-alive, one tunnel per client", "req/s", true},
	{"rps_newconn", "HTTPS, new connection per request", "req/s", true},
	{"rps_plain", "plain HTTP absolute-URI forwarding, keep-alive to the proxy", "req/s", true},
}

// sample is one metric of one peer: a value per round, and how many requests
// succeeded and failed while it was measured.
type sample struct {
	Values     []float64      `json:"values"`
	Rounds     int            `json:"rounds"` // rounds measured: a round whose measurement failed has no value
	Value      float64        `json:"value"`  // the median of Values; for latencies, the percentile of all samples
	OK         int            `json:"ok"`
	Errors     int            `json:"errors"`
	ErrorKinds map[string]int `json:"error_kinds,omitempty"`
	DNSQueries int64          `json:"dns_queries"`        // answered by the bench's DNS server meanwhile
	Upstream   int64          `json:"origin_connections"` // the origin accepted meanwhile
	ProxyCPU   float64        `json:"proxy_cpu_seconds,omitempty"`
	CPUPer     float64        `json:"proxy_cpu_us_per_unit,omitempty"` // per request, or per MB for bulk
	units      float64
}

func (s *sample) fail(err error) {
	s.Errors++
	if s.ErrorKinds == nil {
		s.ErrorKinds = map[string]int{}
	}
	s.ErrorKinds[errorKind(err)]++
}

func (s *sample) add(o *sample) {
	s.OK += o.OK
	for k, n := range o.ErrorKinds {
		if s.ErrorKinds == nil {
			s.ErrorKinds = map[string]int{}
		}
		s.ErrorKinds[k] += n
		s.Errors += n
	}
}

type results map[string]map[string]*sample // metric key → peer name → sample

func (r results) at(key, peer string) *sample {
	if r[key] == nil {
		r[key] = map[string]*sample{}
	}
	if r[key][peer] == nil {
		r[key][peer] = &sample{}
	}
	return r[key][peer]
}

func progress(format string, args ...any) { fmt.Fprintf(os.Stderr, "netbench: "+format+"\n", args...) }

// measure runs every figure for every peer. Figures run one after the other; within a figure
// the peers take turns, round after round, starting with a different peer each round, so a
// drift of the machine, or another process's burst, spreads over all of them.
func measure(ctx context.Context, cfg config, cl *client, peers []*peer) results {
	res := results{}
	for _, p := range peers { // warm-up: code paths, pools, the page cache
		bulk(ctx, cl, p, 16<<20, true)
		bulk(ctx, cl, p, 16<<20, false)
	}
	for _, key := range []string{"bulk", "bulk_raw"} {
		secure, n := key == "bulk", cfg.bulk
		if !secure {
			n = cfg.bulkRaw
		}
		for r := range cfg.roundsOf(key, cfg.bulkRounds) {
			for _, p := range turn(peers, r) {
				s, m := res.at(key, p.name), start(cl, p)
				s.Rounds++
				v, err := bulk(ctx, cl, p, n, secure)
				if err != nil {
					s.fail(err)
				} else {
					s.OK++
					s.Values = append(s.Values, v)
				}
				m.stop(s, float64(n)/1e6)
				progress("%s round %d: %-12s %8.1f MB/s", key, r+1, p.name, last(s.Values))
			}
		}
	}
	lat := map[string][]float64{}
	for r := range cfg.roundsOf("latency", cfg.rounds) {
		for _, p := range turn(peers, r) {
			if ctx.Err() != nil {
				return res
			}
			s, m := res.at("latency_p50", p.name), start(cl, p)
			s.Rounds++
			res.at("latency_p99", p.name).Rounds++
			before := s.OK + s.Errors
			d := latency(ctx, cl, p, cfg.n/cfg.rounds, s)
			m.stop(s, float64(s.OK+s.Errors-before))
			if len(d) > 0 {
				s.Values = append(s.Values, percentile(d, 50))
				res.at("latency_p99", p.name).Values = append(res.at("latency_p99", p.name).Values, percentile(d, 99))
			}
			lat[p.name] = append(lat[p.name], d...)
		}
	}
	for _, p := range peers { // the figure is the percentile of all samples; rounds show the spread
		if !cfg.figures["latency"] {
			break
		}
		p50, p99 := res.at("latency_p50", p.name), res.at("latency_p99", p.name)
		if d := lat[p.name]; len(d) > 0 {
			p50.Value, p99.Value = percentile(d, 50), percentile(d, 99)
		}
		p99.OK, p99.Errors, p99.ErrorKinds, p99.DNSQueries, p99.Upstream, p99.ProxyCPU, p99.CPUPer = p50.OK, p50.Errors, p50.ErrorKinds, p50.DNSQueries, p50.Upstream, p50.ProxyCPU, p50.CPUPer
		progress("latency: %-12s p50 %7.0f µs  p99 %7.0f µs  (%d errors)", p.name, p50.Value, p99.Value, p50.Errors)
	}
	for r := range cfg.rounds {
		for _, key := range []string{"rps_keepalive", "rps_newconn", "rps_plain"} {
			if !cfg.figures[key] {
				continue
			}
			for _, p := range turn(peers, r) {
				if ctx.Err() != nil {
					return res
				}
				m := start(cl, p)
				s := load(ctx, cfg.clients, cfg.dur, func() worker { return newWorker(key, cl, p) })
				all := res.at(key, p.name)
				all.Rounds++
				m.stop(all, float64(s.OK+s.Errors))
				all.Values = append(all.Values, s.Value)
				all.add(s)
				progress("%s round %d: %-12s %8.0f req/s  (%d errors)", key, r+1, p.name, s.Value, s.Errors)
			}
		}
	}
	return res
}

// roundsOf is n, or 0 when figure is not to be measured.
func (cfg config) roundsOf(figure string, n int) int {
	if !cfg.figures[figure] {
		return 0
	}
	return n
}

// meter counts, while one measurement runs, the bench DNS server's answers and the proxy
// process's CPU time: the CPU figure is not disturbed by other work on the machine the way
// rates and latencies are.
type meter struct {
	cl       *client
	p        *peer
	queries  int64
	conns    int64
	cpu      time.Duration
	cpuKnown bool
}

func start(cl *client, p *peer) *meter {
	m := &meter{cl: cl, p: p, queries: cl.w.queries.Load(), conns: cl.w.conns.Load()}
	m.cpu, m.cpuKnown = p.cpu()
	return m
}

// stop adds what was counted to s; units is what the CPU time is per (requests, or MB).
func (m *meter) stop(s *sample, units float64) {
	s.DNSQueries += m.cl.w.queries.Load() - m.queries
	s.Upstream += m.cl.w.conns.Load() - m.conns
	if cpu, ok := m.p.cpu(); ok && m.cpuKnown {
		s.ProxyCPU += (cpu - m.cpu).Seconds()
		s.units += units
		if s.units > 0 {
			s.CPUPer = s.ProxyCPU * 1e6 / s.units
		}
	}
}

// percentile is the nearest-rank q-th percentile of d.
func percentile(d []float64, q int) float64 {
	d = slices.Sorted(slices.Values(d))
	return d[max(0, (len(d)*q+99)/100-1)]
}

// turn is peers rotated by r.
func turn(peers []*peer, r int) []*peer {
	r %= len(peers)
	return append(slices.Clone(peers[r:]), peers[:r]...)
}

func last(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	return v[len(v)-1]
}

// bulk downloads n bytes through one tunnel and returns MB/s (10^6 bytes), timed from the
// request to the body's last byte.
func bulk(ctx context.Context, cl *client, p *peer, n int64, secure bool) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if !secure {
		return cl.rawBulk(ctx, p, n)
	}
	v, err := cl.tunnel(ctx, p)
	if err != nil {
		return 0, err
	}
	defer v.c.Close()
	t0 := time.Now()
	got, _, err := v.get(cl.streamReq(n))
	el := time.Since(t0)
	if err == nil && got != n {
		err = fmt.Errorf("got %d of %d bytes", got, n)
	}
	return float64(got) / el.Seconds() / 1e6, err
}

// latency times n sequential new-connection requests (after 5 untimed ones), counting
// failures in s, and returns the durations of those that succeeded, in µs.
func latency(ctx context.Context, cl *client, p *peer, n int, s *sample) []float64 {
	var d []float64
	for i := -5; i < n && ctx.Err() == nil; i++ {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		t0 := time.Now()
		err := cl.newConnGet(cctx, p)
		el := time.Since(t0)
		cancel()
		switch {
		case i < 0:
		case err != nil:
			s.fail(err)
		default:
			s.OK++
			d = append(d, float64(el.Microseconds()))
		}
	}
	return d
}

// worker is one concurrent client of a requests/s figure.
type worker interface {
	setup(ctx context.Context) error
	op(ctx context.Context) error
	close()
}

func newWorker(key string, cl *client, p *peer) worker {
	switch key {
	case "rps_keepalive":
		return &keepAlive{open: cl.tunnel, p: p, req: cl.smallReq()}
	case "rps_plain":
		return &keepAlive{open: cl.plain, p: p, req: cl.plainReq(p)}
	default:
		return newConn{cl, p}
	}
}

// keepAlive sends every request on one connection, and opens another when it ends.
type keepAlive struct {
	open func(context.Context, *peer) (*conv, error)
	p    *peer
	req  string
	v    *conv
}

func (k *keepAlive) setup(ctx context.Context) (err error) {
	k.v, err = k.open(ctx, k.p)
	return err
}

func (k *keepAlive) op(ctx context.Context) error {
	if k.v == nil {
		if err := k.setup(ctx); err != nil {
			return err
		}
	}
	if dl, ok := ctx.Deadline(); ok {
		k.v.c.SetDeadline(dl)
	}
	_, keep, err := k.v.get(k.req)
	if err != nil || !keep {
		k.close()
	}
	return err
}

func (k *keepAlive) close() {
	if k.v != nil {
		k.v.c.Close()
		k.v = nil
	}
}

// newConn opens a tunnel, handshakes, sends one request and closes, every time.
type newConn struct {
	cl *client
	p  *peer
}

func (n newConn) setup(context.Context) error  { return nil }
func (n newConn) op(ctx context.Context) error { return n.cl.newConnGet(ctx, n.p) }
func (n newConn) close()                       {}

// load runs clients workers: each sets up untimed, then all start together and repeat their
// op for dur. Ops that end within the window count; one that fails is followed by a 1 ms
// pause, so a refusing proxy is not hammered.
func load(ctx context.Context, clients int, dur time.Duration, mk func() worker) *sample {
	ws := make([]worker, clients)
	out := make([]sample, clients)
	setupCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	var wg sync.WaitGroup
	for i := range ws {
		ws[i] = mk()
		wg.Go(func() {
			if err := ws[i].setup(setupCtx); err != nil {
				out[i].fail(err)
			}
		})
	}
	wg.Wait()
	cancel()
	end := time.Now().Add(dur)
	wctx, cancel := context.WithDeadline(ctx, end.Add(2*time.Second))
	defer cancel()
	for i, w := range ws {
		wg.Go(func() {
			defer w.close()
			for time.Now().Before(end) && wctx.Err() == nil {
				err := w.op(wctx)
				switch {
				case time.Now().After(end):
				case err != nil:
					out[i].fail(err)
					time.Sleep(time.Millisecond)
				default:
					out[i].OK++
				}
			}
		})
	}
	wg.Wait()
	s := &sample{}
	for i := range out {
		s.add(&out[i])
	}
	s.Value = float64(s.OK) / dur.Seconds()
	return s
}
