package router

import (
	"fmt"
	"time"
)

// Ticket is one request's claim on an endpoint, from its decision to its end: the handle
// through which its driver reports the request's first token, its end or a failed attempt.
// The zero Ticket is ready for Lifecycle.Decide; a ticket that ended may be decided again,
// for another request. Its methods are safe to call from any goroutine, and each report
// after the request ended is ignored.
type Ticket struct {
	l        *Lifecycle
	pol      *hooks // the policy that routed the current attempt
	req      *Request
	decision Decision
	endpoint string
	index    int    // the endpoint's position in the lifecycle's pool at generation gen
	gen      uint64 // the pool generation index refers to
	tokens   int    // the in-flight tokens the attempt charged
	retries  int
	failed   []string // the endpoints earlier attempts failed on
	state    ticketState
}

type ticketState uint8

const (
	ticketIdle      ticketState = iota // not decided, or ended
	ticketRouted                       // routed, no first token yet
	ticketFirstSeen                    // the first token came back
)

// Decide picks an endpoint for req as seen at now, charges its in-flight counters and
// reports the decision to the policy (Observer.Routed), as one step. t must be idle (new or
// ended); it holds the request until Finish, or until Retry gives up. On an error (one
// wrapping ErrNoEndpoint, or a policy's) nothing was charged and t stays idle.
func (l *Lifecycle) Decide(t *Ticket, req *Request, now time.Time) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if t.state != ticketIdle {
		panic("router: Decide on a ticket still in flight")
	}
	*t = Ticket{l: l, req: req, failed: t.failed[:0]}
	return l.decide(t, now)
}

// Assign routes req to endpoint id without asking the policy: a request whose destination
// was fixed before this router saw it (a replayed trace, a client that names its replica).
// Everything else is as Decide: t must be idle, the endpoint's in-flight counters are
// charged, and the policy hears Observer.Routed, with a Decision of Reason ReasonAssigned
// and Seq 0 (nothing its last Pick computed applies). The endpoint need not be ready. It
// returns an error, and charges nothing, when id is not in the pool.
func (l *Lifecycle) Assign(t *Ticket, req *Request, id string, now time.Time) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if t.state != ticketIdle {
		panic("router: Assign on a ticket still in flight")
	}
	i, ok := l.index[id]
	if !ok {
		return fmt.Errorf("router: assign %s: endpoint %q is not in the pool", req.ID, id)
	}
	*t = Ticket{l: l, req: req, failed: t.failed[:0]}
	l.route(t, Decision{Index: i, Reason: ReasonAssigned}, now)
	return nil
}

// decide runs one attempt for t: Pick on the pool with the endpoints t failed on marked not
// ready, then charge and Routed. l.mu is held.
func (l *Lifecycle) decide(t *Ticket, now time.Time) error {
	d, err := l.pick(t, now)
	if err != nil {
		return err
	}
	l.route(t, d, now)
	return nil
}

// pick asks the policy for t's next attempt, with the endpoints t failed on hidden, and
// checks its answer; nothing is charged. l.mu is held.
func (l *Lifecycle) pick(t *Ticket, now time.Time) (Decision, error) {
	eps := l.snap.Endpoints
	l.hidden = l.hidden[:0]
	for _, id := range t.failed {
		if i, ok := l.index[id]; ok && eps[i].Ready {
			eps[i].Ready = false
			l.hidden = append(l.hidden, i)
		}
	}
	l.seq++
	l.snap.Now, l.snap.Seq = now, l.seq
	d, err := l.pol.p.Pick(t.req, &l.snap)
	for _, i := range l.hidden {
		eps[i].Ready = true
	}
	if err != nil {
		return Decision{}, err
	}
	if d.Index < 0 || d.Index >= len(eps) {
		return Decision{}, fmt.Errorf("router: policy %s picked endpoint %d of %d", l.pol.p.Name(), d.Index, len(eps))
	}
	d.Seq = l.seq
	return d, nil
}

// route charges t's attempt on endpoint d.Index and reports it to the policy. l.mu is held.
func (l *Lifecycle) route(t *Ticket, d Decision, now time.Time) {
	e := &l.snap.Endpoints[d.Index]
	t.pol, t.decision, t.endpoint, t.index, t.gen = l.pol, d, e.ID, d.Index, l.gen
	t.tokens = t.req.InputTokens + t.req.MaxOutputTokens
	e.InFlight++
	e.InFlightTokens += t.tokens
	t.state = ticketRouted
	if t.pol.obs != nil {
		t.pol.obs.Routed(t.req, d, e.ID, now)
	}
}

// FirstToken reports that the first token of t's current attempt came back at now. Only the
// attempt's first report reaches the policy (FirstTokenObserver).
func (t *Ticket) FirstToken(now time.Time) {
	l := t.l
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if t.state != ticketRouted {
		return
	}
	t.state = ticketFirstSeen
	if t.pol.ft != nil {
		t.pol.ft.FirstToken(t.req, t.endpoint, now)
	}
}

// Finish ends t's request, completed or not, with the usage its endpoint reported: its
// in-flight charge is released and the policy hears Observer.Finished. Only the first call
// has an effect; it reports whether this call was it.
func (t *Ticket) Finish(u Usage, now time.Time) bool {
	l := t.l
	if l == nil {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if t.state == ticketIdle {
		return false
	}
	l.release(t, u, now)
	return true
}

// CanRetry reports whether a failed attempt of t's may be tried on another endpoint: the
// request made fewer than MaxRetries retries so far. Retry applies the same count.
func (t *Ticket) CanRetry() bool {
	l := t.l
	if l == nil {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return t.state != ticketIdle && t.retries < l.cfg.MaxRetries
}

// Retry reports that t's current attempt failed before any byte of its response reached the
// client, and tries the request on another endpoint: the attempt is released (Finished with
// no usage) and, unless the request already had its MaxRetries, a new decision is made
// without the endpoints its attempts failed on. It returns nil when the request was routed
// again; otherwise the ticket has ended, and the error wraps ErrRetriesExhausted,
// ErrNoEndpoint or a policy's error.
func (t *Ticket) Retry(now time.Time) error {
	l := t.l
	if l == nil {
		return ErrRetriesExhausted
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if t.state == ticketIdle {
		return ErrRetriesExhausted
	}
	l.release(t, Usage{}, now)
	t.failed = append(t.failed, t.endpoint)
	if t.retries >= l.cfg.MaxRetries {
		return ErrRetriesExhausted
	}
	t.retries++
	return l.decide(t, now)
}

// release gives back t's in-flight charge and reports its end. l.mu is held.
func (l *Lifecycle) release(t *Ticket, u Usage, now time.Time) {
	i, ok := t.index, t.gen == l.gen
	if !ok {
		i, ok = l.index[t.endpoint]
	}
	if ok {
		e := &l.snap.Endpoints[i]
		e.InFlight--
		e.InFlightTokens -= t.tokens
	}
	t.state = ticketIdle
	if t.pol.obs != nil {
		t.pol.obs.Finished(t.req, t.endpoint, u, now)
	}
}

// The accessors below are for the goroutine that drives the ticket.

// Decision returns the current (or last) attempt's decision.
func (t *Ticket) Decision() Decision { return t.decision }

// Endpoint returns the ID of the current (or last) attempt's endpoint.
func (t *Ticket) Endpoint() string { return t.endpoint }

// Index returns the current (or last) attempt's endpoint position in the pool it was
// decided on.
func (t *Ticket) Index() int { return t.index }

// Retries returns how many times the request was tried again after a failed attempt.
func (t *Ticket) Retries() int { return t.retries }
