package gateway

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"reflect"
	"time"

	"kvroute/router"
)

// pdPools are a P/D state's backends by role, as indices into state.backends in
// configuration order, and the P/D policy that routes them.
type pdPools struct {
	prefill, decode []int
	refs            [3]PolicyRef // decider, prefill, decode as configured (defaults filled)
	seed            uint64
	policy          router.PDPolicy
	label           string
	prefillNames    map[string]bool // the prefill pool's backend names
}

// policyOf is the policy of the pool backend name is in.
func (p *pdPools) policyOf(name string) router.Policy {
	if p.prefillNames[name] {
		return p.policy.Prefill
	}
	return p.policy.Decode
}

// buildPD fills st.pd from cfg.PD, reusing old's policies when their names, parameters and
// seed are unchanged. Switching between an aggregated and a P/D configuration, or changing
// the decider, takes a restart.
func (g *Gateway) buildPD(st *state, old *state) error {
	cfg := st.cfg
	if old != nil && (old.pd != nil) != cfg.PD.On() {
		return errors.New("gateway: pd.mode: switching between an aggregated and a P/D fleet takes a restart")
	}
	if !cfg.PD.On() {
		return nil
	}
	p := &pdPools{seed: cfg.Seed, label: cfg.PD.Name, prefillNames: map[string]bool{}}
	for i, b := range st.backends {
		if roleOf(cfg.PD.Roles, backendSpec{name: b.name, url: b.url}) == RolePrefill {
			p.prefill = append(p.prefill, i)
			p.prefillNames[b.name] = true
		} else {
			p.decode = append(p.decode, i)
		}
	}
	p.refs = cfg.PD.refs(cfg)
	if p.label == "" {
		p.label = cfg.Policy
	}
	if old != nil && old.pd.seed == p.seed && reflect.DeepEqual(old.pd.refs, p.refs) {
		p.policy = old.pd.policy
		st.pd = p
		return st.tokenizePD()
	}
	if old != nil && !reflect.DeepEqual(old.pd.refs[0], p.refs[0]) {
		return errors.New("gateway: the P/D decider: a change takes a restart")
	}
	var err error
	if p.policy.Decider, err = router.NewDecider(p.refs[0].Name, p.refs[0].Params); err != nil {
		return fmt.Errorf("gateway: decider: %w", err)
	}
	// Seeded as sweep.PolicySpec.BuildPD seeds them, so a sweep's router draws the same.
	if p.policy.Prefill, err = g.opts.Policies.New(p.refs[1].Name, p.refs[1].Params, p.seed); err != nil {
		return fmt.Errorf("gateway: prefill policy: %w", err)
	}
	if p.policy.Decode, err = g.opts.Policies.New(p.refs[2].Name, p.refs[2].Params, p.seed+1<<32); err != nil {
		return fmt.Errorf("gateway: decode policy: %w", err)
	}
	st.pd = p
	return st.tokenizePD()
}

// tokenizePD fills token ids when a stage's policy reads them, as for one policy (build).
func (st *state) tokenizePD() error {
	p := st.pd.policy
	if st.tokenize || !(router.ReadsTokens(p.Prefill) || router.ReadsTokens(p.Decode)) {
		return nil
	}
	if st.cfg.Tokenize.Timeout <= 0 {
		return fmt.Errorf("gateway: a P/D policy reads token ids, filled from the backends' /tokenize: tokenize.timeout %v: want > 0", st.cfg.Tokenize.Timeout)
	}
	st.tokenize = true
	return nil
}

// refs returns the decider and the stages' policies with the defaults filled: the always
// decider, and Config.Policy on a stage left empty.
func (p PDConfig) refs(cfg Config) [3]PolicyRef {
	r := [3]PolicyRef{p.Decider, p.Prefill, p.Decode}
	if r[0].Name == "" {
		r[0] = PolicyRef{Name: "always"}
	}
	for i := 1; i < 3; i++ {
		if r[i].Name == "" {
			r[i] = PolicyRef{Name: cfg.Policy, Params: cfg.PolicyParams}
		}
	}
	return r
}

// pool returns the endpoints of the backends at idx, as a lifecycle knows them.
func (st *state) pool(idx []int) []router.EndpointState {
	eps := make([]router.EndpointState, len(idx))
	for j, i := range idx {
		b := st.backends[i]
		eps[j] = router.EndpointState{ID: b.name, Ready: b.ready}
	}
	return eps
}

