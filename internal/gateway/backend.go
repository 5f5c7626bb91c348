package gateway

import (
	"net/url"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"kvroute/internal/openai"
	"kvroute/router"
)

// backend is one model server. Its mutable fields are guarded by Gateway.mu; the others are
// set at creation.
type backend struct {
	url           string   // the normalized base URL, never shown
	name          string   // the endpoint ID policies know it by; what clients, logs and metrics see
	nameHdr       []string // the X-Kvroute-Endpoint header value: name
	chatURL       *url.URL // where completions go
	complURL      *url.URL
	hostPort      string // host:port of url, for llm-d's x-prefiller-host-port header
	metricsURL    string
	modelsURL     string
	stop          chan struct{} // closed when the backend leaves the pool
	inflightGauge prometheus.Gauge
	healthyGauge  prometheus.Gauge

	// Guarded by Gateway.mu.
	ready        bool
	running      int
	waiting      int
	kvUsage      float64
	numGPUBlocks int
	blockSize    int // KV block size in tokens, 0 when unknown
	updatedAt    time.Time
	models       []string // ids, replaced (never modified) when refetched; nil = unknown
	modelList    []openai.Model
	modelsAt     time.Time
	failures     int       // consecutive failed scrapes
	ejectedAt    time.Time // when the proxy last ejected it
	lastErr      error
	started      bool // its scrape loop is running
	// prefill is its step-time model from the configuration (nil: unknown).
	prefill router.PrefillPredictor
}

func newBackend(spec backendSpec, m *metrics) (*backend, error) {
	chat, err := url.Parse(spec.url + "/v1/chat/completions")
	if err != nil {
		return nil, err
	}
	compl, err := url.Parse(spec.url + "/v1/completions")
	if err != nil {
		return nil, err
	}
	b := &backend{
		url: spec.url, name: spec.name, nameHdr: []string{spec.name}, chatURL: chat, complURL: compl, hostPort: hostPort(chat),
		metricsURL: spec.url + "/metrics", modelsURL: spec.url + "/v1/models",
		stop:          make(chan struct{}),
		ready:         true, // optimistic until the first scrape says otherwise
		inflightGauge: m.inflight.WithLabelValues(spec.name),
		healthyGauge:  m.healthy.WithLabelValues(spec.name),
	}
	b.healthyGauge.Set(1)
	return b, nil
}

// BackendStatus is a backend's state as the gateway sees it, for logs, tests and operators.
type BackendStatus struct {
	// Name is the backend's configured name, the one clients, logs and metrics see.
	Name string
	// URL is the backend's base URL, normalized.
	URL string
	// Ready is false while the backend is ejected.
	Ready bool
	// Models lists the model ids from its /v1/models; nil until fetched.
	Models []string
	// Running, Waiting and KVUsage (0..1) are from the last good scrape, at UpdatedAt.
	Running, Waiting int
	KVUsage          float64
	// NumGPUBlocks is its KV capacity in blocks, 0 when unknown.
	NumGPUBlocks int
	// UpdatedAt is when the last good scrape was read; zero before the first.
	UpdatedAt time.Time
	// InFlight and InFlightTokens are the gateway's own counters of unfinished requests and
	// their prompt plus requested output tokens.
	InFlight, InFlightTokens int
	// Failures counts consecutive failed scrapes; LastError is the last failure, if any.
	Failures  int
	LastError string
}

// status is b's state, with the lifecycle's view e of it for the in-flight counters.
func (b *backend) status(e router.EndpointState) BackendStatus {
	s := BackendStatus{
		Name: b.name, URL: b.url, Ready: b.ready, Models: b.models, Running: b.running, Waiting: b.waiting,
		KVUsage: b.kvUsage, NumGPUBlocks: b.numGPUBlocks, UpdatedAt: b.updatedAt,
		InFlight: e.InFlight, InFlightTokens: e.InFlightTokens, Failures: b.failures,
	}
	if b.lastErr != nil {
		s.LastError = b.lastErr.Error()
	}
	return s
}
