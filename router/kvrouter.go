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
// The block size is the workers' (the engine's, EndpointState.BlockSize of the first
// candidate that reports one; BlockSize when none does): Dynamo takes it from the workers'
// runtime config and passes it to every selection (selector/mod.rs WorkerSelector::
// select_worker). A LoRA request's blocks are hashed under its adapter's name, as the engine's
// KV events for it are (protocols.rs BlockHashOptions.lora_name, the hash seed). A worker's
// active requests older than an hour are dropped when a request is next added to it, at most
// every 30 s (sequences/single.rs at 04df1c42, lines 41 and 45: EXPIRY_DURATION 3,600 s,
// CHECK_EXPIRY_FREQUENCY 30 s; add_request_with_prefill_tracking calls force_expiry first).
//
// Lower tiers: a worker's blocks in its CPU tier (vLLM's medium "CPU", Dynamo's host-pinned
// tier) and on disk ("DISK") are credited too, each at its weight:
//
//	overlap credit = overlap_score_credit × device + host_cache_hit_weight × host
//	                 + disk_cache_hit_weight × disk
//
// (default.rs worker_logit; weights 0.75 and 0.25, config.rs default_host_cache_hit_weight,
// default_disk_cache_hit_weight), where host is the run of the request's blocks the worker
// holds in its CPU tier from the block its device run ended at, and disk the run on disk from
// where that ended: Dynamo's query_lower_tiers seeds each worker's walk of the next tier with
// its match depth in the one before (lib/kv-router/src/indexer, lower_tier_query_order
// HostPinned → Disk → External).
//
// Not modelled: the router queue (router_queue_threshold 16 holds requests in the router
// when every worker is past that fraction of max_num_batched_tokens), the shared cache tier,
// output-block tracking (off by default) and the overlap credit decay (off).
type KVRouterConfig struct {
	// BlockSize is the KV block size in tokens when no worker reports one (vLLM's default 16).
	BlockSize int `json:"block_size"`
	// OverlapScoreCredit is the share of cached blocks credited against prefill (1.0; any
	// finite value >= 0, above 1 crediting cached blocks extra: config.rs 69–78).
	OverlapScoreCredit float64 `json:"overlap_score_credit"`
	// PrefillLoadScale weighs prefill blocks against decode blocks (1.0).
	PrefillLoadScale float64 `json:"prefill_load_scale"`
	// Temperature is router_temperature: 0 is argmin, above 0 softmax sampling (0).
	Temperature float64 `json:"router_temperature"`
	// HostCacheHitWeight and DiskCacheHitWeight credit a block held in the CPU tier (0.75)
	// or on disk (0.25) beyond the device run.
	HostCacheHitWeight float64 `json:"host_cache_hit_weight"`
	DiskCacheHitWeight float64 `json:"disk_cache_hit_weight"`
}

// DefaultKVRouterConfig returns Dynamo's defaults.
func DefaultKVRouterConfig() KVRouterConfig {
	return KVRouterConfig{BlockSize: 16, OverlapScoreCredit: 1, PrefillLoadScale: 1,
		HostCacheHitWeight: 0.75, DiskCacheHitWeight: 0.25}
}

