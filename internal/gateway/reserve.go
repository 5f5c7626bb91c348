package gateway

import (
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"kvroute/router"
)

// reservation is one request's claim on a backend's in-flight counters, made at decision
// time. release gives it back exactly once, however many times and from wherever it is
// called: the Reserve/Unreserve pattern of the Kubernetes scheduler.
type reservation struct {
	g        *Gateway
	st       *state
	b        *backend
	req      *router.Request
	decision router.Decision
	tokens   int
	released atomic.Bool
}

// reserve builds one consistent snapshot of st's backends (excluded ones marked not ready),
// runs the policy on it, charges the chosen backend's in-flight counters and reports the
// decision to the policy, all under Gateway.mu, so each decision sees every earlier one.
func (g *Gateway) reserve(st *state, req *router.Request, exclude []*backend, now time.Time) (*reservation, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	eps := g.snap.Endpoints[:0]
	for _, b := range st.backends {
		e := b.endpoint()
		if len(exclude) > 0 && slices.Contains(exclude, b) {
			e.Ready = false
		}
		eps = append(eps, e)
	}
	g.snap.Endpoints, g.snap.Now = eps, now
	d, err := st.policy.Pick(req, &g.snap)
	if err != nil {
		return nil, err
	}
	if d.Index < 0 || d.Index >= len(st.backends) {
		return nil, fmt.Errorf("gateway: policy %s picked index %d of %d endpoints", st.policy.Name(), d.Index, len(st.backends))
	}
	b := st.backends[d.Index]
	tokens := req.InputTokens + req.MaxOutputTokens
	b.inFlight++
	b.inFlightTokens += tokens
	b.inflightGauge.Inc()
	g.inFlight.Add(1)
	if st.observer != nil {
		st.observer.Routed(req, d, b.id, now)
	}
	return &reservation{g: g, st: st, b: b, req: req, decision: d, tokens: tokens}, nil
}

// release returns the reservation's counts and reports the request's end, with usage u, to
// the policy it was routed by. Only the first call has an effect; it reports whether this
// call was it.
func (r *reservation) release(u router.Usage, now time.Time) bool {
	if !r.released.CompareAndSwap(false, true) {
		return false
	}
	r.g.mu.Lock()
	r.b.inFlight--
	r.b.inFlightTokens -= r.tokens
	r.g.mu.Unlock()
	r.b.inflightGauge.Dec()
	if r.st.observer != nil {
		r.st.observer.Finished(r.req, r.b.id, u, now)
	}
	r.g.inFlight.Add(-1)
	r.g.checkIdle()
	return true
}
