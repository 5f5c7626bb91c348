package gateway

import (
	"bufio"
	"context"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"kvroute/router"
)

// spy wraps a built-in policy and records the Observer calls it receives.
type spy struct {
	router.Policy
	inner router.Observer

	mu       sync.Mutex
	routed   map[string]string // request ID → endpoint
	finished map[string]finish // request ID → first Finished
	calls    int               // Finished calls, duplicates included
	removed  []string
}

type finish struct {
	endpoint string
	usage    router.Usage
}

func (s *spy) Routed(req *router.Request, d router.Decision, endpoint string, now time.Time) {
	s.mu.Lock()
	s.routed[req.ID] = endpoint
	s.mu.Unlock()
	if s.inner != nil {
		s.inner.Routed(req, d, endpoint, now)
	}
}

func (s *spy) Finished(req *router.Request, endpoint string, u router.Usage, now time.Time) {
	s.mu.Lock()
	if _, ok := s.finished[req.ID]; !ok {
		s.finished[req.ID] = finish{endpoint, u}
	}
	s.calls++
	s.mu.Unlock()
	if s.inner != nil {
		s.inner.Finished(req, endpoint, u, now)
	}
}

// ReadsTokens reports whether the wrapped policy reads token ids.
func (s *spy) ReadsTokens() bool { return router.ReadsTokens(s.Policy) }

func (s *spy) Removed(endpoint string) {
	s.mu.Lock()
	s.removed = append(s.removed, endpoint)
	s.mu.Unlock()
	if s.inner != nil {
		s.inner.Removed(endpoint)
	}
}

// spyRegistry returns a registry of every built-in policy where "spy-NAME" builds NAME
// wrapped in a spy, which is also returned through *last.
func spyRegistry(last **spy) *router.Registry {
	reg := router.Builtin()
	for _, name := range router.Builtin().Names() {
		_ = reg.Register("spy-"+name, func(params map[string]any, rng *rand.Rand) (router.Policy, error) {
			p, err := router.Builtin().New(name, params, rng.Uint64())
			if err != nil {
				return nil, err
			}
			s := &spy{Policy: p, routed: map[string]string{}, finished: map[string]finish{}}
			s.inner, _ = p.(router.Observer)
			*last = s
			return s, nil
		})
	}
	_ = reg.Register("first-ready", func(map[string]any, *rand.Rand) (router.Policy, error) { return firstReady{}, nil })
	return reg
}

// firstReady picks the first eligible endpoint in configuration order, so a test knows
// which backend each attempt goes to.
type firstReady struct{}

func (firstReady) Name() string { return "first-ready" }

func (firstReady) Pick(req *router.Request, s *router.Snapshot) (router.Decision, error) {
	cand, err := router.Eligible(nil, req, s)
	if err != nil {
		return router.Decision{}, err
	}
	return router.Decision{Index: cand[0], Reason: "first"}, nil
}

// testConfig is a configuration for fakes with a fast scrape loop.
func testConfig(policy string, fakes ...*fake) Config {
	cfg := DefaultConfig()
	cfg.Policy = policy
	for _, f := range fakes {
		cfg.Backends = append(cfg.Backends, f.name+"="+f.url())
	}
	cfg.Health.MetricsInterval = 5 * time.Millisecond
	cfg.Health.FailureThreshold = 2
	cfg.Health.MaxBackoff = 40 * time.Millisecond
	return cfg
}

// harness is a running gateway behind a loopback server.
type harness struct {
	g       *Gateway
	url     string       // the front's base URL
	client  *http.Client // a client of the front
	reg     *prometheus.Registry
	spy     *spy
	health  chan healthEvent
	handled chan struct{} // one value per request the gateway finished handling
}

type healthEvent struct {
	backend string
	ready   bool
}

// start builds a gateway for cfg, probes its backends once, runs its scrape loops and
// serves it with a Server of the default configuration, as cmd/route does; everything stops
// when the test ends.
func start(t *testing.T, cfg Config) *harness {
	t.Helper()
	return startServer(t, cfg, DefaultServerConfig())
}

