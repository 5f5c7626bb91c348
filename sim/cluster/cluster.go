package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"kvroute/gpumodel"
	"kvroute/internal/spares"
	"kvroute/results"
	"kvroute/router"
	"kvroute/router/prefix"
	"kvroute/sim"
	"kvroute/sim/engine"
	"kvroute/workloads"
)

// Sink receives what a simulation produces.
type Sink struct {
	// Record is called once per request, when it reaches its terminal state. Required. The
	// record is valid only during the call (the simulation reuses it): copy what you keep.
	Record func(*results.Record)
	// ITL, when set, is called at the end of each replica step with the step's duration and
	// the number of sequences that got their next token in it (each token's inter-token
	// latency is the step's duration).
	ITL func(d time.Duration, tokens int)
}

// Epoch is the wall-clock instant virtual time 0 maps to in router snapshots.
var Epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Sim is one simulation run.
type Sim struct {
	cfg    Config
	k      *sim.Kernel
	rt     []*routerInst // router replicas
	ids    []string      // the endpoints' ids, by replica
	stream *workloads.Stream
	sink   Sink
	reps   []*engine.Replica
	salt   uint64
	open   []*kvBatch // per replica: the BlockStored event being collected, if any
	// batching is whether some router's policy takes KV events whole.
	batching bool

	arrivalEv     sim.EventID
	arrivalAt     sim.Time
	arrivalFn     func(sim.Time) // s.onArrival and s.tick, bound once
	tickFn        func(sim.Time)
	scraping      bool
	active        int // requests taken from the stream and not yet terminal
	taken         int
	ended         int
	rec           results.Record      // the record handed to the sink, reused
	spare         spares.List[flight] // ended flights, for newFlight
	scraped       []engine.Metrics    // scrape's scratch: each replica's metrics
	failedScrapes []int               // per replica: consecutive scrapes it did not answer
	ejected       []bool              // per replica: some router ejected it; a good scrape re-admits it
	scrapedAt     time.Time
	pd            *pdSim // a split fleet's pools and links, or nil
}

// flight is one request's journey through the router and the fleet.
type flight struct {
	wreq   workloads.Request
	rreq   router.Request
	ereq   engine.Request
	ticket router.Ticket // its claim on an endpoint, through its router's lifecycle
	pd     *pdFlight     // in a split fleet: its P/D tickets and legs (pd.go)
	journey
}

// tk is f's claim on the endpoint that answers the client: its ticket, or in a split fleet
// its decode ticket.
func (f *flight) tk() *router.Ticket {
	if f.pd != nil {
		return &f.pd.t.Decode
	}
	return &f.ticket
}

// journey is what a flight learns on its way, reset as one for a reused flight.
type journey struct {
	arrival     sim.Time
	endpoint    int
	router      int // the router replica that routed it
	reason      string
	retries     int
	refused     bool // its replica was down when the attempt reached it
	firstToken  sim.Time
	preemptions int
	cached      int
	cpuCached   int // the part of cached loaded from a CPU KV tier
}

// routerInst is one router replica: the lifecycle of the requests it routes, with its own
// view of the fleet (scraped fields shared, in-flight counters its own), and its policy's KV
// event observer, if any.
type routerInst struct {
	lc    *router.Lifecycle
	kv    router.KVEventObserver
	batch router.KVEventBatchObserver // kv, when it takes BlockStored events whole
	ft    bool                        // the policy hears first tokens
	// In a split fleet: the P/D router (lc is its decode lifecycle, the fields above its
	// decode policy's) and the prefill pool's lifecycle and policy's observers.
	pdr *router.PD
	pre *routerInst
	// scrape applies the last scrape to lc's endpoints (Sim.applyScrape over lc's replicas).
	scrape func([]router.EndpointState)
}

// newRouterInst returns a router replica's account of policy p's observers.
func newRouterInst(p router.Policy) *routerInst {
	ri := &routerInst{}
	ri.kv, _ = p.(router.KVEventObserver)
	ri.batch, _ = p.(router.KVEventBatchObserver)
	_, ri.ft = p.(router.FirstTokenObserver)
	return ri
}

