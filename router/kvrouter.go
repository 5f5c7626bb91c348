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

// KVRouterConfig configures kv-router, NVIDIA Dynamo's KV-aware worker selection
// (`--router-mode kv`) with the defaults of KvRouterConfig::default()
// (ai-dynamo/dynamo lib/kv-router/src/scheduling/config.rs at 0243c51b). For each worker
// (ai-dynamo/dynamo lib/kv-router/src/scheduling/selector/default.rs at 07a6c9ce,
// DefaultWorkerScorer::worker_logit; inputs from selector/mod.rs WorkerSelectionInput::row):
//
//	raw_prefill_blocks = (active prefill tokens + request tokens) / block_size
//	logit = prefill_load_scale × max(0, raw_prefill_blocks − overlap_score_credit × overlap_blocks)
//	        + decode_blocks
//
// where overlap_blocks is the leading run of the request's blocks the worker caches (from its
// KV events), active prefill tokens are the uncached prompt tokens of the requests routed
// there whose first token has not come back, and decode_blocks are the distinct full prompt
// blocks of the worker's active requests together with the request's own (router_assume_kv_reuse;
// sequences/prompt_registry.rs potential_decode_blocks). Temperature 0 picks the smallest
// logit, ties uniformly at random (minimum_cost_index); above 0 it samples
// exp(−(logit−min)/((max−min)·T)) (softmax_sample_index).
//
// Not modelled: the router queue (router_queue_threshold 16 holds requests in the router
// when every worker is past that fraction of max_num_batched_tokens), host/disk/shared cache
// tiers, output-block tracking (off by default) and the overlap credit decay (off).
type KVRouterConfig struct {
	// BlockSize is the engines' KV block size in tokens (vLLM's default 16; Dynamo reads it
	// from the worker).
	BlockSize int `json:"block_size"`
	// OverlapScoreCredit is the share of cached blocks credited against prefill (1.0, in [0, 1]).
	OverlapScoreCredit float64 `json:"overlap_score_credit"`
	// PrefillLoadScale weighs prefill blocks against decode blocks (1.0).
	PrefillLoadScale float64 `json:"prefill_load_scale"`
	// Temperature is router_temperature: 0 is argmin, above 0 softmax sampling (0).
	Temperature float64 `json:"router_temperature"`
}

// DefaultKVRouterConfig returns Dynamo's defaults.
func DefaultKVRouterConfig() KVRouterConfig {
	return KVRouterConfig{BlockSize: 16, OverlapScoreCredit: 1, PrefillLoadScale: 1}
}

// Validate checks ranges.
func (c KVRouterConfig) Validate() error {
	var errs []error
	if c.BlockSize < 1 {
		errs = append(errs, fmt.Errorf("block_size %d: want > 0", c.BlockSize))
	}
	if !(c.OverlapScoreCredit >= 0 && c.OverlapScoreCredit <= 1) {
		errs = append(errs, fmt.Errorf("overlap_score_credit %v: want 0..1", c.OverlapScoreCredit))
	}
	if !(c.PrefillLoadScale >= 0) || math.IsInf(c.PrefillLoadScale, 0) {
		errs = append(errs, fmt.Errorf("prefill_load_scale %v: want a finite value >= 0", c.PrefillLoadScale))
	}
	if !(c.Temperature >= 0) || math.IsInf(c.Temperature, 0) {
		errs = append(errs, fmt.Errorf("router_temperature %v: want a finite value >= 0", c.Temperature))
	}
	return errors.Join(errs...)
}

// KVRouter is the kv-router policy (see KVRouterConfig). It needs Request.Tokens for overlap
// and block identity; without them it routes on token counts and load alone.
type KVRouter struct {
	cfg KVRouterConfig
	mu  sync.Mutex
	rng *rand.Rand
	ids interner
	kv  kvHolders
	act activeSeqs

	hashes []uint64
	run    []int
	shared []int
	found  []int32 // the active-block slots the walk of decision seq found, for Routed
	seq    uint64  // the decision (Snapshot.Seq) hashes, run, shared and found are for; 0: none
	cand   []int
	candID []int32 // interned ids of cand
	pos    posIDs
	cost   []float64
	prob   []float64
}

var (
	_ Policy             = (*KVRouter)(nil)
	_ Observer           = (*KVRouter)(nil)
	_ KVEventObserver    = (*KVRouter)(nil)
	_ FirstTokenObserver = (*KVRouter)(nil)
)

// NewKVRouter returns a kv-router policy; rng breaks ties and samples.
func NewKVRouter(cfg KVRouterConfig, rng *rand.Rand) (*KVRouter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("router: kv-router: %w", err)
	}
	kv := newKVHolders(0)
	return &KVRouter{cfg: cfg, rng: rng, ids: newInterner(), kv: kv, act: newActiveSeqsIn(kv)}, nil
}

// Name returns "kv-router".
func (*KVRouter) Name() string { return "kv-router" }

// TextFree is true: kv-router reads token ids and counts only.
func (*KVRouter) TextFree() bool { return true }

// isl is the request's prompt length in tokens.
func isl(req *Request) int { return max(len(req.Tokens), req.InputTokens) }

