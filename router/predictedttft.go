package router

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"kvroute/router/prefix"
)

// PredictedTTFTConfig configures predicted-ttft, kvroute's own policy: for each endpoint it
// predicts the request's time to first token and picks the smallest prediction (ties at
// random). The prediction is
//
//	max(time to prefill the queued tokens and the request's uncached ones, packed into
//	    full steps, + their attention over their own contexts (which packing does not
//	    share) − the time the queue has been worked on,
//	    time to prefill the request's uncached tokens after its cached prefix)
//
// priced by the endpoint's step-time model (EndpointState.Prefill) with the router's requests
// past their first token there decoding alongside. Queued tokens are the router's own: each routed request adds the prompt
// tokens its endpoint does not cache, and its first token (FirstTokenObserver; Finished where
// first tokens are not reported) removes them and restarts the endpoint's clock, so the
// estimate corrects itself with every answer. Cached tokens are the
// leading run of the request's KV blocks the endpoint holds: per its KV events once it has
// sent any, or routed there within RouteTTL (blocks a queued request will have computed by
// the time this one runs, before any event can say so, as Dynamo's predict-on-route side
// index does); else per the router's own routing history (an LRU index per endpoint sized to
// its KV capacity). Without a step-time model, prefill is priced at FallbackTokensPerSecond.
type PredictedTTFTConfig struct {
	// BlockSize is the engines' KV block size in tokens (16).
	BlockSize int `json:"block_size"`
	// FallbackTokensPerSecond prices prefill for endpoints without a step-time model
	// (15,928: llm-d's calibrated H100 peak prefill throughput).
	FallbackTokensPerSecond float64 `json:"fallback_tokens_per_second"`
	// IndexCapacity is the routing-history index's blocks per endpoint when its KV capacity
	// is unknown (31,250).
	IndexCapacity int `json:"index_capacity"`
	// Externality weighs the request's own prefill time again in the cost minimised
	// (cost = predicted TTFT + Externality × own prefill time): the work a cache miss adds
	// delays every later request on that endpoint, which a TTFT alone does not see (2,
	// chosen on the examples' sweeps: docs/policies.md; 0 minimises the predicted TTFT alone).
	Externality float64 `json:"externality"`
	// RouteTTL is how long a routed request's blocks count as cached on an endpoint that
	// sends KV events, before its events take over (30 s).
	RouteTTL Duration `json:"route_ttl"`
	// KVBytesPerToken and HostBandwidth price a prefix held in an endpoint's CPU tier (its
	// KV events of medium CPU) as vLLM's offloading connector loads it: the blocks after the
	// GPU hit that the tier holds without a gap are not prefilled but copied, taking
	// bytes / HostBandwidth. Defaults: 131,072 bytes per token (Llama-3.1-8B: 32 layers × 8 KV
	// heads × 128 × K and V × 2 bytes) and 50 GB/s, the one-way GPU↔host copy an H100 reaches
	// on large blocks (vllm-project/vllm-project.github.io c3a01c4a
	// _posts/2026-01-08-kv-offloading-connector.md:125-146).
	KVBytesPerToken int64   `json:"kv_bytes_per_token"`
	HostBandwidth   float64 `json:"host_bandwidth_bytes_per_second"`
}

// DefaultPredictedTTFTConfig returns the defaults.
func DefaultPredictedTTFTConfig() PredictedTTFTConfig {
	return PredictedTTFTConfig{BlockSize: 16, FallbackTokensPerSecond: 15928, IndexCapacity: 31250, Externality: 2, RouteTTL: Duration(30 * time.Second),
		KVBytesPerToken: 131072, HostBandwidth: 50e9}
}

// Validate checks ranges.
func (c PredictedTTFTConfig) Validate() error {
	var errs []error
	if !(c.Externality >= 0) || math.IsInf(c.Externality, 0) {
		errs = append(errs, fmt.Errorf("externality %v: want a finite value >= 0", c.Externality))
	}
	if c.KVBytesPerToken < 0 || !(c.HostBandwidth > 0) || math.IsInf(c.HostBandwidth, 0) {
		errs = append(errs, fmt.Errorf("kv_bytes_per_token %d, host_bandwidth_bytes_per_second %v: want >= 0 and a finite value > 0", c.KVBytesPerToken, c.HostBandwidth))
	}
	if c.RouteTTL < 0 {
		errs = append(errs, fmt.Errorf("route_ttl %v: want >= 0", c.RouteTTL.D()))
	}
	if c.BlockSize < 1 || c.IndexCapacity < 1 {
		errs = append(errs, fmt.Errorf("block_size %d, index_capacity %d: want > 0", c.BlockSize, c.IndexCapacity))
	}
	if !(c.FallbackTokensPerSecond > 0) || math.IsInf(c.FallbackTokensPerSecond, 0) {
		errs = append(errs, fmt.Errorf("fallback_tokens_per_second %v: want a finite value > 0", c.FallbackTokensPerSecond))
	}
	return errors.Join(errs...)
}

