package gateway

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"kvroute/internal/kvevents"
	"kvroute/router"
)

// Options are a Gateway's collaborators. A nil field means a sensible default.
type Options struct {
	// Metrics is the registry the gateway registers its metrics on and serves at /metrics;
	// nil means a new, private registry.
	Metrics *prometheus.Registry
	// Policies is the registry policies are built from; nil means router.Builtin().
	Policies *router.Registry
	// Transport carries completions to the backends, scrapes and model-list fetches; nil
	// means NewTransport(). The failure rule classifies its errors (retry.go): a dial
	// error is a connect failure, any other before a response head a reset.
	Transport http.RoundTripper
	// OnHealth, when set, is called after a backend is ejected (ready false, with the error
	// that ejected it) or re-admitted (ready true), with the backend's name and URL. It must
	// not block.
	OnHealth func(name, url string, ready bool, err error)
	// OnKVError, when set, hears a KV event source that could not be set up (a bad or busy
	// endpoint). It must not block.
	OnKVError func(error)
	// OnKVBootstrap, when set, hears how loading a peer's index snapshot at start went
	// (kv_events.bootstrap_from). It must not block.
	OnKVBootstrap func(KVBootstrap)
}

// Gateway routes OpenAI requests to backends. It is safe for concurrent use.
type Gateway struct {
	opts     Options
	scraper  *http.Client
	proxy    *httputil.ReverseProxy
	metrics  *metrics
	promHTTP http.Handler
	draining atomic.Bool
	inFlight atomic.Int64  // requests reserved on some backend and not yet released
	idle     chan struct{} // closed once draining with nothing in flight
	idleOnce sync.Once
	seq      atomic.Uint64
	current  atomic.Pointer[state] // read without mu on the hot path
	models   atomic.Pointer[modelIndex]
	reasons  atomic.Pointer[map[string][]string] // X-Kvroute-Reason values by reason
	kvIndex  *kvevents.Index                     // the replicas' caches from their KV events
	kvSub    *kvevents.Subscriber                // feeds kvIndex
	tok      *tokenizer
	lc       *router.Lifecycle // the lifecycle requests' tickets live in: lanes[ticketPool].lc
	pd       *router.PD        // a P/D fleet's lifecycles (Decode is lc); nil when aggregated
	lanes    []lane            // a lifecycle per pool, in state.pools' order; fixed at New

	mu          sync.Mutex      // guards the fields below, every backend's mutable fields and decisions
	runCtx      context.Context // set while Run runs
	loops       sync.WaitGroup
	kv          kvRun       // the KV-event sources running
	kvBlockSize int         // the index's block size, fixed at New
	kvMetrics   bool        // the KV-event metrics are registered
	kvBoot      KVBootstrap // how the last bootstrap went
}

// state is one configuration in force: requests hold the state they started with, so a
// reload never changes a request midway.
type state struct {
	cfg      Config
	policy   router.Policy
	tokenize bool // fill token ids from /tokenize: asked for, or the policy reads them
	backends []*backend
	keys     [][]byte
	pools    []pool   // the backends and policy of each lifecycle: ticketPool, and a P/D fleet's prefillPool
	pd       *pdSetup // a P/D fleet's policy; nil when aggregated
}

// policyName labels requests in metrics: the policy's, or the P/D spec's name.
func (st *state) policyName() string {
	if st.pd != nil {
		return st.pd.label
	}
	return st.policy.Name()
}

// New builds a Gateway for cfg. It starts no goroutine: call Run to scrape the backends.
func New(cfg Config, opts Options) (*Gateway, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if opts.Metrics == nil {
		opts.Metrics = prometheus.NewRegistry()
	}
	if opts.Policies == nil {
		opts.Policies = router.Builtin()
	}
	if opts.Transport == nil {
		opts.Transport = NewTransport()
	}
	m, err := newMetrics(opts.Metrics)
	if err != nil {
		return nil, fmt.Errorf("gateway: metrics: %w", err)
	}
	g := &Gateway{
		opts: opts, metrics: m, idle: make(chan struct{}),
		scraper:  &http.Client{Transport: opts.Transport},
		promHTTP: promhttp.HandlerFor(opts.Metrics, promhttp.HandlerOpts{}),
	}
	g.proxy = g.newProxy()
	g.reasons.Store(&map[string][]string{})
	st, err := g.build(cfg, nil)
	if err != nil {
		return nil, err
	}
	if err := g.newLifecycles(st); err != nil {
		return nil, err
	}
	g.install(st)
	if g.tok, err = newTokenizer(cfg.Tokenize, opts.Transport, m); err != nil {
		return nil, fmt.Errorf("gateway: tokenize: %w", err)
	}
	if err := g.newKVIndex(cfg.KVEvents); err != nil {
		return nil, err
	}
	return g, nil
}