// startServer is start with the server configured by scfg.
func startServer(t *testing.T, cfg Config, scfg ServerConfig) *harness {
	t.Helper()
	return startWith(t, cfg, scfg, Options{})
}

// startOpts is start with the gateway's transport from opts.
func startOpts(t *testing.T, cfg Config, opts Options) *harness {
	t.Helper()
	return startWith(t, cfg, DefaultServerConfig(), opts)
}

// startWith is start with the server configured by scfg and the transport from opts; the
// harness sets the other options.
func startWith(t *testing.T, cfg Config, scfg ServerConfig, opts Options) *harness {
	t.Helper()
	h := &harness{reg: prometheus.NewRegistry(), health: make(chan healthEvent, 1024), handled: make(chan struct{}, 4096)}
	g, err := New(cfg, Options{Metrics: h.reg, Policies: spyRegistry(&h.spy), Transport: opts.Transport, OnHealth: func(_, url string, ready bool, _ error) {
		h.health <- healthEvent{url, ready}
	}})
	if err != nil {
		t.Fatal(err)
	}
	h.g = g
	ctx, cancel := context.WithCancel(context.Background())
	g.Probe(ctx)
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		_ = g.Run(ctx)
	}()
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() { h.handled <- struct{}{} }()
		g.ServeHTTP(w, r)
	})
	t.Cleanup(func() {
		cancel()
		<-ran
	})
	h.client = &http.Client{Transport: &http.Transport{}}
	t.Cleanup(h.client.CloseIdleConnections)
	h.url = serveGateway(t, handler, scfg)
	return h
}

// waitHealth waits until backend's health changes to ready, failing the test after 10s.
func (h *harness) waitHealth(t *testing.T, backend string, ready bool) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case e := <-h.health:
			if e.backend == backend && e.ready == ready {
				return
			}
		case <-deadline:
			t.Fatalf("backend %s never became ready=%v: %+v", backend, ready, h.g.Backends())
		}
	}
}

// waitHandled waits until the gateway has finished handling n more requests.
func (h *harness) waitHandled(t *testing.T, n int) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for range n {
		select {
		case <-h.handled:
		case <-deadline:
			t.Fatalf("requests still being handled: %+v", h.g.Backends())
		}
	}
}

// assertNoInFlight fails the test unless every backend's in-flight counters are zero.
func (h *harness) assertNoInFlight(t *testing.T) {
	t.Helper()
	for _, b := range h.g.Backends() {
		if b.InFlight != 0 || b.InFlightTokens != 0 {
			t.Errorf("backend %s: in flight %d requests, %d tokens after all requests ended", b.URL, b.InFlight, b.InFlightTokens)
		}
	}
}

type response struct {
	status int
	header http.Header
	body   string
	err    error
}

// post sends body to path and reads the whole response.
func (h *harness) post(t *testing.T, path, body string, header ...string) response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, h.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return do(h.client, req)
}

func do(c *http.Client, req *http.Request) response {
	resp, err := c.Do(req)
	if err != nil {
		return response{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, header: resp.Header, body: string(b), err: err}
}

// events splits an SSE body into its data payloads.
func events(body string) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			out = append(out, d)
		}
	}
	return out
}

func chatBody(prompt string, stream bool, extra string) string {
	s := `{"model":"` + fakeModel + `","max_tokens":4,"messages":[{"role":"system","content":"You are terse."},{"role":"user","content":` + quote(prompt) + `}]`
	if stream {
		s += `,"stream":true`
	}
	return s + extra + "}"
}

func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"', '\\':
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	b.WriteByte('"')
	return b.String()
}

// serveGateway serves h on a loopback port with a Server, as cmd/route does, until the test
// ends, and returns its base URL.
func serveGateway(tb testing.TB, h http.Handler, cfg ServerConfig) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	srv, err := NewServer(cfg, h, nil)
	if err != nil {
		tb.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	tb.Cleanup(func() {
		_ = srv.Close()
		if err := <-served; err != http.ErrServerClosed {
			tb.Errorf("Serve: %v", err)
		}
	})
	return "http://" + ln.Addr().String()
}
