package gateway

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// pdMetrics are the P/D series, registered with the gateway's others.
type pdMetrics struct {
	decisions *prometheus.CounterVec   // by remote (true|false) and reason
	prefill   *prometheus.HistogramVec // prefill leg latency, by backend and result
}

// legBuckets are prefill leg latency buckets from 1ms to about 65s, doubling.
var legBuckets = prometheus.ExponentialBuckets(1e-3, 2, 17)

func newPDMetrics() pdMetrics {
	return pdMetrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvroute_gateway_pd_decisions_total",
			Help: "P/D decisions by whether the request prefills on a prefill backend (remote true) or on its decode backend (false), and the decider's reason (no-prefill-endpoint: no prefill backend was ready).",
		}, []string{"remote", "reason"}),
		prefill: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "kvroute_gateway_pd_prefill_leg_seconds", Buckets: legBuckets,
			Help: "Two-step prefill legs, from sending to the whole answer read, by prefill backend and result: ok, or error (retried on another prefill backend while the failure rule allows).",
		}, []string{"backend", "result"}),
	}
}

func (m pdMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.decisions, m.prefill}
}

// pdDecision counts one P/D decision.
func (m *metrics) pdDecision(remote bool, reason string) {
	m.pd.decisions.WithLabelValues(strconv.FormatBool(remote), reason).Inc()
}

// pdPrefillLeg records one prefill leg at backend that ended with err after d.
func (m *metrics) pdPrefillLeg(backend string, err error, d time.Duration) {
	result := "ok"
	if err != nil {
		result = "error"
	}
	m.pd.prefill.WithLabelValues(backend, result).Observe(d.Seconds())
}
