package router

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"kvroute/router/prefix"
)

// PredictedTTFTConfig configures predicted-ttft, kvroute's own policy: for each endpoint it
// predicts the request's time to first token and picks the smallest prediction (ties at
// random). The prediction is
//
//	queued prefill work still ahead on that endpoint
//	+ the time to prefill the prompt tokens that endpoint does not cache,
//	  priced by the endpoint's step-time model (EndpointState.Prefill) with its running
//	  requests decoding alongside.
//
// Queued work is the router's own: each routed request adds its predicted prefill time, the
// endpoint works it off from the moment its queue became busy, and the request's first token
// (FirstTokenObserver; Finished where first tokens are not reported) removes its share and
// restarts the clock, so the estimate corrects itself with every answer. Cached tokens are the
// leading run of the request's KV blocks the endpoint holds per its KV events (once it has
// sent any), else per the router's own routing history (an LRU index per endpoint sized to
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
}

// DefaultPredictedTTFTConfig returns the defaults.
func DefaultPredictedTTFTConfig() PredictedTTFTConfig {
	return PredictedTTFTConfig{BlockSize: 16, FallbackTokensPerSecond: 15928, IndexCapacity: 31250}
}

// Validate checks ranges.
func (c PredictedTTFTConfig) Validate() error {
	var errs []error
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
	index *prefix.Index
	eps   []ttftEp
	reqs  map[string]ttftReq

	hashes []uint64
	run    []int
	hist   []int
	cand   []int
	pred   []float64
	last   struct { // the last Pick's request and each endpoint id's predicted prefill
		req *Request
		id  string
		dur []time.Duration
	}
}

// ttftEp is one endpoint's queue of predicted prefill work.
type ttftEp struct {
	work      time.Duration // Σ predicted prefill of requests awaiting their first token
	busySince time.Time
	events    bool // the endpoint has sent KV events
	capacity  int  // index capacity last set
}

type ttftReq struct {
	ep  int32
	dur time.Duration
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
	return &PredictedTTFT{cfg: cfg, rng: rng, ids: newInterner(), kv: newKVHolders(), index: index, reqs: map[string]ttftReq{}}, nil
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
	p.last.dur = resize(p.last.dur, p.ids.size())
	p.last.req, p.last.id = req, req.ID
	for k, i := range p.cand {
		e := &s.Endpoints[i]
		id := p.ids.id(e.ID)
		cached := min(p.run[id]*p.cfg.BlockSize, n)
		d := p.prefillTime(e, n-cached, cached)
		p.last.dur[id] = d
		p.pred[k] = float64(p.backlog(id, s.Now) + d)
	}
	return Decision{Index: p.cand[argminRandom(p.rng, p.pred)], Reason: ReasonPredictedTTFT}, nil
}

// prefillTime prices newTokens after cached on e, with its running requests decoding.
func (p *PredictedTTFT) prefillTime(e *EndpointState, newTokens, cached int) time.Duration {
	if e.Prefill == nil {
		return time.Duration(float64(newTokens) / p.cfg.FallbackTokensPerSecond * float64(time.Second))
	}
	return e.Prefill.PrefillTime(newTokens, cached, e.Running, int64(e.InFlightTokens))
}

// backlog is endpoint id's queued prefill work not yet done at now.
func (p *PredictedTTFT) backlog(id int32, now time.Time) time.Duration {
	if int(id) >= len(p.eps) || p.eps[id].work <= 0 {
		return 0
	}
	e := &p.eps[id]
	return max(0, e.work-now.Sub(e.busySince))
}

// cached fills p.run[id] with the leading blocks of the request each candidate caches.
func (p *PredictedTTFT) cached(req *Request, s *Snapshot, cand []int) {
	for _, i := range cand {
		p.endpoint(&s.Endpoints[i])
	}
	p.hashes = prefix.AppendTokenBlockHashes(p.hashes[:0], prefix.ModelSalt(req.Model), req.Tokens, p.cfg.BlockSize)
	p.run = resize(p.run, p.ids.size())
	p.kv.leadingRun(p.hashes, p.run)
	if len(p.hashes) == 0 {
		return
	}
	matched := false
	for _, i := range cand {
		id := p.ids.id(s.Endpoints[i].ID)
		if p.eps[id].events {
			continue
		}
		if !matched { // one index walk for every endpoint without KV events
			p.hist = resize(p.hist, p.ids.size())
			p.index.Match(p.hashes, p.hist)
			matched = true
		}
		p.run[id] = p.hist[id]
	}
}

// endpoint interns e, sizing its routing-history index to its KV capacity when known.
func (p *PredictedTTFT) endpoint(e *EndpointState) int32 {
	id := p.ids.id(e.ID)
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
func (p *PredictedTTFT) Routed(req *Request, endpoint string, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	id := p.endpoint(&EndpointState{ID: endpoint})
	var d time.Duration
	if p.last.req == req && p.last.id == req.ID && int(id) < len(p.last.dur) {
		d = p.last.dur[id]
	} else { // not picked by this policy: price it cold at the fallback rate
		d = p.prefillTime(&EndpointState{}, isl(req), 0)
	}
	p.release(req.ID, now)
	e := &p.eps[id]
	if e.work <= 0 {
		e.work, e.busySince = 0, now
	}
	e.work += d
	p.reqs[req.ID] = ttftReq{id, d}
	p.hashes = prefix.AppendTokenBlockHashes(p.hashes[:0], prefix.ModelSalt(req.Model), req.Tokens, p.cfg.BlockSize)
	if len(p.hashes) > 0 {
		p.index.Add(p.hashes, id)
	}
}

// release removes reqID's predicted work from its endpoint's queue, which is first-come
// first-served: the work of the requests still waiting is untouched, and the clock restarts
// now, so a prediction that was too long or too short stops counting.
func (p *PredictedTTFT) release(reqID string, now time.Time) {
	r, ok := p.reqs[reqID]
	if !ok {
		return
	}
	delete(p.reqs, reqID)
	e := &p.eps[r.ep]
	e.work = max(0, e.work-r.dur)
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
	p.index.RemoveEndpoint(id)
	p.eps[id] = ttftEp{}
}

// BlockStored records that endpoint caches hash; from its first event on, the endpoint's
// cache is read from its events.
func (p *PredictedTTFT) BlockStored(endpoint string, hash uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	id := p.endpoint(&EndpointState{ID: endpoint})
	p.eps[id].events = true
	p.kv.stored(id, hash)
}

// BlockRemoved records that endpoint evicted hash.
func (p *PredictedTTFT) BlockRemoved(endpoint string, hash uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if id, ok := p.ids.lookup(endpoint); ok {
		p.kv.removed(id, hash)
	}
}

// AllBlocksCleared forgets endpoint's cache.
func (p *PredictedTTFT) AllBlocksCleared(endpoint string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if id, ok := p.ids.lookup(endpoint); ok {
		p.kv.cleared(id)
	}
}

// ReasonPredictedTTFT labels predicted-ttft's decisions.
const ReasonPredictedTTFT = "predicted-ttft"