// NewTransport returns the transport New uses by default: HTTP/1.1 keep-alive connections,
// up to 1,024 idle ones per backend, each dropped after 4 s idle (before uvicorn, which serves
// vLLM's API, drops it at 5 s: a request is then never sent on a connection the backend is
// closing), no compression (the gateway reads usage from the bodies), response heads of at
// most 1 MiB, no proxy.
func NewTransport() *http.Transport {
	return &http.Transport{
		DialContext:            (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout:    5 * time.Second,
		MaxResponseHeaderBytes: 1 << 20,
		MaxIdleConns:           4096,
		MaxIdleConnsPerHost:    1024,
		IdleConnTimeout:        4 * time.Second,
		DisableCompression:     true,
		WriteBufferSize:        32 << 10,
		ReadBufferSize:         32 << 10,
	}
}

// build makes the state for cfg, reusing old's policy when the policy, its params and seed
// are unchanged, and old's backends by URL.
func (g *Gateway) build(cfg Config, old *state) (*state, error) {
	st := &state{cfg: cfg}
	if old != nil && old.cfg.Policy == cfg.Policy && old.cfg.Seed == cfg.Seed && reflect.DeepEqual(old.cfg.PolicyParams, cfg.PolicyParams) {
		st.policy = old.policy
	} else {
		p, err := g.opts.Policies.New(cfg.Policy, cfg.PolicyParams, cfg.Seed)
		if err != nil {
			return nil, fmt.Errorf("gateway: %w", err)
		}
		st.policy = p
	}
	st.tokenize = cfg.Tokenize.Remote || router.ReadsTokens(st.policy)
	if st.tokenize && cfg.Tokenize.Timeout <= 0 {
		return nil, fmt.Errorf("gateway: policy %s reads token ids, filled from the backends' /tokenize: tokenize.timeout %v: want > 0",
			cfg.Policy, cfg.Tokenize.Timeout)
	}
	existing := map[string]*backend{}
	if old != nil {
		for _, b := range old.backends {
			existing[b.url] = b
		}
	}
	for _, raw := range cfg.Backends {
		spec, _ := parseBackend(raw) // validated
		b := existing[spec.url]
		if b == nil || b.name != spec.name {
			var err error
			if b, err = newBackend(spec, g.metrics); err != nil {
				return nil, err
			}
		}
		b.prefill = cfg.Prefill[spec.name]
		if b.prefill == nil {
			b.prefill = cfg.Prefill[spec.url]
		}
		st.backends = append(st.backends, b)
	}
	for _, k := range cfg.APIKeys {
		st.keys = append(st.keys, []byte(k))
	}
	if err := g.buildPD(st, old); err != nil {
		return nil, err
	}
	return st, nil
}

// install makes st current. Gateway.mu must be held, or g not yet shared.
func (g *Gateway) install(st *state) {
	g.current.Store(st)
	g.rebuildModels(st)
}

func (st *state) lifecycleConfig() router.LifecycleConfig {
	return router.LifecycleConfig{MaxRetries: st.cfg.Limits.MaxRetries}
}

// Reload swaps in cfg without dropping requests in flight: they finish on the backends they
// were sent to and report to the policy that routed them. Backends are matched by URL and
// keep their state and in-flight counts; backends no longer listed stop being scraped and
// are reported to the policy as removed, and their KV-event index is dropped. The policy is
// rebuilt only when its name, parameters or seed change; a rebuilt one is given the KV-event
// index. The KV-event sources follow kv_events (all but block_size, which takes a restart):
// a bind or forward endpoint that cannot be bound fails the reload and the running
// configuration stays.
func (g *Gateway) Reload(cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	g.mu.Lock()
	old := g.current.Load()
	st, err := g.build(cfg, old)
	if err == nil {
		err = g.kvReload(st)
	}
	if err != nil {
		g.mu.Unlock()
		return err
	}
	kept := map[*backend]bool{}
	for _, b := range st.backends {
		kept[b] = true
	}
	var removed []*backend
	for _, b := range old.backends {
		if !kept[b] {
			removed = append(removed, b)
			close(b.stop)
		}
	}
	g.install(st)
	if err := g.setLifecycles(st); err != nil { // names are unique: validated
		g.mu.Unlock()
		return err
	}
	for _, b := range st.backends {
		g.startLoop(b)
	}
	g.mu.Unlock()
	for _, b := range removed {
		g.metrics.forget(b.name)
		g.kvIndex.Drop(b.name)
	}
	if st.policy != old.policy || (st.pd != nil && st.pd.policy != old.pd.policy) { // new policies learn the caches the index holds
		g.kvIndex.Resend()
	}
	return nil
}

// Run scrapes every backend and reads the KV events until ctx is done, then waits for its
// loops to stop. It returns nil after ctx is done, or an error if Run is already running or
// a KV-event endpoint cannot be bound (StartKVEvents).
func (g *Gateway) Run(ctx context.Context) error {
	g.mu.Lock()
	if g.runCtx != nil {
		g.mu.Unlock()
		return errors.New("gateway: already running")
	}
	if err := g.startKVEventsLocked(ctx); err != nil {
		g.mu.Unlock()
		return err
	}
	g.runCtx = ctx
	for _, b := range g.current.Load().backends {
		g.startLoop(b)
	}
	g.mu.Unlock()
	<-ctx.Done()
	g.loops.Wait()
	g.mu.Lock()
	g.runCtx, g.kv = nil, kvRun{}
	for _, b := range g.current.Load().backends {
		b.started = false
	}
	g.mu.Unlock()
	return nil
}

// startLoop starts b's scrape loop if Run is running and it has none. Gateway.mu must be held.
func (g *Gateway) startLoop(b *backend) {
	if g.runCtx == nil || b.started {
		return
	}
	b.started = true
	g.loops.Add(1)
	go func(ctx context.Context) {
		defer g.loops.Done()
		g.scrapeLoop(ctx, b)
	}(g.runCtx)
}

// Drain marks the gateway as shutting down: /ready answers 503 from now on, so that load
// balancers stop sending new clients, while it goes on serving every request that reaches it.
func (g *Gateway) Drain() {
	g.draining.Store(true)
	g.checkIdle()
}

// Idle returns a channel closed once the gateway drains with no request in flight: a
// request in flight is one reserved on a backend and not yet released.
func (g *Gateway) Idle() <-chan struct{} { return g.idle }

// InFlight returns the number of requests in flight on all backends.
func (g *Gateway) InFlight() int { return int(g.inFlight.Load()) }

// checkIdle closes the idle channel when the gateway drains with nothing in flight.
func (g *Gateway) checkIdle() {
	if g.draining.Load() && g.inFlight.Load() == 0 {
		g.idleOnce.Do(func() { close(g.idle) })
	}
}

// Policy returns the policy in force.
func (g *Gateway) Policy() router.Policy { return g.current.Load().policy }

// Tokenizes reports whether requests' token ids are filled from the backends' /tokenize:
// when the configuration asks for it (tokenize.remote), and whenever the policy reads token
// ids (router.ReadsTokens), so that it decides on what the simulator gives it.
func (g *Gateway) Tokenizes() bool { return g.current.Load().tokenize }

// Backends returns the status of every backend, in configuration order.
func (g *Gateway) Backends() []BackendStatus {
	g.mu.Lock()
	defer g.mu.Unlock()
	st := g.current.Load()
	bs, eps := st.backends, g.lifecycleEndpoints(st)
	out := make([]BackendStatus, len(bs))
	for i, b := range bs {
		out[i] = b.status(eps[i])
	}
	return out
}