// PredictedTTFT is the predicted-ttft policy (see PredictedTTFTConfig).
type PredictedTTFT struct {
	cfg   PredictedTTFTConfig
	mu    sync.Mutex
	rng   *rand.Rand
	ids   interner
	kv    kvHolders
	host  kvHolders // the CPU tiers' blocks
	index *prefix.Index
	// recent holds the blocks routed within RouteTTL, for endpoints that send KV events.
	recent *prefix.BlockStore
	swept  time.Time
	eps    []ttftEp
	reqs   map[string]ttftReq

	hashes []uint64
	run    []int
	cpu    []int // per endpoint id: blocks its CPU tier holds after the GPU run
	hist   []int
	fresh  []int
	cand   []int
	candID []int32 // interned ids of cand
	pos    posIDs
	pred   []float64
	last   struct { // decision seq's uncached tokens and extra per endpoint id
		seq    uint64 // the Snapshot.Seq of the Pick that filled it; 0: none
		tokens []int
		extra  []time.Duration // deferredExtra: not needed by the prediction, priced by Routed from batch
		batch  []batchArgs
	}
}

// deferredExtra marks an extra time (never negative) that Pick did not price: the prediction
// did not need it, and only the endpoint the request is routed to needs it.
const deferredExtra time.Duration = -1

// batchArgs is what prices a deferred extra time: own − BatchTime(tokens, decoding, ctx).
type batchArgs struct {
	model       PrefillPredictor
	tokens, dec int
	ctx         int64
	own         time.Duration
}

// extra returns the extra time of endpoint id from decision last.seq, pricing it if deferred.
func (p *PredictedTTFT) extra(id int32) time.Duration {
	if x := p.last.extra[id]; x != deferredExtra {
		return x
	}
	b := p.last.batch[id]
	return max(0, b.own-b.model.BatchTime(b.tokens, b.dec, b.ctx))
}

// ttftEp is one endpoint's queue of prefill work.
type ttftEp struct {
	queued    int           // Σ uncached prompt tokens of requests awaiting their first token
	extra     time.Duration // Σ their unshared prefill time (predict's extra)
	pending   int           // requests awaiting their first token
	busySince time.Time
	events    bool // the endpoint has sent KV events
	capacity  int  // index capacity last set
}

type ttftReq struct {
	ep     int32
	tokens int
	extra  time.Duration
}

var (
	_ Policy             = (*PredictedTTFT)(nil)
	_ Observer           = (*PredictedTTFT)(nil)
	_ KVEventObserver    = (*PredictedTTFT)(nil)
	_ FirstTokenObserver = (*PredictedTTFT)(nil)
)

// NewPredictedTTFT returns a predicted-ttft policy; rng breaks ties.
func NewPredictedTTFT(cfg PredictedTTFTConfig, rng *rand.Rand) (*PredictedTTFT, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("router: predicted-ttft: %w", err)
	}
	index, err := prefix.NewIndex(cfg.IndexCapacity)
	if err != nil {
		return nil, fmt.Errorf("router: predicted-ttft: %w", err)
	}
	recent, err := prefix.NewBlockStore(1 << 20)
	if err != nil {
		return nil, fmt.Errorf("router: predicted-ttft: %w", err)
	}
	return &PredictedTTFT{cfg: cfg, rng: rng, ids: newInterner(), kv: newKVHolders(0), host: newKVHolders(0), index: index, recent: recent,
		reqs: map[string]ttftReq{}}, nil
}

// Name returns "predicted-ttft".
func (*PredictedTTFT) Name() string { return "predicted-ttft" }

// TextFree is true: the policy reads token ids and counts only.
func (*PredictedTTFT) TextFree() bool { return true }

// Pick returns the endpoint with the smallest predicted TTFT.
func (p *PredictedTTFT) Pick(req *Request, s *Snapshot) (Decision, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var err error
	if p.cand, err = Eligible(p.cand, req, s); err != nil {
		return Decision{}, err
	}
	p.cached(req, s, p.cand)
	n := isl(req)
	p.pred = resize(p.pred, len(p.cand))
	p.last.tokens = resize(p.last.tokens, p.ids.size())
	p.last.extra = resize(p.last.extra, p.ids.size())
	p.last.batch = resize(p.last.batch, p.ids.size())
	p.last.seq = s.Seq
	for k, i := range p.cand {
		e, id := &s.Endpoints[i], p.candID[k]
		cached := min(p.run[id]*p.cfg.BlockSize, n)
		loaded := min(p.cpu[id]*p.cfg.BlockSize, n-cached) // copied from CPU, not prefilled
		p.last.tokens[id] = n - cached - loaded
		ttft, own, extra := p.predict(e, id, n-cached-loaded, cached+loaded, req.MaxOutputTokens, s.Now)
		p.last.extra[id] = extra
		p.pred[k] = float64(ttft + p.loadTime(loaded) + time.Duration(p.cfg.Externality*float64(own)))
	}
	return Decision{Index: p.cand[argminRandom(p.rng, p.pred)], Reason: ReasonPredictedTTFT}, nil
}