// newPD builds the P/D router of st. Gateway.mu is held, or g not yet shared.
func (g *Gateway) newPD(st *state) error {
	pd, err := router.NewPD(st.pd.policy, st.pool(st.pd.prefill), st.pool(st.pd.decode), st.lifecycleConfig())
	if err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	g.pd = pd
	g.pdViews = [2]func([]router.EndpointState){
		func(eps []router.EndpointState) { g.viewPool(eps, g.current.Load().pd.prefill) },
		func(eps []router.EndpointState) { g.viewPool(eps, g.current.Load().pd.decode) },
	}
	return nil
}

// reloadPD puts st's pools and policies in force. Gateway.mu is held.
func (g *Gateway) reloadPD(st *state) error {
	if g.pd == nil {
		return nil
	}
	for _, s := range []struct {
		l   *router.Lifecycle
		idx []int
		p   router.Policy
	}{{g.pd.Prefill, st.pd.prefill, st.pd.policy.Prefill}, {g.pd.Decode, st.pd.decode, st.pd.policy.Decode}} {
		if err := s.l.SetEndpoints(st.pool(s.idx)); err != nil {
			return fmt.Errorf("gateway: %w", err)
		}
		s.l.SetPolicy(s.p)
		_ = s.l.SetConfig(st.lifecycleConfig()) // validated with cfg
	}
	return nil
}

// viewPool sets eps, a pool's endpoints, to what the gateway last scraped of the backends at
// idx. Gateway.mu is held.
func (g *Gateway) viewPool(eps []router.EndpointState, idx []int) {
	bs := g.current.Load().backends
	for j, i := range idx {
		b, e := bs[i], &eps[j]
		e.Models, e.Running, e.Waiting, e.KVUsage = b.models, b.running, b.waiting, b.kvUsage
		e.NumGPUBlocks, e.BlockSize, e.UpdatedAt, e.Prefill = b.numGPUBlocks, b.blockSize, b.updatedAt, b.prefill
	}
}

// reservePD routes c in a P/D fleet: the decode policy picks its decode backend, the decider
// whether it prefills remotely, the prefill policy where. Gateway.mu is held.
func (g *Gateway) reservePD(c *call, now time.Time) (*reservation, error) {
	g.pd.Prefill.Update(g.pdViews[0])
	g.pd.Decode.Update(g.pdViews[1])
	c.ticket = &c.pd.Decode
	if err := g.pd.Decide(&c.pd, c.req, now); err != nil {
		return nil, err
	}
	g.inFlight.Add(1)
	g.metrics.pdDecision(c.pd.Remote, c.pd.Reason)
	if c.pd.Remote {
		c.prefill = g.prefillBackend(c)
	}
	return g.reserved(c), nil
}

// prefillBackend is the backend c's prefill ticket names, its in-flight gauge raised.
// Gateway.mu is held.
func (g *Gateway) prefillBackend(c *call) *backend {
	st := g.current.Load()
	b := st.backends[st.pd.prefill[c.pd.Prefill.Index()]]
	b.inflightGauge.Inc()
	return b
}

// endPrefill ends c's prefill ticket with u, once: the prefill leg answered, failed for
// good, or (sidecar) the decode leg's first byte came or the request ended.
func (c *call) endPrefill(u router.Usage, now time.Time) {
	if c.prefill != nil && c.pd.Prefill.Finish(u, now) {
		c.prefill.inflightGauge.Dec()
	}
}

// hostPort is the host:port of URL u, the port filled from the scheme when absent: what
// llm-d's x-prefiller-host-port header carries.
func hostPort(u *url.URL) string {
	if u.Port() != "" {
		return u.Host
	}
	port := "80"
	if u.Scheme == "https" {
		port = "443"
	}
	return net.JoinHostPort(u.Hostname(), port)
}

// endpointsPD is the lifecycles' view of st's backends, in configuration order. Gateway.mu
// is held.
func (g *Gateway) endpointsPD(st *state) []router.EndpointState {
	eps := make([]router.EndpointState, len(st.backends))
	for _, s := range []struct {
		l   *router.Lifecycle
		idx []int
	}{{g.pd.Prefill, st.pd.prefill}, {g.pd.Decode, st.pd.decode}} {
		for j, e := range s.l.Endpoints() {
			eps[s.idx[j]] = e
		}
	}
	return eps
}

// Headers of the P/D protocols.
const (
	// prefillerHeader names the prefill backend for llm-d's sidecar
	// (llm-d/llm-d-router@ebab6879 pkg/common/routing/common.go:14).
	prefillerHeader = "x-prefiller-host-port"
	// requestIDHeader carries the request id both legs share (vLLM keys the held blocks by
	// it; the toy proxy and llm-d's sidecar send it on both legs).
	requestIDHeader = "X-Request-Id"
)
