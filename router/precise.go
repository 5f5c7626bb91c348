package router

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"strings"
	"time"

	"kvroute/router/prefix"
)

// PrecisePrefixConfig configures precise-prefix, llm-d's precise-prefix-cache-scorer profile
// as llm-d/llm-d-router v0.10.0 ships it (deploy/config/epp-precise-prefix-cache-config.yaml;
// pkg/kvcache, pkg/kvevents, pkg/epp/framework/plugins/requestcontrol/dataproducer/preciseprefixcache):
// the replicas' real cache contents, learned from their KV events, scored as the longest
// consecutive run of a request's index blocks each replica holds, with the sample's weights
// (prefix 2, kv-cache utilization 1, queue 1) and the max-score picker.
type PrecisePrefixConfig struct {
	// BlockSize is the index block size in tokens: the shipped configuration's
	// tokenProcessorConfig.blockSize, 64 (the config file's line 19). A multiple of
	// EngineBlockSize: each index block is that many engine blocks.
	BlockSize int `json:"block_size"`
	// EngineBlockSize is the engines' KV block size in tokens (vLLM's --block-size, 16), the
	// blocks their KV events name.
	EngineBlockSize int `json:"engine_block_size"`
	// PrefixWeight, KVCacheWeight and QueueWeight weigh the three scorers (2, 1, 1).
	PrefixWeight  float64 `json:"prefix_weight"`
	KVCacheWeight float64 `json:"kv_cache_weight"`
	QueueWeight   float64 `json:"queue_weight"`
	// SpeculativeIndexing also counts, for SpeculativeTTL after each decision, the request's
	// blocks as held by the chosen endpoint (speculative entries in the index, one of each
	// key's 10 places), covering the gap until its KV events arrive (llm-d's
	// speculativeIndexing: off by default, TTL 2 s).
	SpeculativeIndexing bool     `json:"speculative_indexing"`
	SpeculativeTTL      Duration `json:"speculative_ttl"`
	// TierWeights weighs each KV tier's hits by its lower-cased medium: llm-d's
	// DefaultKVCacheBackendConfig, gpu 1.0 and cpu 0.8 (llm-d/llm-d-router v0.10.0
	// pkg/kvcache/backend.go:26-31; kvCacheBackendConfigs, pkg/kvcache/indexer.go:41). A block
	// counts at the largest weight among the tiers an endpoint holds it in, and a tier not
	// named here weighs 1.0 (pkg/kvcache/kvblock_scorer.go:91-154).
	TierWeights map[string]float64 `json:"tier_weights"`
}

// DefaultPrecisePrefixConfig returns llm-d's sample precise-prefix configuration.
func DefaultPrecisePrefixConfig() PrecisePrefixConfig {
	return PrecisePrefixConfig{BlockSize: 64, EngineBlockSize: 16, PrefixWeight: 2, KVCacheWeight: 1, QueueWeight: 1,
		SpeculativeTTL: Duration(2 * time.Second), TierWeights: map[string]float64{"gpu": 1, "cpu": 0.8}}
}

// Validate checks ranges.
func (c PrecisePrefixConfig) Validate() error {
	var errs []error
	if c.EngineBlockSize < 1 {
		errs = append(errs, fmt.Errorf("engine_block_size %d: want > 0", c.EngineBlockSize))
	} else if c.BlockSize < 1 || c.BlockSize%c.EngineBlockSize != 0 {
		errs = append(errs, fmt.Errorf("block_size %d: want a multiple of engine_block_size %d", c.BlockSize, c.EngineBlockSize))
	}
	if c.SpeculativeTTL <= 0 {
		errs = append(errs, fmt.Errorf("speculative_ttl %v: want > 0", c.SpeculativeTTL.D()))
	}
	for _, w := range []struct {
		name string
		v    float64
	}{{"prefix_weight", c.PrefixWeight}, {"kv_cache_weight", c.KVCacheWeight}, {"queue_weight", c.QueueWeight}} {
		if !(w.v >= 0) || math.IsInf(w.v, 0) {
			errs = append(errs, fmt.Errorf("%s %v: want a finite value >= 0", w.name, w.v))
		}
	}
	for tier, w := range c.TierWeights {
		if !(w >= 0) || math.IsInf(w, 0) {
			errs = append(errs, fmt.Errorf("tier_weights[%s] %v: want a finite value >= 0", tier, w))
		}
	}
	return errors.Join(errs...)
}