// predict returns the TTFT of a request with newTokens uncached after cached, and out output
// tokens, on endpoint e (id), its running requests decoding alongside and its wait for KV
// space (kvWait) added; the time its own prefill takes; and the part of that time that packing
// into steps does not share (its attention over its own context: own − the same tokens packed
// without context), or deferredExtra when nothing is queued there for it to add to (the
// prediction does not need it; p.last.batch[id] keeps what prices it, for Routed).
func (p *PredictedTTFT) predict(e *EndpointState, id int32, newTokens, cached, out int, now time.Time) (ttft, own, extra time.Duration) {
	q := p.eps[id]
	if e.Prefill == nil {
		rate := p.cfg.FallbackTokensPerSecond / float64(time.Second)
		own = time.Duration(float64(newTokens) / rate)
		if q.pending == 0 {
			return own, own, 0
		}
		return max(time.Duration(float64(q.queued+newTokens)/rate)+q.extra-now.Sub(q.busySince), own), own, 0
	}
	// The router's own requests past their first token decode alongside: fresh, unlike the
	// scraped Running, which a stale scrape would turn into a wrong prediction.
	dec, ctx := max(0, e.InFlight-q.pending), int64(e.InFlightTokens)
	own = e.Prefill.PrefillTime(newTokens, cached, dec, ctx)
	wait := kvWait(e, q.queued, newTokens, out, dec, ctx)
	if q.pending == 0 { // nothing queued for extra to add to: priced if routed here
		p.last.batch[id] = batchArgs{e.Prefill, newTokens, dec, ctx, own}
		return own + wait, own, deferredExtra
	}
	extra = max(0, own-e.Prefill.BatchTime(newTokens, dec, ctx))
	return max(e.Prefill.BatchTime(q.queued+newTokens, dec, ctx)+q.extra+extra-now.Sub(q.busySince), own) + wait, own, extra
}

// cached interns the candidates into p.candID and fills p.run[id] with the leading blocks of
// the request each candidate caches.
func (p *PredictedTTFT) cached(req *Request, s *Snapshot, cand []int) {
	p.candID = p.candID[:0]
	for _, i := range cand {
		p.candID = append(p.candID, p.endpoint(&s.Endpoints[i], p.pos.id(&p.ids, i, s.Endpoints[i].ID)))
	}
	p.hashes = prefix.AppendTokenBlockHashes(p.hashes[:0], prefix.ModelSalt(req.Model), req.Tokens, p.cfg.BlockSize)
	n := p.ids.size()
	p.run, p.cpu = resize(p.run, n), resize(p.cpu, n)
	p.kv.leadingRun(p.hashes, p.run)
	if len(p.hashes) == 0 {
		return
	}
	p.sweep(s.Now)
	p.hist, p.fresh = resize(p.hist, n), resize(p.fresh, n)
	// The history is read only for candidates without events, and only those that hold some
	// of it can match: a candidate holding nothing counts 0 however far the walk goes.
	withEvents, without := false, false
	for _, id := range p.candID {
		if p.eps[id].events {
			withEvents = true
		} else if p.index.Len(id) > 0 {
			without = true
		}
	}
	if without {
		p.index.Match(p.hashes, p.hist)
	} else {
		clear(p.hist)
	}
	if withEvents {
		p.recent.Match(p.hashes, nil, p.fresh)
	}
	for _, id := range p.candID {
		if p.eps[id].events {
			p.run[id] = max(p.run[id], p.fresh[id])
		} else {
			p.run[id] = p.hist[id]
		}
	}
	if p.host.x.Len() > 0 { // vLLM looks up the CPU tier from where the GPU hit ends
		for _, id := range p.candID {
			p.cpu[id] = continued(p.host, p.hashes, p.run[id], id)
		}
	}
}

// loadTime is how long copying tokens' KV from a CPU tier takes.
func (p *PredictedTTFT) loadTime(tokens int) time.Duration {
	if tokens == 0 {
		return 0
	}
	return time.Duration(float64(int64(tokens)*p.cfg.KVBytesPerToken) / p.cfg.HostBandwidth * float64(time.Second))
}

// sweep drops routed blocks older than RouteTTL, once a second.
func (p *PredictedTTFT) sweep(now time.Time) {
	if now.Sub(p.swept) >= time.Second {
		p.recent.EvictExpired(now, p.cfg.RouteTTL.D())
		p.swept = now
	}
}

