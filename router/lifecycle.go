package router

import (
	"errors"
	"fmt"
	"slices"
	"sync"
)

// ErrRetriesExhausted means a request's attempt failed and it may not be tried again: it
// was already tried on 1 + LifecycleConfig.MaxRetries endpoints.
var ErrRetriesExhausted = errors.New("router: retries exhausted")

// DefaultMaxRetries is max_retries unless a sweep file's router or cmd/route's limits set
// it: a request is tried on up to two other endpoints.
const DefaultMaxRetries = 2

// LifecycleConfig is the failure rule a Lifecycle applies.
type LifecycleConfig struct {
	// MaxRetries is how many other endpoints a request is tried on after an attempt failed
	// before any byte of its response reached the client; 0 means never. The caller says
	// which failures those are (Ticket.Retry); the lifecycle counts them.
	MaxRetries int
}

// Validate reports a negative MaxRetries.
func (c LifecycleConfig) Validate() error {
	if c.MaxRetries < 0 {
		return fmt.Errorf("router: max_retries %d: want >= 0", c.MaxRetries)
	}
	return nil
}

// Lifecycle is one router replica's account of the requests it routes: the snapshot its
// policy decides on, the in-flight counters it keeps, and every call of the policy's
// observers. A request's life is decide → routed → first token → finished, or retried on
// another endpoint after a failed attempt; endpoints are ejected, re-admitted and removed.
// The simulator and the proxy both drive it, so a policy sees the same calls in virtual and
// in real time; neither calls a policy's observer methods itself.
//
// A Lifecycle is safe for concurrent use: its calls are serialized, and each decision's Pick
// and Routed run together, so every decision sees every earlier one.
type Lifecycle struct {
	mu     sync.Mutex
	cfg    LifecycleConfig
	pol    *hooks
	snap   Snapshot
	index  map[string]int // endpoint id → position in snap.Endpoints
	gen    uint64         // bumped when the endpoint list changes
	seq    uint64         // decisions made
	keep   []owned        // Update's scratch
	hidden []int          // decide's scratch: endpoints hidden from one Pick
}

// owned are the fields of an endpoint the lifecycle owns.
type owned struct {
	id             string
	ready          bool
	inFlight, toks int
}

// hooks is a policy with its optional observer interfaces resolved once.
type hooks struct {
	p   Policy
	obs Observer
	ft  FirstTokenObserver
	pm  PrefixMatcher
}

func newHooks(p Policy) *hooks {
	h := &hooks{p: p}
	h.obs, _ = p.(Observer)
	h.ft, _ = p.(FirstTokenObserver)
	h.pm, _ = p.(PrefixMatcher)
	return h
}

// NewLifecycle returns a lifecycle deciding with p over endpoints, in that order (their IDs
// must be unique and not empty). The endpoints' InFlight counters start at zero.
func NewLifecycle(p Policy, endpoints []EndpointState, cfg LifecycleConfig) (*Lifecycle, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	l := &Lifecycle{cfg: cfg, pol: newHooks(p)}
	if err := l.setEndpoints(endpoints); err != nil {
		return nil, err
	}
	for i := range l.snap.Endpoints {
		e := &l.snap.Endpoints[i]
		e.InFlight, e.InFlightTokens = 0, 0
	}
	return l, nil
}

// SetPolicy makes p decide from now on. Requests already routed report the rest of their
// life to the policy that routed them.
func (l *Lifecycle) SetPolicy(p Policy) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pol = newHooks(p)
}

// SetConfig makes cfg the failure rule from now on; a request counts the retries it made
// under the rule before.
func (l *Lifecycle) SetConfig(cfg LifecycleConfig) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cfg = cfg
	return nil
}

// SetEndpoints replaces the pool with endpoints, in that order (unique, non-empty IDs). An
// endpoint that stays keeps its in-flight counters and readiness; one that leaves is reported
// to the policy as removed; a new one starts with no request in flight. Requests still in
// flight on a removed endpoint end without changing any counter.
func (l *Lifecycle) SetEndpoints(endpoints []EndpointState) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	old, oldIndex := l.snap.Endpoints, l.index
	if err := l.setEndpoints(endpoints); err != nil {
		return err
	}
	for i := range l.snap.Endpoints {
		e := &l.snap.Endpoints[i]
		e.InFlight, e.InFlightTokens = 0, 0
		if j, ok := oldIndex[e.ID]; ok {
			e.InFlight, e.InFlightTokens, e.Ready = old[j].InFlight, old[j].InFlightTokens, old[j].Ready
		}
	}
	for _, e := range old {
		if _, ok := l.index[e.ID]; !ok && l.pol.obs != nil {
			l.pol.obs.Removed(e.ID)
		}
	}
	return nil
}

func (l *Lifecycle) setEndpoints(endpoints []EndpointState) error {
	index := make(map[string]int, len(endpoints))
	for i, e := range endpoints {
		if e.ID == "" {
			return fmt.Errorf("router: endpoint %d has no id", i)
		}
		if _, dup := index[e.ID]; dup {
			return fmt.Errorf("router: endpoint id %q appears twice", e.ID)
		}
		index[e.ID] = i
	}
	l.snap.Endpoints, l.index = slices.Clone(endpoints), index
	l.gen++
	return nil
}

// Update lets fn set what the caller observes of the endpoints (scraped metrics, models,
// capacity, UpdatedAt), in the order they were given. The fields the lifecycle owns, ID,
// Ready and the in-flight counters, are kept whatever fn writes to them.
func (l *Lifecycle) Update(fn func(endpoints []EndpointState)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	eps := l.snap.Endpoints
	l.keep = l.keep[:0]
	for _, e := range eps {
		l.keep = append(l.keep, owned{e.ID, e.Ready, e.InFlight, e.InFlightTokens})
	}
	fn(eps)
	for i, k := range l.keep {
		e := &eps[i]
		e.ID, e.Ready, e.InFlight, e.InFlightTokens = k.id, k.ready, k.inFlight, k.toks
	}
}

// Endpoints returns a copy of the pool as the next decision would see it.
func (l *Lifecycle) Endpoints() []EndpointState {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.snap.Endpoints)
}

// Eject takes endpoint id out of rotation (a failed health check, a connection refused) and
// reports it to the policy as removed, so that state kept for it is dropped. It reports
// whether the endpoint was ready.
func (l *Lifecycle) Eject(id string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	i, ok := l.index[id]
	if !ok || !l.snap.Endpoints[i].Ready {
		return false
	}
	l.snap.Endpoints[i].Ready = false
	if l.pol.obs != nil {
		l.pol.obs.Removed(id)
	}
	return true
}

// Readmit puts endpoint id back in rotation. It reports whether the endpoint was ejected.
func (l *Lifecycle) Readmit(id string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	i, ok := l.index[id]
	if !ok || l.snap.Endpoints[i].Ready {
		return false
	}
	l.snap.Endpoints[i].Ready = true
	return true
}