// Validate checks ranges.
func (c KVRouterConfig) Validate() error {
	var errs []error
	if c.BlockSize < 1 {
		errs = append(errs, fmt.Errorf("block_size %d: want > 0", c.BlockSize))
	}
	if !(c.OverlapScoreCredit >= 0) || math.IsInf(c.OverlapScoreCredit, 0) {
		errs = append(errs, fmt.Errorf("overlap_score_credit %v: want a finite value >= 0", c.OverlapScoreCredit))
	}
	if !(c.PrefillLoadScale >= 0) || math.IsInf(c.PrefillLoadScale, 0) {
		errs = append(errs, fmt.Errorf("prefill_load_scale %v: want a finite value >= 0", c.PrefillLoadScale))
	}
	for _, w := range []struct {
		name string
		v    float64
	}{{"host_cache_hit_weight", c.HostCacheHitWeight}, {"disk_cache_hit_weight", c.DiskCacheHitWeight}} {
		if !(w.v >= 0) || math.IsInf(w.v, 0) {
			errs = append(errs, fmt.Errorf("%s %v: want a finite value >= 0", w.name, w.v))
		}
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

	host, disk kvHolders // the CPU tier's and the disk's blocks
	hostRun    []int     // per endpoint id: blocks held in the CPU tier after the device run
	diskRun    []int     // and on disk after that

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

	bs        int                  // the block size of the last decision
	started   map[string]kvStarted // active requests by ID: where and when they were added
	lastCheck []time.Time          // per endpoint id: the last expiry check (zero: not seen yet)
}

// kvStarted is where and when an active request was added.
type kvStarted struct {
	ep int32
	at time.Time
}

// kvExpiry and kvExpiryCheck are Dynamo's EXPIRY_DURATION and CHECK_EXPIRY_FREQUENCY
// (lib/kv-router/src/sequences/single.rs at 04df1c42, lines 41 and 45).
const (
	kvExpiry      = time.Hour
	kvExpiryCheck = 30 * time.Second
)

var (
	_ Policy             = (*KVRouter)(nil)
	_ Observer           = (*KVRouter)(nil)
	_ KVEventObserver    = (*KVRouter)(nil)
	_ FirstTokenObserver = (*KVRouter)(nil)
	_ PrefixMatcher      = (*KVRouter)(nil)
)

// NewKVRouter returns a kv-router policy; rng breaks ties and samples.
func NewKVRouter(cfg KVRouterConfig, rng *rand.Rand) (*KVRouter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("router: kv-router: %w", err)
	}
	kv := newKVHolders(0)
	return &KVRouter{cfg: cfg, rng: rng, ids: newInterner(), kv: kv, act: newActiveSeqsIn(kv),
		host: newKVHolders(0), disk: newKVHolders(0), bs: cfg.BlockSize, started: map[string]kvStarted{}}, nil
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
	bs := float64(p.bs)
	n := isl(req)
	for k, id := range p.candID {
		raw := float64(p.act.prefill(id)+int64(n)) / bs
		credit := p.cfg.OverlapScoreCredit * float64(p.run[id])
		if p.tiered() {
			credit += p.cfg.HostCacheHitWeight*float64(p.hostRun[id]) + p.cfg.DiskCacheHitWeight*float64(p.diskRun[id])
		}
		adjusted := max(0, raw-credit)
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
	p.bs = p.cfg.BlockSize
	for _, i := range cand {
		id := p.pos.id(&p.ids, i, s.Endpoints[i].ID)
		p.candID = append(p.candID, id)
		p.seen(id, s.Now)
	}
	for _, i := range cand {
		if bs := s.Endpoints[i].BlockSize; bs > 0 {
			p.bs = bs
			break
		}
	}
	p.hashes = prefix.AppendTokenBlockHashes(p.hashes[:0], kvSalt(req), req.Tokens, p.bs)
	p.seq = s.Seq
	n := p.ids.size()
	p.run, p.shared = resize(p.run, n), resize(p.shared, n)
	p.kv.leadingRun(p.hashes, p.run)
	p.found = p.act.sharedBlocks(p.hashes, p.shared, p.found[:0])
	if p.tiered() {
		p.hostRun, p.diskRun = resize(p.hostRun, n), resize(p.diskRun, n)
		for _, id := range p.candID {
			p.hostRun[id] = continued(p.host, p.hashes, p.run[id], id)
			p.diskRun[id] = continued(p.disk, p.hashes, p.run[id]+p.hostRun[id], id)
		}
	}
}

// MatchedTokens is the device overlap on endpoint i in tokens, the decode_chosen_overlap_blocks
// × block_size that Dynamo's conditional prefill subtracts from the prompt
// (ai-dynamo/dynamo lib/kv-router/src/conditional_prefill.rs net_new_tokens): its leading
// blocks held on the GPU, as the Pick that chose i found them; lower tiers do not count.
func (p *KVRouter) MatchedTokens(req *Request, s *Snapshot, i int) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.seq == 0 || p.seq != s.Seq {
		p.prepare(req, s, []int{i})
	}
	id, ok := p.ids.lookup(s.Endpoints[i].ID)
	if !ok || int(id) >= len(p.run) {
		return 0
	}
	return p.run[id] * p.bs
}

// tiered reports whether any lower tier holds a block.
func (p *KVRouter) tiered() bool { return p.host.x.Len() > 0 || p.disk.x.Len() > 0 }