// observers returns the router replica's observers of replica i's pool.
func (s *Sim) observers(ri *routerInst, i int) *routerInst {
	if ri.pre != nil && s.cfg.Roles[i] == RolePrefill {
		return ri.pre
	}
	return ri
}

// New returns a simulation of cfg's fleet routed by policy, fed by stream: one router.
func New(cfg Config, policy router.Policy, stream *workloads.Stream, sink Sink) (*Sim, error) {
	if cfg.Routers.count() != 1 {
		return nil, fmt.Errorf("cluster: %d routers need NewRouters", cfg.Routers.count())
	}
	return NewRouters(cfg, []router.Policy{policy}, stream, sink)
}

// NewRouters returns a simulation of cfg's fleet behind len(policies) router replicas
// (cfg.Routers.Count of them), each with its own policy instance and state.
func NewRouters(cfg Config, policies []router.Policy, stream *workloads.Stream, sink Sink) (*Sim, error) {
	if cfg.disaggregated() {
		return nil, errors.New("cluster: a split fleet needs NewPD")
	}
	if len(policies) != cfg.Routers.count() {
		return nil, fmt.Errorf("cluster: %d policies for %d routers", len(policies), cfg.Routers.count())
	}
	rt := make([]*routerInst, len(policies))
	for i, p := range policies {
		rt[i] = newRouterInst(p)
	}
	s, eps, err := newSim(cfg, rt, stream, sink)
	if err != nil {
		return nil, err
	}
	lcfg := router.LifecycleConfig{MaxRetries: cfg.MaxRetries}
	all := make([]int, len(eps))
	for i := range all {
		all[i] = i
	}
	for k, p := range policies {
		lc, err := router.NewLifecycle(p, eps, lcfg)
		if err != nil {
			return nil, fmt.Errorf("cluster: %w", err)
		}
		s.rt[k].lc, s.rt[k].scrape = lc, s.scraper(all)
	}
	return s, nil
}

// newSim returns a simulation of cfg's fleet behind router replicas rt, whose lifecycles
// the caller adds, and the endpoints' initial states.
func newSim(cfg Config, rt []*routerInst, stream *workloads.Stream, sink Sink) (*Sim, []router.EndpointState, error) {
	if err := cfg.Validate(); err != nil {
		return nil, nil, err
	}
	if sink.Record == nil {
		return nil, nil, errors.New("cluster: sink has no Record function")
	}
	s := &Sim{cfg: cfg, k: sim.NewKernel(), stream: stream, sink: sink, arrivalAt: sim.Never, rt: rt}
	s.arrivalFn, s.tickFn = s.onArrival, s.tick
	for _, ri := range rt { // before the replicas: their hooks ask who reads KV events
		s.batching = s.batching || ri.batch != nil || ri.pre != nil && ri.pre.batch != nil
	}
	s.salt = prefix.ModelSalt(cfg.Model) // the routers' salt: their keys are the engine's
	// One hash memo for the fleet: a conversation's next turn reuses its history's block
	// hashes whichever replica it lands on.
	memo := engine.NewHashMemo(256 * len(cfg.Replicas))
	var eps []router.EndpointState
	for i, rc := range cfg.Replicas {
		rc.Memo = memo
		rep, err := engine.New(s.k, rc, s.hooks(i))
		if err != nil {
			return nil, nil, fmt.Errorf("cluster: replica %d: %w", i, err)
		}
		s.reps = append(s.reps, rep)
		m := rep.Metrics()
		pp, err := gpumodel.NewPrefillPredictor(rc.Deployment)
		if err != nil {
			return nil, nil, fmt.Errorf("cluster: replica %d: %w", i, err)
		}
		s.ids = append(s.ids, EndpointID(i))
		s.failedScrapes, s.ejected = append(s.failedScrapes, 0), append(s.ejected, false)
		eps = append(eps, router.EndpointState{
			ID: s.ids[i], Ready: true, Models: []string{cfg.Model},
			NumGPUBlocks: m.NumGPUBlocks, BlockSize: m.BlockSize, UpdatedAt: Epoch, Prefill: pp,
		})
	}
	return s, eps, nil
}

