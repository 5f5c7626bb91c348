package emulate

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"kvroute/gpumodel"
)

// Sentinel errors.
var (
	// ErrStarted is returned by Start when the replica was already started.
	ErrStarted = errors.New("emulate: replica already started")
	// ErrClosed is returned by Start after Close.
	ErrClosed = errors.New("emulate: replica closed")
)

// Replica is one simulated vLLM server: a sim/engine replica driven in wall-clock time by its
// own goroutine, behind the OpenAI API and vLLM's /metrics. It is an http.Handler; with
// Config.Addr set, Start also serves it on that address. Its methods are safe for concurrent
// use.
type Replica struct {
	cfg       Config
	dep       gpumodel.Deployment
	served    string          // the model name reported
	accepted  map[string]bool // normalized model names requests may use
	capacity  int             // KV capacity in tokens
	idPrefix  string          // makes response ids unique across replicas and restarts
	createdAt int64           // Unix seconds, for /v1/models
	mux       *http.ServeMux

	core   *core
	submit chan *stream
	ctl    chan func(*core)
	done   chan struct{} // closed when the engine loop has returned
	ids    atomic.Uint64
	held   heldLegs // finished prefill legs whose blocks wait for a decoder

	mu       sync.Mutex
	started  bool
	closed   bool
	cancel   context.CancelFunc
	loopErr  error
	down     bool
	errRate  float64 // fraction of completions answered with an injected error, 0..1
	errCode  int     // the injected error's HTTP status; 0 is 500
	errAcc   float64 // accumulates errRate; a request that carries it past 1 fails
	addr     string  // the bound address, once listening
	srv      *http.Server
	ln       net.Listener
	recovery *time.Timer // a pending automatic Recover
	serving  sync.WaitGroup
}

// NewReplica validates cfg and builds an idle replica. It starts nothing: call Start.
func NewReplica(cfg Config) (*Replica, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	d, err := cfg.deployment()
	if err != nil {
		return nil, err
	}
	c, err := newCore(cfg, d)
	if err != nil {
		return nil, fmt.Errorf("emulate: %w", err)
	}
	now := time.Now()
	r := &Replica{
		cfg: cfg, dep: d, served: cfg.servedName(), core: c,
		capacity: c.eng.Metrics().NumGPUBlocks * d.BlockSize,
		idPrefix: fmt.Sprintf("emu%x", uint32(now.UnixNano())), createdAt: now.Unix(),
		submit: make(chan *stream), ctl: make(chan func(*core)), done: make(chan struct{}),
	}
	r.accepted = map[string]bool{normalizeModel(r.served): true, normalizeModel(d.Model.Name): true}
	for _, a := range d.Model.Aliases {
		r.accepted[normalizeModel(a)] = true
	}
	r.mux = r.routes()
	return r, nil
}

// normalizeModel folds a model name for comparison, as gpumodel's catalog does.
func normalizeModel(s string) string {
	return strings.ReplaceAll(strings.ToLower(strings.TrimSpace(s)), "_", "-")
}

// Start starts the engine loop and, when Config.Addr is set, listens and serves. The replica
// stops, aborting requests in flight, when ctx is done or Close is called.
func (r *Replica) Start(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.closed:
		return ErrClosed
	case r.started:
		return ErrStarted
	}
	if r.cfg.Addr != "" {
		if err := r.listenLocked(r.cfg.Addr); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	if r.cfg.KVEvents.Endpoint != "" {
		if err := r.startKVEvents(ctx); err != nil {
			cancel()
			return err
		}
	}
	r.started, r.cancel = true, cancel
	go func() {
		err := r.core.run(ctx, r.submit, r.ctl)
		if kv := r.core.kv; kv != nil && kv.pub != nil {
			kv.flush() // the AllBlocksCleared of the final abort, if any
			_ = kv.pub.Close()
		}
		r.mu.Lock()
		r.loopErr = err
		r.mu.Unlock()
		close(r.done)
	}()
	context.AfterFunc(ctx, r.stopServing)
	return nil
}

// listenLocked binds addr and serves the replica on it; r.mu is held.
func (r *Replica) listenLocked(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("emulate: %w", err)
	}
	r.addr, r.ln = ln.Addr().String(), ln
	srv := &http.Server{Handler: r, ReadHeaderTimeout: 30 * time.Second}
	r.srv = srv
	r.serving.Add(1)
	go func() {
		defer r.serving.Done()
		_ = srv.Serve(ln) // returns ErrServerClosed on Close
	}()
	return nil
}

// stopServing closes the listener and every connection, and cancels a pending recovery.
func (r *Replica) stopServing() {
	r.mu.Lock()
	srv := r.srv
	r.srv, r.ln = nil, nil
	if r.recovery != nil {
		r.recovery.Stop()
		r.recovery = nil
	}
	r.mu.Unlock()
	if srv != nil {
		_ = srv.Close() // its only error is the listener's close error, which changes nothing
	}
}