// continued returns how many blocks of hashes from from on endpoint id holds in tier k without
// a gap.
func continued(k kvHolders, hashes []uint64, from int, id int32) int {
	n := 0
	for from+n < len(hashes) && k.x.Holds(hashes[from+n], id) {
		n++
	}
	return n
}

// lowerTier returns the index of a lower tier's medium (CPU, DISK), or false for another.
func (p *KVRouter) lowerTier(medium string) (kvHolders, bool) {
	switch strings.ToUpper(medium) {
	case MediumCPU:
		return p.host, true
	case "DISK":
		return p.disk, true
	}
	return kvHolders{}, false
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
func (p *KVRouter) Routed(req *Request, d Decision, endpoint string, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	id := p.ids.id(endpoint)
	if d.Seq == 0 || d.Seq != p.seq || int(id) >= len(p.run) { // not this policy's decision
		p.hashes = prefix.AppendTokenBlockHashes(p.hashes[:0], kvSalt(req), req.Tokens, p.bs)
		p.run = resize(p.run, p.ids.size())
		p.kv.leadingRun(p.hashes, p.run)
		p.found = p.found[:0]
	}
	p.seq = 0 // events may change the cache before the next decision
	p.seen(id, now)
	p.expire(id, now)
	n := isl(req)
	p.act.add(req.ID, id, int64(n-min(p.run[id]*p.bs, n)), p.hashes, p.found)
	p.started[req.ID] = kvStarted{ep: id, at: now}
}

// kvSalt is the first block's parent: the LoRA adapter's name for an adapter request (the
// name the engine's KV events carry), else the model's.
func kvSalt(req *Request) uint64 {
	if req.Adapter != "" {
		return prefix.ModelSalt(req.Adapter)
	}
	return prefix.ModelSalt(req.Model)
}

// seen starts endpoint id's expiry clock when the router first sees it.
func (p *KVRouter) seen(id int32, now time.Time) {
	p.lastCheck = grow(p.lastCheck, int(id)+1)
	if p.lastCheck[id].IsZero() {
		p.lastCheck[id] = now
	}
}

// expire drops endpoint id's requests added more than kvExpiry before now, unless it checked
// less than kvExpiryCheck ago (force_expiry).
func (p *KVRouter) expire(id int32, now time.Time) {
	if now.Before(p.lastCheck[id].Add(kvExpiryCheck)) {
		return
	}
	p.lastCheck[id] = now
	cutoff := now.Add(-kvExpiry)
	var stale []string
	for reqID, st := range p.started {
		if st.ep == id && st.at.Before(cutoff) {
			stale = append(stale, reqID)
		}
	}
	for _, reqID := range stale { // release order does not change the sums
		p.act.done(reqID)
		delete(p.started, reqID)
	}
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
	delete(p.started, req.ID)
}

// Removed forgets the endpoint's cache view and active requests.
func (p *KVRouter) Removed(endpoint string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if id, ok := p.ids.lookup(endpoint); ok {
		p.kv.cleared(id)
		p.host.cleared(id)
		p.disk.cleared(id)
		p.act.drop(id)
		for reqID, st := range p.started {
			if st.ep == id {
				delete(p.started, reqID)
			}
		}
	}
}

// BlockStored records that endpoint caches hash on its GPU, in its CPU tier or on disk;
// other tiers are not read.
func (p *KVRouter) BlockStored(endpoint string, hash uint64, medium string) {
	k := p.kv
	if !onGPU(medium) {
		var ok bool
		if k, ok = p.lowerTier(medium); !ok {
			return
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	k.stored(p.ids.id(endpoint), hash)
}

// BlockRemoved records that endpoint evicted hash from that tier.
func (p *KVRouter) BlockRemoved(endpoint string, hash uint64, medium string) {
	k := p.kv
	if !onGPU(medium) {
		var ok bool
		if k, ok = p.lowerTier(medium); !ok {
			return
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if id, ok := p.ids.lookup(endpoint); ok {
		k.removed(id, hash)
	}
}

// AllBlocksCleared forgets endpoint's cache.
func (p *KVRouter) AllBlocksCleared(endpoint string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if id, ok := p.ids.lookup(endpoint); ok {
		p.kv.cleared(id)
		p.host.cleared(id)
		p.disk.cleared(id)
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
