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

// pdSetup is a P/D state's P/D policy, as configured; its pools are state.pools'
// decodePool and prefillPool.
type pdSetup struct {
	refs         [3]PolicyRef // decider, prefill, decode as configured (defaults filled)
	seed         uint64
	policy       router.PDPolicy
	label        string
	prefillNames map[string]bool // the prefill pool's backend names
}

// policyOf is the policy of the pool backend name is in.
func (p *pdSetup) policyOf(name string) router.Policy {
	if p.prefillNames[name] {
		return p.policy.Prefill
	}
	return p.policy.Decode
}

// buildPD fills st.pd and st.pools from cfg.PD, reusing old's policies when their names,
// parameters and seed are unchanged; an aggregated configuration has one pool of every
// backend. Switching between an aggregated and a P/D configuration, or changing the decider,
// takes a restart.
func (g *Gateway) buildPD(st *state, old *state) error {
	cfg := st.cfg
	if old != nil && (old.pd != nil) != cfg.PD.On() {
		return errors.New("gateway: pd.mode: switching between an aggregated and a P/D fleet takes a restart")
	}
	if !cfg.PD.On() {
		st.pools = st.aggregatedPools()
		return nil
	}
	p := &pdSetup{seed: cfg.Seed, label: cfg.PD.Name, prefillNames: map[string]bool{}}
	var prefill, decode []int
	for i, b := range st.backends {
		if roleOf(cfg.PD.Roles, backendSpec{name: b.name, url: b.url}) == RolePrefill {
			prefill = append(prefill, i)
			p.prefillNames[b.name] = true
		} else {
			decode = append(decode, i)
		}
	}
	p.refs = cfg.PD.refs(cfg)
	if p.label == "" {
		p.label = cfg.Policy
	}
	if old != nil && old.pd.seed == p.seed && reflect.DeepEqual(old.pd.refs, p.refs) {
		p.policy = old.pd.policy
	} else if err := g.newPDPolicy(p, old); err != nil {
		return err
	}
	st.pd = p
	st.pools = []pool{decodePool: {decode, p.policy.Decode}, prefillPool: {prefill, p.policy.Prefill}}
	return st.tokenizePD()
}

// newPDPolicy builds p's P/D policy from p.refs. A decider other than old's takes a restart.
func (g *Gateway) newPDPolicy(p *pdSetup, old *state) error {
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
	return nil
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

// reservePD routes c in a P/D fleet: the decode policy picks its decode backend, the decider
// whether it prefills remotely, the prefill policy where. Gateway.mu is held.
func (g *Gateway) reservePD(c *call, now time.Time) (*reservation, error) {
	g.refresh(prefillPool)
	g.refresh(decodePool)
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
	b := g.current.Load().backendAt(prefillPool, c.pd.Prefill.Index())
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

// Headers of the P/D protocols.
const (
	// prefillerHeader names the prefill backend for llm-d's sidecar
	// (llm-d/llm-d-router@ebab6879 pkg/common/routing/common.go:14).
	prefillerHeader = "x-prefiller-host-port"
	// requestIDHeader carries the request id both legs share (vLLM keys the held blocks by
	// it; the toy proxy and llm-d's sidecar send it on both legs).
	requestIDHeader = "X-Request-Id"
)
