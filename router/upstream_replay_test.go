package router_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"kvroute/router"
	"kvroute/router/prefix"
)

// replay drives one policy through a router.Lifecycle over a case's history, as the
// simulator and the proxy drive it: decisions, first tokens, ends, retries and pool changes
// through the lifecycle, KV events straight to the policy (as both drivers deliver them).
type replay struct {
	t       *testing.T
	p       router.Policy
	lc      *router.Lifecycle
	kv      router.KVEventObserver
	tickets map[string]*router.Ticket
}

// unseen stands in for whatever routed the requests in flight when a case starts.
type unseen struct{}

func (unseen) Name() string { return "unseen" }
func (unseen) Pick(*router.Request, *router.Snapshot) (router.Decision, error) {
	return router.Decision{}, errors.New("unseen: does not decide")
}

func runCase(t *testing.T, p router.Policy, tc upstreamCase) string {
	t.Helper()
	r := newReplay(t, p, tc.Endpoints)
	for k, ev := range tc.History {
		if err := r.apply(ev); err != nil {
			t.Fatalf("history event %d: %v", k, err)
		}
	}
	var tk router.Ticket
	if err := r.lc.Decide(&tk, tc.Request.request(), upstreamEpoch.Add(tc.At.D())); err != nil {
		t.Fatalf("Decide: %v", err)
	}
	return tk.Endpoint()
}

// newReplay returns a lifecycle over eps with each endpoint's InFlight requests charged by a
// policy p never hears from, and p deciding from then on.
func newReplay(t *testing.T, p router.Policy, eps []caseEndpoint) *replay {
	t.Helper()
	lc, err := router.NewLifecycle(unseen{}, endpointStates(eps), router.LifecycleConfig{MaxRetries: router.DefaultMaxRetries})
	if err != nil {
		t.Fatal(err)
	}
	return replayOn(t, p, lc, eps)
}

// replayOn charges each endpoint of eps its InFlight requests on lc, which must be deciding
// with unseen, then hands lc to p.
func replayOn(t *testing.T, p router.Policy, lc *router.Lifecycle, eps []caseEndpoint) *replay {
	t.Helper()
	for _, e := range eps {
		for k := range e.InFlight {
			req := &router.Request{ID: fmt.Sprintf("in-flight-%s-%d", e.ID, k)}
			if err := lc.Assign(new(router.Ticket), req, e.ID, upstreamEpoch); err != nil {
				t.Fatal(err)
			}
		}
	}
	lc.SetPolicy(p)
	r := &replay{t: t, p: p, lc: lc, tickets: map[string]*router.Ticket{}}
	r.kv, _ = p.(router.KVEventObserver)
	return r
}

func endpointStates(eps []caseEndpoint) []router.EndpointState {
	out := make([]router.EndpointState, len(eps))
	for i, e := range eps {
		out[i] = router.EndpointState{ID: e.ID, Ready: !e.NotReady, UpdatedAt: upstreamEpoch}
		observe(&out[i], e)
	}
	return out
}

// observe sets the fields a driver observes (scrapes) of an endpoint.
func observe(s *router.EndpointState, e caseEndpoint) {
	s.Models, s.Running, s.Waiting, s.KVUsage = e.Models, e.Running, e.Waiting, e.KVUsage
	s.NumGPUBlocks, s.BlockSize = e.NumGPUBlocks, e.BlockSize
}

// apply replays one history event.
func (r *replay) apply(ev caseEvent) error {
	now := upstreamEpoch.Add(ev.At.D())
	switch {
	case ev.Request != nil:
		return r.route(ev, now)
	case ev.FirstToken != "":
		return r.ticket(ev.FirstToken, func(tk *router.Ticket) error { tk.FirstToken(now); return nil })
	case ev.Finished != "":
		u := router.Usage(ev.Usage)
		return r.ticket(ev.Finished, func(tk *router.Ticket) error { return r.finish(tk, ev.To, u, now) })
	case ev.Aborted != "":
		return r.ticket(ev.Aborted, func(tk *router.Ticket) error { return r.finish(tk, ev.To, router.Usage{}, now) })
	case ev.Retry != "":
		return r.ticket(ev.Retry, func(tk *router.Ticket) error { return r.retry(tk, ev.To, now) })
	case ev.Eject != "":
		return r.must(r.lc.Eject(ev.Eject), "eject %s: not a ready endpoint", ev.Eject)
	case ev.Readmit != "":
		return r.must(r.lc.Readmit(ev.Readmit), "readmit %s: not an ejected endpoint", ev.Readmit)
	case ev.Remove != "":
		return r.remove(ev.Remove)
	case len(ev.Endpoints) > 0:
		return r.setEndpoints(ev.Endpoints)
	case ev.Cleared || len(ev.Stored)+len(ev.Removed)+len(ev.StoredTokens)+len(ev.RemovedTokens) > 0:
		return r.kvEvent(ev)
	}
	return fmt.Errorf("%+v: no event", ev)
}

