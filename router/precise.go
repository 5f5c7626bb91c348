package router

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"kvroute/router/prefix"
)

// PrecisePrefixConfig configures precise-prefix, llm-d's precise-prefix-cache-scorer profile
// (llm-d/llm-d-kv-cache v0.8.1 pkg/kvcache; llm-d/llm-d-router v0.10.0
// pkg/epp/framework/plugins/requestcontrol/dataproducer/preciseprefixcache): the replicas' real cache contents, learned from their KV events, scored as
// the longest consecutive run of a request's blocks each replica holds, with llm-d's guide
// weights (precise 2, kv-cache utilization 1, queue 1) and the max-score picker.
type PrecisePrefixConfig struct {
	// BlockSize is the KV block size in tokens; it must equal the engines' (16).
	BlockSize int `json:"block_size"`
	// PrefixWeight, KVCacheWeight and QueueWeight weigh the three scorers (2, 1, 1).
	PrefixWeight  float64 `json:"prefix_weight"`
	KVCacheWeight float64 `json:"kv_cache_weight"`
	QueueWeight   float64 `json:"queue_weight"`
	// SpeculativeIndexing also counts, for SpeculativeTTL after each decision, the request's
	// blocks as held by the chosen endpoint, covering the gap until its KV events arrive
	// (llm-d's speculativeIndexing: off by default, TTL 2 s).
	SpeculativeIndexing bool     `json:"speculative_indexing"`
	SpeculativeTTL      Duration `json:"speculative_ttl"`
}

// DefaultPrecisePrefixConfig returns llm-d's sample precise-prefix configuration.
func DefaultPrecisePrefixConfig() PrecisePrefixConfig {
	return PrecisePrefixConfig{BlockSize: 16, PrefixWeight: 2, KVCacheWeight: 1, QueueWeight: 1, SpeculativeTTL: Duration(2 * time.Second)}
}

// Validate checks ranges.
func (c PrecisePrefixConfig) Validate() error {
	var errs []error
	if c.BlockSize < 1 {
		errs = append(errs, fmt.Errorf("block_size %d: want > 0", c.BlockSize))
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
// consecutive run from the first block, per the endpoints' KV events. As llm-d-kv-cache's
// in-memory index (v0.8.1 pkg/kvcache/kvblock/in_memory.go 36, 197) it keeps at most
// podsPerKey endpoints per block, least recently stored first out. Block hashes are salted with
// the model and, for a LoRA request, the adapter name (llm-d-kv-cache #243). Speculative
// entries live SpeculativeTTL: llm-d-router v0.10.0 keeps them in a ttlcache
// (dataproducer/preciseprefixcache/prerequest.go buildSpeculativeCache), whose cleanup timer
// fires at the earliest expiry. Not safe for concurrent use on its own: a Pipeline serializes it.
type PreciseScorer struct {
	blockSize int
	ids       interner
	kv        kvHolders // block hash → endpoints caching it, podsPerKey at most
	hashes    []uint64
	run       []int // per endpoint id: consecutive leading blocks held

	specTTL time.Duration // 0: no speculative entries
	spec    map[uint64][]specEntry
	swept   time.Time
}

// specEntry is a speculative holder of a block: the endpoint a request was just routed to.
type specEntry struct {
	ep    int32
	until time.Time
}

var (
	_ Scorer          = (*PreciseScorer)(nil)
	_ KVEventObserver = (*PreciseScorer)(nil)
)

// NewPreciseScorer returns a scorer with an empty view of the caches.
func NewPreciseScorer(blockSize int) *PreciseScorer {
	return &PreciseScorer{blockSize: blockSize, ids: newInterner(), kv: newKVHolders(podsPerKey)}
}

func newPreciseScorer(cfg PrecisePrefixConfig) *PreciseScorer {
	p := NewPreciseScorer(cfg.BlockSize)
	if cfg.SpeculativeIndexing {
		p.specTTL, p.spec = cfg.SpeculativeTTL.D(), map[uint64][]specEntry{}
	}
	return p
}

// Score writes each candidate's consecutive held blocks over the request's full blocks.
func (p *PreciseScorer) Score(req *Request, s *Snapshot, cand []int, out []float64) {
	clear(out)
	p.hashes = prefix.AppendTokenBlockHashes(p.hashes[:0], preciseSalt(req), req.Tokens, p.blockSize)
	if len(p.hashes) == 0 {
		return
	}
	p.run = resize(p.run, p.ids.size())
	clear(p.run)
	for i, h := range p.hashes {
		alive := false
		for _, ep := range p.kv.holders[h] {
			if p.run[ep] == i { // held every block so far
				p.run[ep]++
				alive = true
			}
		}
		for _, e := range p.spec[h] {
			if p.run[e.ep] == i && s.Now.Before(e.until) {
				p.run[e.ep]++
				alive = true
			}
		}
		if !alive {
			break
		}
	}
	for k, i := range cand {
		if id, ok := p.ids.lookup(s.Endpoints[i].ID); ok {
			out[k] = float64(p.run[id]) / float64(len(p.hashes))
		}
	}
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

// BlockStored records that endpoint caches hash, as the block's most recent holder; the
// least recent of more than podsPerKey holders is forgotten (the index's per-key LRU).
func (p *PreciseScorer) BlockStored(endpoint string, hash uint64) {
	p.kv.stored(p.ids.id(endpoint), hash)
}

// BlockRemoved records that endpoint evicted hash.
func (p *PreciseScorer) BlockRemoved(endpoint string, hash uint64) {
	if id, ok := p.ids.lookup(endpoint); ok {
		p.kv.removed(id, hash)
	}
}

// AllBlocksCleared forgets everything endpoint cached.
func (p *PreciseScorer) AllBlocksCleared(endpoint string) {
	id, ok := p.ids.lookup(endpoint)
	if !ok {
		return
	}
	p.kv.cleared(id)
	for h, es := range p.spec {
		es = slices.DeleteFunc(es, func(e specEntry) bool { return e.ep == id })
		if len(es) == 0 {
			delete(p.spec, h)
		} else {
			p.spec[h] = es
		}
	}
}

// Routed records speculative entries for the request's blocks on endpoint, when enabled;
// otherwise the view comes from KV events alone.
func (p *PreciseScorer) Routed(req *Request, endpoint string, now time.Time) {
	if p.spec == nil {
		return
	}
	id := p.ids.id(endpoint)
	until := now.Add(p.specTTL)
	p.hashes = prefix.AppendTokenBlockHashes(p.hashes[:0], preciseSalt(req), req.Tokens, p.blockSize)
	for _, h := range p.hashes {
		p.spec[h] = append(p.spec[h], specEntry{id, until})
	}
	if now.Sub(p.swept) >= p.specTTL {
		p.sweep(now)
	}
}

// sweep drops expired speculative entries.
func (p *PreciseScorer) sweep(now time.Time) {
	p.swept = now
	for h, es := range p.spec { // each hash once; the order does not matter
		es = slices.DeleteFunc(es, func(e specEntry) bool { return !now.Before(e.until) })
		if len(es) == 0 {
			delete(p.spec, h)
		} else {
			p.spec[h] = es
		}
	}
}

// Finished does nothing: the view comes from KV events (and speculative entries).
func (p *PreciseScorer) Finished(*Request, string, Usage, time.Time) {}

// Removed forgets the endpoint's cache.
func (p *PreciseScorer) Removed(endpoint string) { p.AllBlocksCleared(endpoint) }