// EndpointID is the id replica i is known by to the routers: "replica-<i>". The emulator
// names its replicas the same way, and cmd/route takes them as the backends' names.
func EndpointID(i int) string { return fmt.Sprintf("replica-%d", i) }

func (s *Sim) hooks(i int) engine.Hooks {
	h := engine.Hooks{
		FirstToken: func(r *engine.Request, at sim.Time) {
			if r.PD == engine.PDPrefill {
				return // the prefill leg's token is not the client's (legAnswered)
			}
			f := r.Tag.(*flight)
			f.firstToken = at + sim.Time(s.cfg.NetworkDelay)
			if s.rt[f.router].ft {
				s.firstTokenBack(f, at)
			}
		},
		Done: s.replicaDone,
	}
	if s.cfg.disaggregated() {
		h.RemoteRead = func(r *engine.Request, tokens int) { s.remoteRead(i, r, tokens) }
	}
	if s.readsEvents() {
		h.KV = func(ev engine.KVEvent) { s.kvEvent(i, ev) }
	}
	if s.sink.ITL != nil {
		h.Step = func(_ sim.Time, d time.Duration, st gpumodel.Step) {
			if st.DecodeSeqs > 0 {
				s.sink.ITL(d, st.DecodeSeqs)
			}
		}
	}
	return h
}

// Endpoints returns the first router's current view of the fleet, a copy.
func (s *Sim) Endpoints() []router.EndpointState { return s.rt[0].lc.Endpoints() }

func (s *Sim) readsEvents() bool {
	for _, ri := range s.rt {
		if ri.kv != nil || ri.pre != nil && ri.pre.kv != nil {
			return true
		}
	}
	return false
}

// Replica returns replica i, for inspection.
func (s *Sim) Replica(i int) *engine.Replica { return s.reps[i] }

// Run simulates until the stream is exhausted and every request has ended, or ctx is done.
// It returns the stream's error, a kernel error, or ctx's error.
func (s *Sim) Run(ctx context.Context) error {
	for _, f := range s.cfg.Failures {
		s.k.Schedule(sim.At(f.At), -1, func(sim.Time) { s.fail(f.Replica) })
		if f.RecoverAt > 0 {
			s.k.Schedule(sim.At(f.RecoverAt), -1, func(sim.Time) { s.recover(f.Replica) })
		}
	}
	s.scheduleArrival()
	if err := s.k.RunContext(ctx, sim.Never); err != nil {
		return err
	}
	if err := s.stream.Err(); err != nil {
		return err
	}
	if s.active != 0 || s.taken != s.ended {
		return fmt.Errorf("cluster: %d requests taken, %d ended: a request was lost", s.taken, s.ended)
	}
	return nil
}

// Now returns the simulation's current virtual time.
func (s *Sim) Now() sim.Time { return s.k.Now() }

func (s *Sim) wall(t sim.Time) time.Time { return Epoch.Add(t.Duration()) }

// scheduleArrival makes sure an event is pending for the stream's next request.
func (s *Sim) scheduleArrival() {
	arrival, ok := s.stream.PeekArrival()
	at := sim.Never
	if ok {
		at = max(sim.At(arrival), s.k.Now())
	}
	if at == s.arrivalAt {
		return
	}
	if s.arrivalEv != 0 {
		s.k.Cancel(s.arrivalEv)
		s.arrivalEv = 0
	}
	s.arrivalAt = at
	if at != sim.Never {
		s.arrivalEv = s.k.Schedule(at, 0, s.arrivalFn)
	}
}

// onArrival takes every request due now from the stream and routes it.
func (s *Sim) onArrival(now sim.Time) {
	s.arrivalEv, s.arrivalAt = 0, sim.Never
	for {
		arrival, ok := s.stream.PeekArrival()
		if !ok || sim.At(arrival) > now {
			break
		}
		req, _ := s.stream.Next()
		s.taken++
		s.active++
		s.dispatch(s.newFlight(&req, now), now)
	}
	s.scheduleArrival()
}