// Addr returns the address the replica listens on ("127.0.0.1:8001"), or "" when it has none.
func (r *Replica) Addr() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.addr
}

// Close stops the replica: it closes the listener and every connection, aborts the requests
// in flight and waits for the engine loop. It returns the loop's error, if any, and may be
// called more than once.
func (r *Replica) Close() error {
	r.mu.Lock()
	started := r.started
	r.closed = true
	cancel := r.cancel
	r.mu.Unlock()
	r.stopServing()
	if !started {
		return nil
	}
	cancel()
	<-r.done
	r.serving.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.loopErr
}

// do runs f on the engine loop and waits for it; before Start it runs f directly. It reports
// false when the loop has stopped.
func (r *Replica) do(f func(*core)) bool {
	r.mu.Lock()
	if !r.started {
		f(r.core)
		r.mu.Unlock()
		return true
	}
	r.mu.Unlock()
	ran := make(chan struct{})
	select {
	case r.ctl <- func(c *core) { f(c); close(ran) }:
		<-ran
		return true
	case <-r.done:
		return false
	}
}

// Fail kills the replica as a crashed server would look: the listener and every connection
// close, streams in flight break off without their final event, the KV cache is lost, and
// requests that still reach the handler have their connection dropped, until Recover. A
// pending timed recovery is cancelled.
func (r *Replica) Fail() {
	if srv := r.failEngine(); srv != nil {
		_ = srv.Close() // its only error is the listener's close error, which changes nothing
	}
}

// failEngine marks the replica down, closes its listener and aborts every request in flight.
// It returns the detached server, whose open connections the caller closes.
func (r *Replica) failEngine() *http.Server {
	r.mu.Lock()
	r.down = true
	srv, ln := r.srv, r.ln
	r.srv, r.ln = nil, nil
	if r.recovery != nil {
		r.recovery.Stop()
		r.recovery = nil
	}
	r.mu.Unlock()
	if ln != nil {
		_ = ln.Close() // the port is free for Recover; the server's own close fails harmlessly
	}
	r.do((*core).fail)
	return srv
}

// Recover brings a failed replica back, empty, listening again on the same address.
func (r *Replica) Recover() error {
	r.do(func(c *core) { c.eng.Recover() })
	r.mu.Lock()
	defer r.mu.Unlock()
	r.down = false
	if r.addr == "" || r.srv != nil || !r.started || r.closed {
		return nil
	}
	return r.listenLocked(r.addr)
}

// recoverAfter arranges for Recover after d of wall time, unless Fail or Close comes first.
func (r *Replica) recoverAfter(d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.closed {
		r.recovery = time.AfterFunc(d, func() { _ = r.Recover() })
	}
}

// Down reports whether the replica has failed and not recovered.
func (r *Replica) Down() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.down
}

// SetSlowdown makes every later step take factor times its simulated duration (> 0 and
// finite; 1 is normal speed).
func (r *Replica) SetSlowdown(factor float64) error {
	if !(factor > 0) || math.IsInf(factor, 0) {
		return fmt.Errorf("emulate: slowdown must be positive and finite, got %v", factor)
	}
	r.do(func(c *core) { c.slow = factor })
	return nil
}

// SetErrorRate makes a fraction rate (0..1) of completion requests fail at once, before
// their body is read, with an OpenAI-style error of the status SetErrorStatus set (500 unless
// set), evenly spread: rate 0.25 fails every fourth request.
func (r *Replica) SetErrorRate(rate float64) error {
	if !(rate >= 0 && rate <= 1) {
		return fmt.Errorf("emulate: error rate must be within [0, 1], got %v", rate)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errRate, r.errAcc = rate, 0
	return nil
}

// SetErrorStatus sets the HTTP status of injected errors, 400 to 599: 500 stands for a failure
// while handling the request, 503 and 429 for a server refusing work before reading it.
func (r *Replica) SetErrorStatus(status int) error {
	if status < 400 || status > 599 {
		return fmt.Errorf("emulate: error status must be within 400..599, got %d", status)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errCode = status
	return nil
}

// injectError returns the status this request should fail with, or 0.
func (r *Replica) injectError() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.errRate <= 0 {
		return 0
	}
	r.errAcc += r.errRate
	if r.errAcc < 1-1e-9 {
		return 0
	}
	r.errAcc = max(r.errAcc-1, 0)
	if r.errCode == 0 {
		return http.StatusInternalServerError
	}
	return r.errCode
}

// enqueue hands st to the engine loop. It reports false when the client went away or the
// replica stopped.
func (r *Replica) enqueue(ctx context.Context, st *stream) bool {
	select {
	case r.submit <- st:
		return true
	case <-ctx.Done():
	case <-r.done:
	}
	return false
}
