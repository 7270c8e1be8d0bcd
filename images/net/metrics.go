package main

import (
	"bytes"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/prometheus/common/expfmt"

	"github.com/sharness-ai/sharness/internal/egress/proxy"
)

// metrics are served on the mTLS listener only (GET /metrics). Labels are callers and rule
// names, both bounded sets; never hosts, which a caller chooses.
type metrics struct {
	reg       *prometheus.Registry
	decisions *prometheus.CounterVec
	bytes     *prometheus.CounterVec
}

func newMetrics(slots chan struct{}) *metrics {
	reg := prometheus.NewRegistry()
	f := promauto.With(reg)
	f.NewGaugeFunc(prometheus.GaugeOpts{Name: "sharness_net_tunnels_open", Help: "CONNECT tunnels open or opening."},
		func() float64 { return float64(len(slots)) })
	return &metrics{reg: reg,
		decisions: f.NewCounterVec(prometheus.CounterOpts{Name: "sharness_net_decisions_total",
			Help: "Requests decided, by caller, verdict and rule."}, []string{"caller", "allow", "rule"}),
		bytes: f.NewCounterVec(prometheus.CounterOpts{Name: "sharness_net_bytes_total",
			Help: "Bytes relayed: out from callers, in to callers."}, []string{"direction"}),
	}
}

func (m *metrics) observe(r *record) {
	m.decisions.WithLabelValues(r.caller, strconv.FormatBool(r.d.Allow), r.d.Rule).Inc()
	m.bytes.WithLabelValues("out").Add(float64(r.out))
	m.bytes.WithLabelValues("in").Add(float64(r.in))
}

// serve answers GET /metrics in the Prometheus text format, and closes the connection.
func (m *metrics) serve(c net.Conn, timeout time.Duration) {
	var body bytes.Buffer
	families, err := m.reg.Gather()
	for _, f := range families {
		if err == nil {
			err = expfmt.NewEncoder(&body, expfmt.NewFormat(expfmt.TypeTextPlain)).Encode(f)
		}
	}
	if err != nil {
		proxy.Reply(c, timeout, http.StatusInternalServerError, "Cache-Control", "no-store", "gathering metrics failed\n")
		return
	}
	proxy.Reply(c, timeout, http.StatusOK, "Cache-Control", "no-store", body.String())
}