// NewPrecisePrefix returns the precise-prefix profile as a Pipeline named "precise-prefix".
// It needs Request.Tokens (the engine's token ids) and KV events; without events every
// prefix score is 0 and it balances load only.
func NewPrecisePrefix(cfg PrecisePrefixConfig, rng *rand.Rand) (*Pipeline, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("router: precise-prefix: %w", err)
	}
	return NewPipeline("precise-prefix", ReasonMaxScore, nil, []Weighted{
		{Scorer: newPreciseScorer(cfg), Weight: cfg.PrefixWeight},
		{Scorer: KVCacheScorer{}, Weight: cfg.KVCacheWeight},
		{Scorer: QueueScorer{}, Weight: cfg.QueueWeight},
	}, MaxScorePicker{}, rng)
}

// PreciseScorer scores the fraction of a request's full blocks that an endpoint holds as a
// consecutive run from the first block, per the endpoints' KV events. As llm-d's in-memory
// index (llm-d/llm-d-router v0.10.0 pkg/kvcache/kvblock/in_memory.go 36, 157–226) it keeps
// one LRU of at most podsPerKey entries per block key, least recently stored first out. Block
// hashes are salted with the model and, for a LoRA request, the adapter name (llm-d-kv-cache
// #243). Not safe for concurrent use on its own: a Pipeline serializes it.
//
// Speculative entries follow llm-d-router v0.10.0
// pkg/epp/framework/plugins/requestcontrol/dataproducer/preciseprefixcache/prerequest.go:
// PreRequest (114–200) adds the request's keys for the chosen pod to the same index as a
// PodEntry with Speculative set (157–166), a separate entry from the pod's confirmed one that
// takes one of the key's podsPerKey places, and records them in a ttlcache under the request
// ID; when that item expires the eviction callback (91–106) removes the speculative entry from
// each of those keys, whichever request last added it. jellydator/ttlcache v3.4.1 (the version
// llm-d-router v0.10.0's go.mod pins) runs its cleanup timer to the earliest expiry in its
// queue (cache.go Start 665–711, updateExpirations 95–135), so each request's entries go
// SpeculativeTTL after it was routed, not TTL–2×TTL.
type PreciseScorer struct {
	blockSize int // the engines' block size
	ids       interner
	kv        kvHolders // index key → entries, podsPerKey at most
	keys      preciseKeys
	engine    []uint64  // scratch: a request's engine block hashes
	hashes    []uint64  // its index keys
	seq       uint64    // the decision (Snapshot.Seq) p.hashes were computed for; 0: none
	run       []int     // per endpoint id: consecutive leading blocks held
	ran       uint64    // the decision run was computed for; 0: none
	sum       []float64 // per endpoint id: their weights summed
	candID    []int32   // interned ids of the candidates scored
	pos       posIDs

	tiers tierWeights // Holder tags of the KV tiers and their weights

	specTTL time.Duration // 0: no speculative entries
	spec    []specBatch   // speculative entries not yet expired, oldest first
	specAt  int           // spec[:specAt] have expired
	free    [][]uint64    // expired batches' key slices, for reuse
}

// specBatch is one routed request's speculative entries: the ttlcache item of PreRequest.
type specBatch struct {
	ep     int32
	until  time.Time
	hashes []uint64
}

// The index's entry tags: an endpoint's confirmed GPU entries, its speculative ones, and from
// firstTier on one per lower KV tier (tierWeights).
const (
	confirmedGPU = 0
	speculative  = 1
	firstTier    = 2
)

var (
	_ Scorer               = (*PreciseScorer)(nil)
	_ KVEventObserver      = (*PreciseScorer)(nil)
	_ KVEventBatchObserver = (*PreciseScorer)(nil)
	_ PrefixMatcher        = (*PreciseScorer)(nil)
)

// NewPreciseScorer returns a scorer with an empty view of the caches, indexing blocks of
// indexBlockSize tokens out of the engines' blocks of engineBlockSize (a divisor of it).
func NewPreciseScorer(indexBlockSize, engineBlockSize int) *PreciseScorer {
	return &PreciseScorer{blockSize: engineBlockSize, ids: newInterner(), kv: newKVHolders(podsPerKey),
		keys: newPreciseKeys(indexBlockSize / engineBlockSize), tiers: newTierWeights(DefaultPrecisePrefixConfig().TierWeights)}
}

func newPreciseScorer(cfg PrecisePrefixConfig) *PreciseScorer {
	p := NewPreciseScorer(cfg.BlockSize, cfg.EngineBlockSize)
	p.tiers = newTierWeights(cfg.TierWeights)
	if cfg.SpeculativeIndexing {
		p.specTTL = cfg.SpeculativeTTL.D()
	}
	return p
}

