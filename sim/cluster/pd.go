package cluster

import (
	"errors"
	"fmt"
	"time"

	"kvroute/results"
	"kvroute/router"
	"kvroute/sim"
	"kvroute/sim/engine"
	"kvroute/workloads"
)

// A fleet split into prefill and decode pools, routed by router.PD and run as vLLM's NIXL
// two-step runs it (vllm-project/vllm@030ea52e tests/v1/kv_connector/nixl_integration/
// toy_proxy_server.py): the prefill leg (the request with max_tokens 1) on a prefill
// replica, its answer back at the router, then the decode leg on the decode replica, which
// reads the prompt's KV from the prefill replica (the transfer, over the replicas' NICs:
// pdlink.go) and streams the answer. The engine runs each leg (engine.PDPrefill,
// engine.PDDecode).

// Role is a replica's pool in a split fleet.
type Role uint8

// The pools of a split fleet.
const (
	RolePrefill Role = iota + 1
	RoleDecode
)

// KVTransfer prices the KV transfers of a split fleet.
type KVTransfer struct {
	// Gbps is each GPU's NIC in Gbit/s per direction; a replica of TP GPUs has TP of them,
	// which its transfers use together (gpumodel.Deployment.TransferBandwidth). 0: each
	// replica's GPU's NIC from the catalog.
	Gbps float64
	// BaseLatency is the fixed cost of one transfer, before its bytes move.
	BaseLatency time.Duration
}

func (c Config) disaggregated() bool { return len(c.Roles) > 0 }

// validatePD checks the P/D part of c.
func (c Config) validatePD() error {
	if !c.disaggregated() {
		return nil
	}
	var errs []error
	if len(c.Roles) != len(c.Replicas) {
		errs = append(errs, fmt.Errorf("cluster: %d roles for %d replicas", len(c.Roles), len(c.Replicas)))
	}
	n := map[Role]int{}
	for _, r := range c.Roles {
		n[r]++
	}
	if n[RolePrefill] == 0 || n[RoleDecode] == 0 || n[RolePrefill]+n[RoleDecode] != len(c.Roles) {
		errs = append(errs, errors.New("cluster: a split fleet needs prefill and decode replicas, and no other role"))
	}
	if !(c.KVTransfer.Gbps >= 0) || c.KVTransfer.BaseLatency < 0 {
		errs = append(errs, fmt.Errorf("cluster: kv transfer bandwidth %v Gbit/s, base latency %v: want >= 0",
			c.KVTransfer.Gbps, c.KVTransfer.BaseLatency))
	}
	return errors.Join(errs...)
}

// pdFlight is what a request in a split fleet carries beyond a flight.
type pdFlight struct {
	t       router.PDTicket
	leg     *engine.Request // the prefill leg, a new one per attempt
	prefill int             // the replica running (or that ran) the prefill leg
	refused bool            // the prefill replica was down when the leg reached it
	retries int             // the prefill leg's retries that found an endpoint (its ticket also counts one that found none)
	cached  int             // the prefill leg's prefix-cache hit
	xfer    time.Duration   // how long the read took
	gen     uint64          // bumped when the flight is reused: a late read end is void
	failed  bool            // the read failed and the decode leg was aborted for it
}

// pdSim is a split fleet's state.
type pdSim struct {
	pools [2][]int // the replicas of the prefill pool and of the decode pool, in order
	links *links
}

// NewPD returns a simulation of cfg's split fleet (cfg.Roles set) behind len(policies)
// router replicas, each routing both pools with its own P/D policy.
func NewPD(cfg Config, policies []router.PDPolicy, stream *workloads.Stream, sink Sink) (*Sim, error) {
	if !cfg.disaggregated() {
		return nil, errors.New("cluster: NewPD needs a split fleet (Config.Roles)")
	}
	if len(policies) != cfg.Routers.count() {
		return nil, fmt.Errorf("cluster: %d policies for %d routers", len(policies), cfg.Routers.count())
	}
	rt := make([]*routerInst, len(policies))
	for i, p := range policies {
		rt[i] = newRouterInst(p.Decode)
		rt[i].pre = newRouterInst(p.Prefill)
	}
	s, eps, err := newSim(cfg, rt, stream, sink)
	if err != nil {
		return nil, err
	}
	s.pd = &pdSim{}
	nic := make([]float64, len(s.reps))
	for i, rc := range cfg.Replicas {
		p := 0
		if cfg.Roles[i] == RoleDecode {
			p = 1
		}
		s.pd.pools[p] = append(s.pd.pools[p], i)
		nic[i] = rc.Deployment.TransferBandwidth(cfg.KVTransfer.Gbps)
	}
	s.pd.links = newLinks(s.k, nic)
	lcfg := router.LifecycleConfig{MaxRetries: cfg.MaxRetries}
	for k, p := range policies {
		pd, err := router.NewPD(p, pick(eps, s.pd.pools[0]), pick(eps, s.pd.pools[1]), lcfg)
		if err != nil {
			return nil, fmt.Errorf("cluster: %w", err)
		}
		s.rt[k].pdr, s.rt[k].lc, s.rt[k].pre.lc = pd, pd.Decode, pd.Prefill
		s.rt[k].scrape, s.rt[k].pre.scrape = s.scraper(s.pd.pools[1]), s.scraper(s.pd.pools[0])
	}
	return s, nil
}