// Pick returns the worker with the smallest logit (or a softmax sample of the logits).
func (p *KVRouter) Pick(req *Request, s *Snapshot) (Decision, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var err error
	if p.cand, err = Eligible(p.cand, req, s); err != nil {
		return Decision{}, err
	}
	p.prepare(req, s, p.cand)
	p.cost = resize(p.cost, len(p.cand))
	bs := float64(p.cfg.BlockSize)
	n := isl(req)
	for k, id := range p.candID {
		raw := float64(p.act.prefill(id)+int64(n)) / bs
		adjusted := max(0, raw-p.cfg.OverlapScoreCredit*float64(p.run[id]))
		decode := float64(p.act.blockCount(id) + len(p.hashes) - p.shared[id])
		p.cost[k] = p.cfg.PrefillLoadScale*adjusted + decode
	}
	if p.cfg.Temperature == 0 {
		return Decision{Index: p.cand[argminRandom(p.rng, p.cost)], Reason: ReasonKVCost}, nil
	}
	return Decision{Index: p.cand[p.softmax()], Reason: ReasonKVCost}, nil
}

// prepare interns the candidates into p.candID, hashes the request's full blocks and fills
// p.run (cached leading blocks) and p.shared (request blocks already active) per endpoint id.
func (p *KVRouter) prepare(req *Request, s *Snapshot, cand []int) {
	p.candID = p.candID[:0]
	for _, i := range cand {
		p.candID = append(p.candID, p.pos.id(&p.ids, i, s.Endpoints[i].ID))
	}
	p.hashes = prefix.AppendTokenBlockHashes(p.hashes[:0], prefix.ModelSalt(req.Model), req.Tokens, p.cfg.BlockSize)
	p.seq = s.Seq
	n := p.ids.size()
	p.run, p.shared = resize(p.run, n), resize(p.shared, n)
	p.kv.leadingRun(p.hashes, p.run)
	p.found = p.act.sharedBlocks(p.hashes, p.shared, p.found[:0])
}

// softmax samples a candidate position from p.cost as Dynamo's softmax_sample_index does.
func (p *KVRouter) softmax() int {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, c := range p.cost {
		lo, hi = min(lo, c), max(hi, c)
	}
	p.prob = resize(p.prob, len(p.cost))
	sum := 0.0
	for k, c := range p.cost {
		w := 1.0
		if hi > lo {
			w = math.Exp(-(c - lo) / ((hi - lo) * p.cfg.Temperature))
		}
		p.prob[k] = w
		sum += w
	}
	u, acc := p.rng.Float64(), 0.0
	for k, w := range p.prob {
		acc += w / sum
		if u <= acc {
			return k
		}
	}
	return len(p.prob) - 1
}

// Routed charges the request's uncached tokens as active prefill and its full blocks as active
// blocks on endpoint.
func (p *KVRouter) Routed(req *Request, d Decision, endpoint string, _ time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	id := p.ids.id(endpoint)
	if d.Seq == 0 || d.Seq != p.seq || int(id) >= len(p.run) { // not this policy's decision
		p.hashes = prefix.AppendTokenBlockHashes(p.hashes[:0], prefix.ModelSalt(req.Model), req.Tokens, p.cfg.BlockSize)
		p.run = resize(p.run, p.ids.size())
		p.kv.leadingRun(p.hashes, p.run)
		p.found = p.found[:0]
	}
	p.seq = 0 // events may change the cache before the next decision
	n := isl(req)
	p.act.add(req.ID, id, int64(n-min(p.run[id]*p.cfg.BlockSize, n)), p.hashes, p.found)
}

// FirstToken releases the request's prefill tokens.
func (p *KVRouter) FirstToken(req *Request, _ string, _ time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.act.prefillDone(req.ID)
}

// Finished releases the request's prefill tokens (if still held) and blocks.
func (p *KVRouter) Finished(req *Request, _ string, _ Usage, _ time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.act.done(req.ID)
}

// Removed forgets the endpoint's cache view and active requests.
func (p *KVRouter) Removed(endpoint string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if id, ok := p.ids.lookup(endpoint); ok {
		p.kv.cleared(id)
		p.act.drop(id)
	}
}

// BlockStored records that endpoint caches hash on its GPU; other tiers are not read.
func (p *KVRouter) BlockStored(endpoint string, hash uint64, medium string) {
	if !onGPU(medium) {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.kv.stored(p.ids.id(endpoint), hash)
}

// BlockRemoved records that endpoint evicted hash from its GPU.
func (p *KVRouter) BlockRemoved(endpoint string, hash uint64, medium string) {
	if !onGPU(medium) {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if id, ok := p.ids.lookup(endpoint); ok {
		p.kv.removed(id, hash)
	}
}

// AllBlocksCleared forgets endpoint's cache.
func (p *KVRouter) AllBlocksCleared(endpoint string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if id, ok := p.ids.lookup(endpoint); ok {
		p.kv.cleared(id)
	}
}

// argminRandom returns the position of the smallest cost, ties uniformly at random
// (reservoir sampling, as Dynamo's minimum_cost_index), or -1 for none.
func argminRandom(rng *rand.Rand, cost []float64) int {
	best, ties := -1, 0
	for k, c := range cost {
		switch {
		case best < 0 || c < cost[best]:
			best, ties = k, 1
		case c == cost[best]:
			ties++
			if rng.IntN(ties) == 0 {
				best = k
			}
		}
	}
	return best
}

// ReasonKVCost labels kv-router's decisions.
const ReasonKVCost = "kv-cost"