// Score writes each candidate's consecutive held blocks over the request's full blocks, each
// block weighed by the best tier the candidate holds it in.
func (p *PreciseScorer) Score(req *Request, s *Snapshot, cand []int, out []float64) {
	clear(out)
	p.expire(s.Now)
	p.hash(req, s.Seq)
	if len(p.hashes) == 0 {
		return
	}
	p.candID = p.candID[:0]
	for _, i := range cand { // a new endpoint gets an id without entries: a run of 0
		p.candID = append(p.candID, p.pos.id(&p.ids, i, s.Endpoints[i].ID))
	}
	p.run = resize(p.run, p.ids.size())
	p.kv.leadingRun(p.hashes, p.run)
	p.ran = s.Seq
	if p.tiers.plain() { // GPU entries only, weighing 1: the run is the score
		for k, id := range p.candID {
			out[k] = float64(p.run[id]) / float64(len(p.hashes))
		}
		return
	}
	p.sum = resize(p.sum, len(p.run))
	p.kv.x.WeightedRun(p.hashes, p.run, p.tiers.weight, p.sum)
	for k, id := range p.candID {
		out[k] = p.sum[id] / float64(len(p.hashes))
	}
}

// MatchedTokens is the match llm-d's prefix-based P/D decider reads from the precise
// producer: the endpoint's leading index blocks held in any tier (speculative entries
// included), unweighted, times the index block size (llm-d/llm-d-router v0.10.0
// preciseprefixcache/producer.go:384-394 and utils.go:48-57 matchedBlockCount;
// prefix_based_pd_decider.go:146-150 uses this count, not the tier-weighted score, so CPU
// hits count fully).
func (p *PreciseScorer) MatchedTokens(req *Request, s *Snapshot, i int) int {
	p.hash(req, s.Seq)
	id, ok := p.ids.lookup(s.Endpoints[i].ID)
	if len(p.hashes) == 0 || !ok {
		return 0
	}
	if s.Seq == 0 || p.ran != s.Seq || int(id) >= len(p.run) {
		p.run = resize(p.run, p.ids.size())
		p.kv.leadingRun(p.hashes, p.run)
		p.ran = s.Seq
	}
	return p.run[id] * p.keys.k * p.blockSize
}

// hash sets p.hashes to req's block keys, unless decision seq already computed them.
func (p *PreciseScorer) hash(req *Request, seq uint64) {
	if seq != 0 && p.seq == seq {
		return
	}
	p.engine = prefix.AppendTokenBlockHashes(p.engine[:0], preciseSalt(req), req.Tokens, p.blockSize)
	p.hashes = p.keys.requestKeys(p.hashes[:0], p.engine)
	p.seq = seq
}

// podsPerKey is llm-d-kv-cache's defaultPodsPerKey: the endpoints kept per block key.
const podsPerKey = 10

// preciseSalt is the first block's parent: the model, and the adapter for a LoRA request.
func preciseSalt(req *Request) uint64 {
	if req.Adapter == "" {
		return prefix.ModelSalt(req.Model)
	}
	return prefix.ModelSalt(req.Model + "\x00" + req.Adapter)
}

// BlocksStored applies one BlockStored event of endpoint (see preciseKeys): its whole index
// blocks become the keys' most recent entries; the least recent of more than podsPerKey
// entries is forgotten (the index's per-key LRU). A lower tier's store (vLLM's CPU tier
// announces its blocks without tokens) gives each block's index key, as its GPU store mapped
// it, an entry of that tier.
func (p *PreciseScorer) BlocksStored(endpoint string, hashes []uint64, parent uint64, hasParent bool, medium string) {
	if onGPU(medium) {
		p.keys.stored(p.kv, p.ids.id(endpoint), hashes, parent, hasParent)
		return
	}
	tag, ok := p.tiers.tag(medium)
	if !ok {
		return
	}
	id := p.ids.id(endpoint)
	for _, h := range hashes {
		p.keys.tierStored(p.kv, id, h, tag)
	}
}

// BlockStored applies a BlockStored event of one block whose parent is not known: with
// index blocks of one engine block, the block is stored; with larger ones it is no whole
// index block and adds nothing (drivers with whole events call BlocksStored).
func (p *PreciseScorer) BlockStored(endpoint string, hash uint64, medium string) {
	p.BlocksStored(endpoint, []uint64{hash}, 0, false, medium)
}

