package gateway

import (
	"time"

	"kvroute/router"
)

// reservation is one attempt of a request at a backend: the backend its ticket names in the
// router's lifecycle, which keeps the in-flight counters and tells the policy. release ends
// the request once, however many times and from wherever it is called.
type reservation struct {
	g        *Gateway
	c        *call
	b        *backend
	decision router.Decision
}

// reserve makes the request's first decision: the lifecycle sees each backend as last
// scraped, picks, charges the backend and reports the decision to the policy, all under
// Gateway.mu, so each decision sees every earlier one.
func (g *Gateway) reserve(c *call, now time.Time) (*reservation, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.pd != nil {
		return g.reservePD(c, now)
	}
	g.refreshView()
	c.ticket = &c.own
	if err := g.lc.Decide(c.ticket, c.req, now); err != nil {
		return nil, err
	}
	g.inFlight.Add(1)
	return g.reserved(c), nil
}

// retry ends r's failed attempt and decides another under the failure rule (Ticket.Retry).
// On an error the request has ended.
func (r *reservation) retry(now time.Time) (*reservation, error) {
	g := r.g
	g.mu.Lock()
	defer g.mu.Unlock()
	g.refreshView()
	err := r.c.ticket.Retry(now)
	r.b.inflightGauge.Dec()
	if err != nil {
		g.inFlight.Add(-1)
		g.checkIdle()
		return nil, err
	}
	return g.reserved(r.c), nil
}

// reserved is the reservation of c's ticket's current attempt. Gateway.mu is held, so the
// lifecycle's pool is the current state's ticketPool.
func (g *Gateway) reserved(c *call) *reservation {
	b := g.current.Load().backendAt(ticketPool, c.ticket.Index())
	b.inflightGauge.Inc()
	return &reservation{g: g, c: c, b: b, decision: c.ticket.Decision()}
}

// refreshView copies what the gateway scraped of the ticket pool's backends into its
// lifecycle's view. Gateway.mu is held.
func (g *Gateway) refreshView() { g.refresh(ticketPool) }

// firstToken reports that the attempt's first response byte came back at now: for a stream,
// its first event; for a whole response, the response.
func (r *reservation) firstToken(now time.Time) {
	r.c.ticket.FirstToken(now)
	if r.c.prefill != nil && r.c.st.cfg.PD.Mode == PDSidecar { // the sidecar's prefill is over
		r.c.endPrefill(router.Usage{PromptTokens: r.c.req.InputTokens, CompletionTokens: 1}, now)
	}
}

// release ends the request with the usage its response reported. Only the first call has an
// effect; it reports whether this call was it.
func (r *reservation) release(u router.Usage, now time.Time) bool {
	r.c.endPrefill(router.Usage{PromptTokens: r.c.req.InputTokens, CompletionTokens: 1}, now)
	if r.c.prefillDone { // as llm-d's sidecar reports it: the prefiller's cache hit
		u.CachedTokens = r.c.prefillCached
	}
	if !r.c.ticket.Finish(u, now) {
		return false
	}
	r.b.inflightGauge.Dec()
	r.g.inFlight.Add(-1)
	r.g.checkIdle()
	return true
}
