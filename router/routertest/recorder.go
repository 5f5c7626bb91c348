package routertest

import (
	"fmt"
	"sync"
	"time"

	"kvroute/router"
)

// Call is one call a Recorder saw: a decision or an observer call, in the order made.
type Call struct {
	// Kind is "pick", "routed", "first-token", "finished" or "removed".
	Kind string
	// Request is the request's ID ("" for removed).
	Request string
	// Endpoint is the endpoint's ID (for pick, the one chosen; "" when Pick failed).
	Endpoint string
	// Reason is the decision's reason (pick and routed only).
	Reason string
	// Usage is what finished reported.
	Usage router.Usage
}

func (c Call) String() string {
	s := fmt.Sprintf("%s %s %s", c.Kind, c.Request, c.Endpoint)
	if c.Reason != "" {
		s += " " + c.Reason
	}
	if c.Usage != (router.Usage{}) {
		s += fmt.Sprintf(" %+v", c.Usage)
	}
	return s
}

// Recorder wraps a policy and records every decision and observer call it gets, passing
// each on to the policy when it implements the matching interface. It is what a lifecycle
// conformance test compares between two drivers. It passes on no KV events: they do not go
// through the lifecycle, and a policy that reads them decides without them.
type Recorder struct {
	Policy router.Policy

	mu    sync.Mutex
	calls []Call
}

var (
	_ router.Policy             = (*Recorder)(nil)
	_ router.Observer           = (*Recorder)(nil)
	_ router.FirstTokenObserver = (*Recorder)(nil)
)

// NewRecorder returns a recorder around p.
func NewRecorder(p router.Policy) *Recorder { return &Recorder{Policy: p} }

// Calls returns the calls recorded so far.
func (r *Recorder) Calls() []Call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Call(nil), r.calls...)
}

func (r *Recorder) add(c Call) {
	r.mu.Lock()
	r.calls = append(r.calls, c)
	r.mu.Unlock()
}

// Name returns the wrapped policy's name.
func (r *Recorder) Name() string { return r.Policy.Name() }

// Pick records the wrapped policy's decision.
func (r *Recorder) Pick(req *router.Request, s *router.Snapshot) (router.Decision, error) {
	d, err := r.Policy.Pick(req, s)
	c := Call{Kind: "pick", Request: req.ID}
	if err == nil && d.Index >= 0 && d.Index < len(s.Endpoints) {
		c.Endpoint, c.Reason = s.Endpoints[d.Index].ID, d.Reason
	}
	r.add(c)
	return d, err
}

// Routed records the call and passes it on.
func (r *Recorder) Routed(req *router.Request, d router.Decision, endpoint string, now time.Time) {
	r.add(Call{Kind: "routed", Request: req.ID, Endpoint: endpoint, Reason: d.Reason})
	if o, ok := r.Policy.(router.Observer); ok {
		o.Routed(req, d, endpoint, now)
	}
}

// FirstToken records the call and passes it on.
func (r *Recorder) FirstToken(req *router.Request, endpoint string, now time.Time) {
	r.add(Call{Kind: "first-token", Request: req.ID, Endpoint: endpoint})
	if o, ok := r.Policy.(router.FirstTokenObserver); ok {
		o.FirstToken(req, endpoint, now)
	}
}

// Finished records the call and passes it on.
func (r *Recorder) Finished(req *router.Request, endpoint string, u router.Usage, now time.Time) {
	r.add(Call{Kind: "finished", Request: req.ID, Endpoint: endpoint, Usage: u})
	if o, ok := r.Policy.(router.Observer); ok {
		o.Finished(req, endpoint, u, now)
	}
}

// Removed records the call and passes it on.
func (r *Recorder) Removed(endpoint string) {
	r.add(Call{Kind: "removed", Endpoint: endpoint})
	if o, ok := r.Policy.(router.Observer); ok {
		o.Removed(endpoint)
	}
}

// ReadsTokens reports whether the wrapped policy reads token ids, so that a driver fills
// them for the recorder as it would for the policy.
func (r *Recorder) ReadsTokens() bool { return router.ReadsTokens(r.Policy) }

// TextFree reports whether the wrapped policy never reads text.
func (r *Recorder) TextFree() bool { return !router.ReadsText(r.Policy) }
