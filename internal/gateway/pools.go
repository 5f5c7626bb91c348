package gateway

import (
	"fmt"

	"kvroute/router"
)

// pool is the backends one of the gateway's lifecycles routes, as indices into
// state.backends in configuration order, and the policy it decides with.
type pool struct {
	idx    []int
	policy router.Policy
}

// The pools of state.pools, by index: an aggregated state has one, a P/D state two.
const (
	// ticketPool is the pool requests' tickets (call.ticket) live in: every backend when
	// aggregated, the decode pool in a P/D fleet.
	ticketPool = 0
	// decodePool is a P/D fleet's decode pool.
	decodePool = ticketPool
	// prefillPool is a P/D fleet's prefill pool.
	prefillPool = 1
)

// aggregatedPools is the one pool of an aggregated state: every backend, with st.policy.
func (st *state) aggregatedPools() []pool {
	p := pool{idx: make([]int, len(st.backends)), policy: st.policy}
	for i := range p.idx {
		p.idx[i] = i
	}
	return []pool{p}
}

// endpoints is pool k of st as its lifecycle knows it: each backend by its name.
func (st *state) endpoints(k int) []router.EndpointState {
	idx := st.pools[k].idx
	eps := make([]router.EndpointState, len(idx))
	for j, i := range idx {
		b := st.backends[i]
		eps[j] = router.EndpointState{ID: b.name, Ready: b.ready}
	}
	return eps
}

// backendAt is the backend at index i of pool k's lifecycle. The lifecycles route the
// current state's pools, so st is the current state and Gateway.mu is held.
func (st *state) backendAt(k, i int) *backend { return st.backends[st.pools[k].idx[i]] }

// viewPool sets eps, pool k's endpoints, to what the gateway last scraped of its backends in
// the current state. Gateway.mu is held.
func (g *Gateway) viewPool(eps []router.EndpointState, k int) {
	st := g.current.Load()
	for j, i := range st.pools[k].idx {
		b, e := st.backends[i], &eps[j]
		e.Models, e.Running, e.Waiting, e.KVUsage = b.models, b.running, b.waiting, b.kvUsage
		e.NumGPUBlocks, e.BlockSize, e.UpdatedAt, e.Prefill = b.numGPUBlocks, b.blockSize, b.updatedAt, b.prefill
	}
}

// lane is one of the gateway's lifecycles and the function that fills its view from its
// pool's backends (viewPool), bound once at New so that a refresh allocates nothing.
type lane struct {
	lc   *router.Lifecycle
	view func([]router.EndpointState)
}

// newLifecycles builds a lifecycle per pool of st: the aggregated pool's, or a P/D router's
// decode and prefill ones. g is not yet shared.
func (g *Gateway) newLifecycles(st *state) error {
	var lcs []*router.Lifecycle // in state.pools' order
	if st.pd == nil {
		lc, err := router.NewLifecycle(st.pools[ticketPool].policy, st.endpoints(ticketPool), st.lifecycleConfig())
		if err != nil {
			return fmt.Errorf("gateway: %w", err)
		}
		lcs = []*router.Lifecycle{ticketPool: lc}
	} else {
		pd, err := router.NewPD(st.pd.policy, st.endpoints(prefillPool), st.endpoints(decodePool), st.lifecycleConfig())
		if err != nil {
			return fmt.Errorf("gateway: %w", err)
		}
		g.pd, lcs = pd, []*router.Lifecycle{decodePool: pd.Decode, prefillPool: pd.Prefill}
	}
	g.lc = lcs[ticketPool]
	for k, lc := range lcs {
		g.lanes = append(g.lanes, lane{lc: lc, view: func(eps []router.EndpointState) { g.viewPool(eps, k) }})
	}
	return nil
}

// setLifecycles puts st's pools, policies and failure rule in force on the lifecycles; st has
// as many pools as they (a reload does not switch modes). Gateway.mu is held.
func (g *Gateway) setLifecycles(st *state) error {
	for k, l := range g.lanes {
		if err := l.lc.SetEndpoints(st.endpoints(k)); err != nil {
			return fmt.Errorf("gateway: %w", err)
		}
		l.lc.SetPolicy(st.pools[k].policy)
		_ = l.lc.SetConfig(st.lifecycleConfig()) // validated with cfg
	}
	return nil
}

// refresh copies what the gateway scraped of pool k's backends into its lifecycle's view.
// Gateway.mu is held.
func (g *Gateway) refresh(k int) {
	l := g.lanes[k]
	l.lc.Update(l.view)
}

// lifecycleEndpoints is the lifecycles' view of st's backends, in configuration order.
// Gateway.mu is held, so st is current.
func (g *Gateway) lifecycleEndpoints(st *state) []router.EndpointState {
	eps := make([]router.EndpointState, len(st.backends))
	for k, l := range g.lanes {
		for j, e := range l.lc.Endpoints() {
			eps[st.pools[k].idx[j]] = e
		}
	}
	return eps
}
