package gateway

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the gateway's own Prometheus series, all prefixed kvroute_gateway_.
type metrics struct {
	requests     *prometheus.CounterVec
	decision     prometheus.Histogram
	overhead     prometheus.Histogram
	inflight     *prometheus.GaugeVec
	retries      *prometheus.CounterVec
	healthy      *prometheus.GaugeVec
	scrapeErrors *prometheus.CounterVec
	kvErrors     prometheus.Counter       // registered only with kv_events
	tokenize     *prometheus.HistogramVec // by result: hit, miss, error, too_long, unavailable
	// tokenizerUp is 1 after a backend's /tokenize answered, 0 after it failed.
	tokenizerUp      *prometheus.GaugeVec
	tokenizeFailures *prometheus.CounterVec // by backend and reason
	pd               pdMetrics

	// requestsMu guards requestsByKey, the requests counters already looked up: a map
	// lookup is cheaper than the vector's, which hashes and validates every label.
	requestsMu    sync.RWMutex
	requestsByKey map[requestKey]prometheus.Counter
}

// requestKey is the labels of one requests_total series.
type requestKey struct {
	policy, backend, reason string
	status                  int
}

// request returns the requests_total counter for the labels.
func (m *metrics) request(policy, backend, reason string, status int) prometheus.Counter {
	k := requestKey{policy, backend, reason, status}
	m.requestsMu.RLock()
	c, ok := m.requestsByKey[k]
	m.requestsMu.RUnlock()
	if ok {
		return c
	}
	c = m.requests.WithLabelValues(policy, backend, reason, statusLabel(status))
	m.requestsMu.Lock()
	m.requestsByKey[k] = c
	m.requestsMu.Unlock()
	return c
}

// microBuckets are latency buckets from 1µs to about 1s, doubling.
var microBuckets = prometheus.ExponentialBuckets(1e-6, 2, 21)

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requestsByKey: map[requestKey]prometheus.Counter{}, pd: newPDMetrics(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvroute_gateway_requests_total",
			Help: "Completion requests by policy, final backend, decision reason and status: the HTTP status, or 499 when the client went away, 502/504 when a started stream failed.",
		}, []string{"policy", "backend", "reason", "status"}),
		decision: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "kvroute_gateway_decision_duration_seconds", Buckets: microBuckets,
			Help: "Time to build the snapshot, run the policy and reserve the backend, per attempt.",
		}),
		overhead: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "kvroute_gateway_proxy_overhead_seconds", Buckets: microBuckets,
			Help: "Time from receiving a request to sending it to its first backend: body read, parse, auth and decision.",
		}),
		inflight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kvroute_gateway_inflight_requests",
			Help: "Requests the gateway has sent to each backend that have not finished.",
		}, []string{"backend"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvroute_gateway_retries_total",
			Help: "Requests retried on another backend, by the backend that failed them.",
		}, []string{"backend"}),
		healthy: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kvroute_gateway_backend_healthy",
			Help: "1 when the backend is admitted, 0 when it is ejected.",
		}, []string{"backend"}),
		kvErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kvroute_gateway_kv_errors_total",
			Help: "Problems on the KV event sockets: undecodable messages, failed replays, lost connections.",
		}),
		tokenize: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "kvroute_gateway_tokenize_duration_seconds", Buckets: microBuckets,
			Help: "Time to fill a request's token ids, by result: hit (the cache), miss (a backend's /tokenize); routed without ids: error (the tokenizers asked failed), too_long (over tokenize.max_tokens or max_model_len), unavailable (no ready backend's tokenizer out of its cooldown).",
		}, []string{"result"}),
		tokenizerUp: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kvroute_gateway_tokenizer_up",
			Help: "1 when the backend's /tokenize answered its last call, 0 when it failed and is skipped for tokenize.cooldown; absent until first asked.",
		}, []string{"backend"}),
		tokenizeFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvroute_gateway_tokenize_failures_total",
			Help: "Failed /tokenize calls by backend and reason: timeout, connect, transport, status (not 200), invalid (an answer that does not parse), too_long (more ids than the cap).",
		}, []string{"backend", "reason"}),
		scrapeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvroute_gateway_scrape_errors_total",
			Help: "Failed scrapes of a backend's /metrics.",
		}, []string{"backend"}),
	}
	for _, c := range append([]prometheus.Collector{m.requests, m.decision, m.overhead, m.inflight, m.retries, m.healthy, m.scrapeErrors, m.tokenize, m.tokenizerUp, m.tokenizeFailures}, m.pd.collectors()...) {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// forget drops the per-backend series of a backend that left the pool.
func (m *metrics) forget(id string) {
	m.inflight.DeleteLabelValues(id)
	m.retries.DeleteLabelValues(id)
	m.healthy.DeleteLabelValues(id)
	m.scrapeErrors.DeleteLabelValues(id)
	m.tokenizerUp.DeleteLabelValues(id)
	m.pd.prefill.DeletePartialMatch(prometheus.Labels{"backend": id})
	m.tokenizeFailures.DeletePartialMatch(prometheus.Labels{"backend": id})
	m.requestsMu.Lock()
	for k := range m.requestsByKey {
		if k.backend == id {
			delete(m.requestsByKey, k)
		}
	}
	m.requestsMu.Unlock()
	m.requests.DeletePartialMatch(prometheus.Labels{"backend": id})
}