// newFlight returns the state of request w, arriving at now: an ended flight's when there is
// one (see recycle).
func (s *Sim) newFlight(w *workloads.Request, now sim.Time) *flight {
	f := s.spare.Take()
	if f == nil {
		f = new(flight)
	}
	// Field by field: a whole-flight literal is built aside and copied in.
	f.wreq, f.journey = *w, journey{arrival: now}
	f.rreq = RouterRequest(w, s.cfg.Model)
	f.ereq = engine.Request{ID: w.ID, Prompt: w.Tokens, OutputTokens: w.OutputTokens, Answer: w.AnswerTokens, Salt: s.salt, Tag: f}
	if s.pd != nil {
		f.resetPD()
	}
	return f
}

// RouterRequest is what the routers know of workload request w for model: what a client
// sending w's text, tenant and session to cmd/route gets the policy to see, token ids
// included (cmd/route reads them from a replica's /tokenize).
func RouterRequest(w *workloads.Request, model string) router.Request {
	var msgs []router.Message
	if len(w.Messages) > 0 {
		msgs = make([]router.Message, len(w.Messages))
		for i, m := range w.Messages {
			msgs[i] = router.Message{Role: string(m.Role), Content: m.Content}
		}
	}
	return router.Request{
		ID: w.ID, Model: model, Tenant: w.Tenant, SessionKey: w.Session, Prompt: w.Text,
		Messages: msgs, Tokens: w.Tokens, InputTokens: len(w.Tokens), MaxOutputTokens: w.OutputTokens,
	}
}

// firstTokenBack reports f's first token, produced at at, to the lifecycle of the router
// that routed f once it gets there (after the network delay). It is scheduled before the
// answer it precedes, and the kernel runs ties in order.
func (s *Sim) firstTokenBack(f *flight, at sim.Time) {
	if s.cfg.NetworkDelay == 0 {
		f.tk().FirstToken(s.wall(at))
		return
	}
	s.k.Schedule(at+sim.Time(s.cfg.NetworkDelay), 1, func(now sim.Time) { f.tk().FirstToken(s.wall(now)) })
}

// kvEvent forwards replica i's KV event to every router whose policy reads the caches,
// Routers.EventDelay later.
func (s *Sim) kvEvent(i int, ev engine.KVEvent) {
	ev.Tokens = nil                                 // valid only during the hook; the routers need only the hash
	if ev.Stored && ev.Medium == engine.MediumGPU { // batches index the GPU cache only
		s.batchStored(i, ev)
	}
	if d := s.cfg.Routers.EventDelay; d > 0 {
		s.k.Schedule(s.k.Now()+sim.Time(d), -1, func(sim.Time) { s.deliver(i, ev) })
		return
	}
	s.deliver(i, ev)
}

func (s *Sim) deliver(i int, ev engine.KVEvent) {
	id := s.ids[i]
	for _, ri := range s.rt {
		ri := s.observers(ri, i)
		// A router with batches hears GPU stores through them; CPU-tier stores reach it block
		// by block, as vLLM's token-less CPU BlockStored names engine hashes only.
		if ri.kv != nil && (ri.batch == nil || !ev.Stored || ev.Medium != engine.MediumGPU) {
			applyKV(ri.kv, id, ev)
		}
	}
}

// applyKV reports one engine KV event to kv, in the tier it happened in (vLLM's medium
// string): observers that count lower tiers read CPU events, the others ignore them.
func applyKV(kv router.KVEventObserver, id string, ev engine.KVEvent) {
	switch {
	case ev.Cleared:
		kv.AllBlocksCleared(id)
	case ev.Stored:
		kv.BlockStored(id, ev.Hash, ev.Medium.String())
	default:
		kv.BlockRemoved(id, ev.Hash, ev.Medium.String())
	}
}