// endpoint makes room for e, interned as id, sizing its routing-history index to its KV
// capacity when known, and returns id.
func (p *PredictedTTFT) endpoint(e *EndpointState, id int32) int32 {
	for len(p.eps) <= int(id) {
		p.eps = append(p.eps, ttftEp{})
	}
	if c := e.NumGPUBlocks; c > 0 && p.eps[id].capacity != c {
		if p.index.SetCapacity(id, c) == nil {
			p.eps[id].capacity = c
		}
	}
	return id
}

// Routed queues the request's predicted prefill on endpoint and records its blocks in the
// routing history.
func (p *PredictedTTFT) Routed(req *Request, d Decision, endpoint string, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	id := p.endpoint(&EndpointState{ID: endpoint}, p.ids.id(endpoint))
	tokens, extra := isl(req), time.Duration(0) // not picked by this policy: the whole prompt
	picked := d.Seq != 0 && d.Seq == p.last.seq
	if picked && int(id) < len(p.last.tokens) {
		tokens, extra = p.last.tokens[id], p.extra(id)
	}
	if !picked {
		p.hashes = prefix.AppendTokenBlockHashes(p.hashes[:0], prefix.ModelSalt(req.Model), req.Tokens, p.cfg.BlockSize)
	}
	p.last.seq = 0
	p.release(req.ID, now)
	e := &p.eps[id]
	if e.pending == 0 {
		e.busySince = now
	}
	e.queued += tokens
	e.extra += extra
	e.pending++
	p.reqs[req.ID] = ttftReq{id, tokens, extra}
	if len(p.hashes) > 0 {
		p.sweep(now)
		p.recent.Add(p.hashes, id, now) // until its events show these blocks
		if !e.events {                  // its history is its cache view
			p.index.Add(p.hashes, id)
		}
	}
}

// release removes reqID's tokens from its endpoint's queue: the tokens of the requests still
// waiting are untouched, and the clock restarts now, so a prediction that was too long or too
// short stops counting.
func (p *PredictedTTFT) release(reqID string, now time.Time) {
	r, ok := p.reqs[reqID]
	if !ok {
		return
	}
	delete(p.reqs, reqID)
	e := &p.eps[r.ep]
	e.queued = max(0, e.queued-r.tokens)
	e.extra = max(0, e.extra-r.extra)
	e.pending = max(0, e.pending-1)
	e.busySince = now
}

// FirstToken releases the request's queued prefill.
func (p *PredictedTTFT) FirstToken(req *Request, _ string, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.release(req.ID, now)
}

// Finished releases the request's queued prefill if its first token was not reported.
func (p *PredictedTTFT) Finished(req *Request, _ string, _ Usage, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.release(req.ID, now)
}

// Removed forgets the endpoint.
func (p *PredictedTTFT) Removed(endpoint string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	id, ok := p.ids.lookup(endpoint)
	if !ok {
		return
	}
	for k, r := range p.reqs { // deleting while ranging is safe; the order does not matter
		if r.ep == id {
			delete(p.reqs, k)
		}
	}
	p.kv.cleared(id)
	p.host.cleared(id)
	p.index.RemoveEndpoint(id)
	p.recent.RemoveEndpoint(id)
	p.eps[id] = ttftEp{}
}

// BlockStored records that endpoint caches hash; from its first event on, the endpoint's
// cache is read from its events. The GPU tier and the CPU tier are read.
func (p *PredictedTTFT) BlockStored(endpoint string, hash uint64, medium string) {
	k, ok := p.tier(medium)
	if !ok {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	id := p.endpoint(&EndpointState{ID: endpoint}, p.ids.id(endpoint))
	p.eps[id].events = true
	k.stored(id, hash)
}

// BlockRemoved records that endpoint evicted hash from that tier.
func (p *PredictedTTFT) BlockRemoved(endpoint string, hash uint64, medium string) {
	k, ok := p.tier(medium)
	if !ok {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if id, ok := p.ids.lookup(endpoint); ok {
		k.removed(id, hash)
	}
}

// tier returns the index of medium's tier: the GPU's or the CPU tier's; false for another.
func (p *PredictedTTFT) tier(medium string) (kvHolders, bool) {
	switch {
	case onGPU(medium):
		return p.kv, true
	case strings.EqualFold(medium, MediumCPU):
		return p.host, true
	}
	return kvHolders{}, false
}

// AllBlocksCleared forgets endpoint's cache.
func (p *PredictedTTFT) AllBlocksCleared(endpoint string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if id, ok := p.ids.lookup(endpoint); ok {
		p.kv.cleared(id)
		p.host.cleared(id)
	}
}

// ReasonPredictedTTFT labels predicted-ttft's decisions.
const ReasonPredictedTTFT = "predicted-ttft"
