// Package metrics is net's Prometheus metrics: decisions by caller, verdict and rule, bytes
// relayed, tunnels open. It counts what images/net decided; it decides nothing. Labels are
// callers and rule names, both bounded sets; never hosts, which a caller chooses.
package metrics

import (
	"bytes"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/prometheus/common/expfmt"

	"github.com/sharness-ai/sharness/images/net/relay"
)

// Set is net's metrics, served on its mTLS listener only (GET /metrics).
type Set struct {
	reg       *prometheus.Registry
	decisions *prometheus.CounterVec
	bytes     *prometheus.CounterVec
}

// New registers the metrics; tunnels reports the CONNECT tunnels open or opening, conns the
// client connections open (tunnels among them).
func New(tunnels, conns func() int) *Set {
	reg := prometheus.NewRegistry()
	f := promauto.With(reg)
	f.NewGaugeFunc(prometheus.GaugeOpts{Name: "sharness_net_tunnels_open", Help: "CONNECT tunnels open or opening."},
		func() float64 { return float64(tunnels()) })
	f.NewGaugeFunc(prometheus.GaugeOpts{Name: "sharness_net_conns_open", Help: "Client connections open, tunnels among them."},
		func() float64 { return float64(conns()) })
	return &Set{reg: reg,
		decisions: f.NewCounterVec(prometheus.CounterOpts{Name: "sharness_net_decisions_total",
			Help: "Requests decided, by caller, verdict and rule."}, []string{"caller", "allow", "rule"}),
		bytes: f.NewCounterVec(prometheus.CounterOpts{Name: "sharness_net_bytes_total",
			Help: "Bytes relayed: out from callers, in to callers."}, []string{"direction"}),
	}
}

// Observe counts one decided request and the bytes it relayed to (in) and from (out) its caller.
func (m *Set) Observe(caller string, allow bool, rule string, in, out int64) {
	m.decisions.WithLabelValues(caller, strconv.FormatBool(allow), rule).Inc()
	m.bytes.WithLabelValues("out").Add(float64(out))
	m.bytes.WithLabelValues("in").Add(float64(in))
}

// Serve answers GET /metrics in the Prometheus text format, and closes the connection.
func (m *Set) Serve(c net.Conn, timeout time.Duration) {
	var body bytes.Buffer
	families, err := m.reg.Gather()
	for _, f := range families {
		if err == nil {
			err = expfmt.NewEncoder(&body, expfmt.NewFormat(expfmt.TypeTextPlain)).Encode(f)
		}
	}
	if err != nil {
		relay.Reply(c, timeout, http.StatusInternalServerError, "Cache-Control", "no-store", "gathering metrics failed\n")
		return
	}
	relay.Reply(c, timeout, http.StatusOK, "Cache-Control", "no-store", body.String())
}