// pick returns eps[i] for each i of idx.
func pick(eps []router.EndpointState, idx []int) []router.EndpointState {
	out := make([]router.EndpointState, len(idx))
	for j, i := range idx {
		out[j] = eps[i]
	}
	return out
}

// dispatchPD routes f through its router's P/D lifecycles: the decode endpoint, then, when
// the decider says so, the prefill leg on a prefill endpoint.
func (s *Sim) dispatchPD(f *flight, now sim.Time) {
	ri := s.rt[f.router]
	t := &f.pd.t
	if err := ri.pdr.Decide(t, &f.rreq, s.wall(now)); err != nil {
		s.finish(f, now, results.StatusRejected, err.Error())
		return
	}
	f.reason = t.Decode.Decision().Reason
	if !t.Remote {
		s.send(f, now)
		return
	}
	s.sendLeg(f, now)
}

// sendLeg sends f's prefill leg to the prefill endpoint its ticket names, after the network
// delay.
func (s *Sim) sendLeg(f *flight, now sim.Time) {
	p := f.pd
	p.prefill = s.pd.pools[0][p.t.Prefill.Decision().Index]
	p.leg = &engine.Request{ID: f.ereq.ID, Prompt: f.ereq.Prompt, OutputTokens: 1, Salt: f.ereq.Salt,
		PD: engine.PDPrefill, Tag: f}
	leg, rep := p.leg, s.reps[p.prefill]
	submit := func(sim.Time) {
		p.refused = rep.Down()
		rep.Submit(leg)
	}
	if s.cfg.NetworkDelay == 0 {
		submit(now)
		return
	}
	s.k.Schedule(now+sim.Time(s.cfg.NetworkDelay), 1, submit)
}

// legDone handles a prefill leg's result, after the network delay back to the router.
func (s *Sim) legDone(res engine.Result) {
	f := res.Request.Tag.(*flight)
	f.preemptions += res.Preemptions
	gen := f.pd.gen
	back := func(now sim.Time) {
		if f.pd.gen == gen {
			s.legAnswered(f, res, now)
		}
	}
	if s.cfg.NetworkDelay == 0 {
		back(res.Finish)
		return
	}
	s.k.Schedule(res.Finish+sim.Time(s.cfg.NetworkDelay), 1, back)
}

// legAnswered ends the prefill leg's attempt: answered, the decode leg goes to its decode
// replica; aborted by a replica failure, the leg is retried under the failure rule (its
// retries exhausted, the request fails; no prefill endpoint left, the decode replica
// prefills); rejected, the request is.
func (s *Sim) legAnswered(f *flight, res engine.Result, now sim.Time) {
	p := f.pd
	switch res.Status {
	case engine.Completed:
		if s.rt[f.router].pre.ft {
			p.t.Prefill.FirstToken(s.wall(now))
		}
		p.t.Prefill.Finish(router.Usage{PromptTokens: res.PromptTokens, CachedTokens: res.CachedTokens, CompletionTokens: 1}, s.wall(now))
		p.cached = res.CachedTokens
		f.ereq.PD = engine.PDDecode
		s.send(f, now)
	case engine.Aborted:
		err := s.retryOn(s.rt[f.router].pre.lc, &p.t.Prefill, p.prefill, p.refused, now)
		switch {
		case err == nil:
			p.retries++
			f.retries = p.retries + f.tk().Retries()
			s.sendLeg(f, now)
		case errors.Is(err, router.ErrRetriesExhausted):
			p.t.Decode.Finish(router.Usage{}, s.wall(now))
			s.finish(f, now, results.StatusFailed, "prefill replica failed; retries exhausted")
		default:
			p.leg = nil
			s.send(f, now) // no prefill endpoint: the decode replica prefills
		}
	default:
		p.t.Decode.Finish(router.Usage{}, s.wall(now))
		s.finish(f, now, results.StatusRejected, "prompt exceeds the prefill replica's KV cache")
	}
}

// remoteRead starts decode leg req's read of tokens prompt tokens from its prefill replica
// to replica to: after the base latency its bytes join the NICs' traffic.
func (s *Sim) remoteRead(to int, req *engine.Request, tokens int) {
	f := req.Tag.(*flight)
	p, start := f.pd, s.k.Now()
	from, leg, gen := p.prefill, p.leg, p.gen
	bytes := s.cfg.Replicas[to].Deployment.KVTransferBytes(tokens)
	end := func(now sim.Time) {
		// The read succeeds only if the prefill replica still held the blocks: not failed
		// since its leg ended, nor past the abort timeout.
		ok := s.reps[from].ReleaseHeld(leg)
		if p.gen != gen || req.PD != engine.PDDecode {
			return // the request ended, or is retried whole elsewhere
		}
		p.xfer = (now - start).Duration()
		p.failed = !ok
		s.reps[to].RemoteKVDone(req, ok)
	}
	s.k.Schedule(start+sim.Time(s.cfg.KVTransfer.BaseLatency), 1, func(now sim.Time) {
		s.pd.links.start(now, from, to, bytes, end)
	})
}

// resetPD readies f's P/D state for a new request; a late event of its last one is void.
func (f *flight) resetPD() {
	if f.pd == nil {
		f.pd = new(pdFlight)
	}
	gen := f.pd.gen + 1
	*f.pd = pdFlight{gen: gen}
}