func (r *replay) must(ok bool, format string, args ...any) error {
	if !ok {
		return fmt.Errorf(format, args...)
	}
	return nil
}

// route routes ev.Request: to ev.To, or as the policy decides.
func (r *replay) route(ev caseEvent, now time.Time) error {
	req := ev.Request.request()
	if _, dup := r.tickets[req.ID]; dup || req.ID == "" {
		return fmt.Errorf("request id %q: empty or used twice", req.ID)
	}
	tk := new(router.Ticket)
	r.tickets[req.ID] = tk
	if !ev.Decide {
		return r.lc.Assign(tk, req, ev.To, now)
	}
	if err := r.lc.Decide(tk, req, now); err != nil {
		return err
	}
	return r.at(tk, ev.To)
}

// at checks that tk's attempt is on endpoint want, when want is set.
func (r *replay) at(tk *router.Ticket, want string) error {
	if want != "" && tk.Endpoint() != want {
		return fmt.Errorf("request routed to %s, the case says %s", tk.Endpoint(), want)
	}
	return nil
}

func (r *replay) ticket(id string, fn func(*router.Ticket) error) error {
	tk, ok := r.tickets[id]
	if !ok {
		return fmt.Errorf("request %q was never routed", id)
	}
	return fn(tk)
}

func (r *replay) finish(tk *router.Ticket, at string, u router.Usage, now time.Time) error {
	if err := r.at(tk, at); err != nil {
		return err
	}
	return r.must(tk.Finish(u, now), "request on %s already ended", tk.Endpoint())
}

func (r *replay) retry(tk *router.Ticket, to string, now time.Time) error {
	if err := tk.Retry(now); err != nil {
		return err
	}
	return r.at(tk, to)
}

// remove takes endpoint id out of the pool.
func (r *replay) remove(id string) error {
	eps := r.lc.Endpoints()
	n := len(eps)
	eps = slices.DeleteFunc(eps, func(e router.EndpointState) bool { return e.ID == id })
	if len(eps) == n {
		return fmt.Errorf("remove %s: not in the pool", id)
	}
	return r.lc.SetEndpoints(eps)
}

// setEndpoints makes eps the pool, with their observed fields and readiness.
func (r *replay) setEndpoints(eps []caseEndpoint) error {
	states := endpointStates(eps)
	if err := r.lc.SetEndpoints(states); err != nil {
		return err
	}
	r.lc.Update(func(cur []router.EndpointState) {
		for i := range cur {
			observe(&cur[i], eps[i])
		}
	})
	for i, e := range r.lc.Endpoints() {
		switch want := states[i].Ready; {
		case want && !e.Ready:
			r.lc.Readmit(e.ID)
		case !want && e.Ready:
			r.lc.Eject(e.ID)
		}
	}
	return nil
}

// kvEvent reports ev's blocks to the policy, if it reads KV events, as stored or removed on
// ev.To in tier ev.Medium.
func (r *replay) kvEvent(ev caseEvent) error {
	if r.kv == nil {
		return fmt.Errorf("%s reads no KV events", r.p.Name())
	}
	if ev.Cleared {
		r.kv.AllBlocksCleared(ev.To)
		return nil
	}
	medium, bs := ev.Medium, ev.BlockSize
	if medium == "" {
		medium = router.MediumGPU
	}
	if bs == 0 {
		bs = 16
	}
	salt := prefix.ModelSalt(ev.Model)
	before := prefix.AppendTokenBlockHashes(nil, salt, ev.ParentTokens, bs)
	tail := func(toks []int32) []uint64 { // the blocks of toks after ParentTokens'
		all := prefix.AppendTokenBlockHashes(nil, salt, append(slices.Clone(ev.ParentTokens), toks...), bs)
		return all[len(before):]
	}
	if stored := append(slices.Clone(ev.Stored), tail(ev.StoredTokens)...); len(stored) > 0 {
		var parent uint64
		if len(before) > 0 {
			parent = before[len(before)-1]
		}
		router.StoreBlocks(r.kv, ev.To, stored, parent, len(before) > 0, medium)
	}
	for _, h := range append(slices.Clone(ev.Removed), tail(ev.RemovedTokens)...) {
		r.kv.BlockRemoved(ev.To, h, medium)
	}
	return nil
}
