package router

import (
	"errors"
	"fmt"
	"time"
)

// PDPolicy routes a fleet split into prefill and decode pools, as vLLM's NIXL two-step
// runs it: a policy picks the decode endpoint, the decider then says whether the request
// prefills on a prefill endpoint (and Prefill picks which) or on its decode endpoint. This
// is llm-d's order: the decode profile runs first, the decider reads its pick, then the
// prefill profile runs (llm-d/llm-d-router v0.10.0 pkg/epp/framework/plugins/scheduling/
// profilehandler/disagg/pd_profile_handler.go:197-235). SGLang's PD router picks a prefill
// and a decode worker independently, prefill first, with no decider
// (sgl-project/sglang@004dcda2 sgl-model-gateway/src/routers/http/pd_router.rs
// select_pd_pair); since neither policy reads the other's pick, this order expresses it.
// Dynamo with a vLLM backend picks the decode worker only after the prefill leg answered
// (ai-dynamo/dynamo docs/design_docs/disagg_serving.md); here both are picked on arrival.
type PDPolicy struct {
	// Prefill picks among the prefill pool; Decode among the decode pool.
	Prefill, Decode Policy
	// Decider says whether a request prefills remotely.
	Decider Decider
}

// Decider decides whether a request is prefilled on a prefill endpoint before it decodes,
// once its decode endpoint is chosen. Implementations are stateless or safe for concurrent
// use, and deterministic.
type Decider interface {
	// Name returns the decider's registry name.
	Name() string
	// Disaggregate reports whether req prefills remotely, and why (for metrics and reports).
	// cached is the number of leading prompt tokens the chosen decode endpoint holds, as its
	// policy's prefix index knows them (PrefixMatcher), or 0 when the decode policy keeps no
	// index.
	Disaggregate(req *Request, cached int) (bool, string)
}

// PrefixMatcher is implemented by policies that index the endpoints' prefix caches.
// MatchedTokens returns how many leading prompt tokens of req endpoint s.Endpoints[i] holds,
// as the index knows them. A Lifecycle calls it right after the Pick that chose i, with the
// same snapshot and before Observer.Routed records the request, as llm-d's P/D decider reads
// the decode profile's prefix scores.
type PrefixMatcher interface {
	MatchedTokens(req *Request, s *Snapshot, i int) int
}

// Reasons a P/D decision records beside its policies' reasons.
const (
	// ReasonNoPrefillPool: the decider asked for a remote prefill but no prefill endpoint
	// was ready, so the decode endpoint prefills (as llm-d runs a request whose prefill
	// profile found no pod).
	ReasonNoPrefillPool = "no-prefill-endpoint"
)

// PD is one router replica's account of a disaggregated fleet: a Lifecycle per pool, each
// deciding with its stage's policy, and the decider between them. The simulator and the
// proxy both drive it.
type PD struct {
	// Prefill and Decode are the pools' lifecycles.
	Prefill, Decode *Lifecycle
	decider         Decider
}

// NewPD returns a P/D router over the prefill and decode pools (unique, non-empty IDs in
// each; a pool may be empty, so every request prefills on its decode endpoint).
func NewPD(p PDPolicy, prefill, decode []EndpointState, cfg LifecycleConfig) (*PD, error) {
	if p.Prefill == nil || p.Decode == nil || p.Decider == nil {
		return nil, errors.New("router: a P/D policy needs a prefill policy, a decode policy and a decider")
	}
	pl, err := NewLifecycle(p.Prefill, prefill, cfg)
	if err != nil {
		return nil, fmt.Errorf("router: prefill pool: %w", err)
	}
	dl, err := NewLifecycle(p.Decode, decode, cfg)
	if err != nil {
		return nil, fmt.Errorf("router: decode pool: %w", err)
	}
	return &PD{Prefill: pl, Decode: dl, decider: p.Decider}, nil
}

// PDTicket is one request's claims in a disaggregated fleet: its decode attempt, which
// lives until the request ends, and its prefill leg's attempt, which lives until the prefill
// leg's answer came back (Prefill.Finish) or it failed (Prefill.Retry). The zero value is
// ready for PD.Decide.
type PDTicket struct {
	// Decode is the request's claim on its decode endpoint.
	Decode Ticket
	// Prefill is the prefill leg's claim; used only when Remote.
	Prefill Ticket
	// Remote reports whether the request prefills on a prefill endpoint.
	Remote bool
	// Cached is what the decider was told the decode endpoint holds.
	Cached int
	// Reason is the decider's reason, or ReasonNoPrefillPool.
	Reason string
	// leg is the prefill leg's request: the client's, limited to one output token.
	leg Request
}

// Decide routes req: the decode policy picks its decode endpoint, the decider reads what
// that endpoint holds and, when it says so, the prefill policy picks a prefill endpoint. The
// decode attempt is charged the request's prompt and output tokens; the prefill attempt its
// prompt and one output token (the prefill leg's max_tokens 1). t must be idle. On an error
// nothing is charged.
func (p *PD) Decide(t *PDTicket, req *Request, now time.Time) error {
	if t.Decode.state != ticketIdle || t.Prefill.state != ticketIdle {
		panic("router: PD.Decide on a ticket still in flight")
	}
	cached, err := p.Decode.decideMatched(&t.Decode, req, now)
	if err != nil {
		return err
	}
	t.Cached = cached
	t.Remote, t.Reason = p.decider.Disaggregate(req, cached)
	if !t.Remote {
		return nil
	}
	t.leg = *req
	t.leg.MaxOutputTokens = 1
	if err := p.Prefill.Decide(&t.Prefill, &t.leg, now); err != nil {
		if !errors.Is(err, ErrNoEndpoint) {
			t.Decode.Finish(Usage{}, now)
			return err
		}
		t.Remote, t.Reason = false, ReasonNoPrefillPool
	}
	return nil
}

// decideMatched is Decide that also asks the policy, between its Pick and Routed, how many
// prompt tokens the chosen endpoint holds (0 when the policy is no PrefixMatcher).
func (l *Lifecycle) decideMatched(t *Ticket, req *Request, now time.Time) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	*t = Ticket{l: l, req: req, failed: t.failed[:0]}
	d, err := l.pick(t, now)
	if err != nil {
		return 0, err
	}
	cached := 0
	if l.pol.pm != nil {
		cached = l.pol.pm.MatchedTokens(req, &l.snap, d.Index)
	}
	l.route(t, d, now)
	return cached, nil
}