// BlockRemoved applies a BlockRemoved of an engine block: unless another store of it on
// endpoint is outstanding, the endpoint's confirmed entry goes from the index key it maps to;
// a speculative one stays (llm-d evicts the event's PodEntry, whose Speculative flag is unset).
// A lower tier's removal takes that tier's entry.
func (p *PreciseScorer) BlockRemoved(endpoint string, hash uint64, medium string) {
	tag := uint8(confirmedGPU)
	if !onGPU(medium) {
		var ok bool
		if tag, ok = p.tiers.lookup(medium); !ok {
			return
		}
	}
	if id, ok := p.ids.lookup(endpoint); ok {
		p.keys.removed(p.kv, id, hash, tag)
	}
}

// AllBlocksCleared forgets every entry of endpoint, speculative ones included (llm-d's
// InMemoryIndex.Clear matches entries by pod identifier alone), and its store counts.
func (p *PreciseScorer) AllBlocksCleared(endpoint string) {
	if id, ok := p.ids.lookup(endpoint); ok {
		p.kv.cleared(id)
		p.keys.cleared(id)
	}
}

// Routed adds the request's keys on endpoint as speculative entries until SpeculativeTTL
// from now, when enabled; otherwise the view comes from KV events alone.
func (p *PreciseScorer) Routed(req *Request, d Decision, endpoint string, now time.Time) {
	if p.specTTL == 0 {
		p.seq = 0 // the next decision hashes its request afresh
		return
	}
	p.expire(now)
	p.hash(req, d.Seq)
	p.seq = 0
	if len(p.hashes) == 0 {
		return // PreRequest adds nothing and sets no cache item for a request without keys
	}
	id := p.ids.id(endpoint)
	for _, h := range p.hashes {
		p.kv.x.Store(h, prefix.Holder{Endpoint: id, Tag: speculative})
	}
	var keys []uint64
	if n := len(p.free); n > 0 {
		keys, p.free = p.free[n-1][:0], p.free[:n-1]
	}
	p.spec = append(p.spec, specBatch{id, now.Add(p.specTTL), append(keys, p.hashes...)})
}

// expire removes the speculative entries of the requests routed SpeculativeTTL or more
// before now, oldest first. The TTL is fixed, so batches expire in the order they were
// added (for times given in order, as the simulator's and a proxy's clocks are).
func (p *PreciseScorer) expire(now time.Time) {
	for p.specAt < len(p.spec) && !now.Before(p.spec[p.specAt].until) {
		b := &p.spec[p.specAt]
		for _, h := range b.hashes {
			p.kv.x.Remove(h, prefix.Holder{Endpoint: b.ep, Tag: speculative})
		}
		p.free = append(p.free, b.hashes)
		*b = specBatch{}
		p.specAt++
	}
	if p.specAt > len(p.spec)/2 { // drop the expired front, keeping the allocation
		p.spec = p.spec[:copy(p.spec, p.spec[p.specAt:])]
		p.specAt = 0
	}
}

// Finished does nothing: the view comes from KV events (and speculative entries).
func (p *PreciseScorer) Finished(*Request, string, Usage, time.Time) {}

// Removed forgets the endpoint's entries.
func (p *PreciseScorer) Removed(endpoint string) { p.AllBlocksCleared(endpoint) }

// tierWeights numbers the KV tiers precise-prefix has seen as Holder tags (the GPU's
// confirmedGPU and speculative, lower tiers from firstTier on, by lower-cased medium as llm-d
// names them) and weighs each.
type tierWeights struct {
	cfg  map[string]float64
	tags map[string]uint8
	w    []float64 // by tag
}

func newTierWeights(cfg map[string]float64) tierWeights {
	gpu, ok := cfg["gpu"]
	if !ok {
		gpu = 1
	}
	return tierWeights{cfg: maps.Clone(cfg), tags: map[string]uint8{}, w: []float64{gpu, gpu}}
}

// plain reports whether only GPU entries exist and they weigh 1: scores are plain runs.
func (t *tierWeights) plain() bool { return len(t.w) == firstTier && t.w[confirmedGPU] == 1 }

func (t *tierWeights) weight(tag uint8) float64 { return t.w[tag] }

// lookup returns the tag of a lower tier already seen.
func (t *tierWeights) lookup(medium string) (uint8, bool) {
	tag, ok := t.tags[strings.ToLower(medium)]
	return tag, ok
}

// tag returns medium's tag, numbering it when new (false beyond the tags a byte holds).
func (t *tierWeights) tag(medium string) (uint8, bool) {
	name := strings.ToLower(medium)
	if tag, ok := t.tags[name]; ok {
		return tag, true
	}
	if len(t.w) > math.MaxUint8 {
		return 0, false
	}
	w, ok := t.cfg[name]
	if !ok {
		w = 1 // llm-d weighs a tier it has no config for as 1.0
	}
	tag := uint8(len(t.w))
	t.tags[name] = tag
	t.w = append(t.w, w)
	return tag, true
}
