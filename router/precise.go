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
// (routers.md §4): the replicas' real cache contents, learned from their KV events, scored as
// the longest consecutive run of a request's blocks each replica holds, with llm-d's guide
// weights (precise 2, kv-cache utilization 1, queue 1) and the max-score picker.
type PrecisePrefixConfig struct {
	// BlockSize is the KV block size in tokens; it must equal the engines' (16).
	BlockSize int `json:"block_size"`
	// PrefixWeight, KVCacheWeight and QueueWeight weigh the three scorers (2, 1, 1).
	PrefixWeight  float64 `json:"prefix_weight"`
	KVCacheWeight float64 `json:"kv_cache_weight"`
	QueueWeight   float64 `json:"queue_weight"`
}

// DefaultPrecisePrefixConfig returns llm-d's sample precise-prefix configuration.
func DefaultPrecisePrefixConfig() PrecisePrefixConfig {
	return PrecisePrefixConfig{BlockSize: 16, PrefixWeight: 2, KVCacheWeight: 1, QueueWeight: 1}
}

// Validate checks ranges.
func (c PrecisePrefixConfig) Validate() error {
	var errs []error
	if c.BlockSize < 1 {
		errs = append(errs, fmt.Errorf("block_size %d: want > 0", c.BlockSize))
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
		{Scorer: NewPreciseScorer(cfg.BlockSize), Weight: cfg.PrefixWeight},
		{Scorer: KVCacheScorer{}, Weight: cfg.KVCacheWeight},
		{Scorer: QueueScorer{}, Weight: cfg.QueueWeight},
	}, MaxScorePicker{}, rng)
}

// PreciseScorer scores the fraction of a request's full blocks that an endpoint holds as a
// consecutive run from the first block, per the endpoints' KV events. Not safe for concurrent
// use on its own: a Pipeline serializes it.
type PreciseScorer struct {
	blockSize int
	ids       interner
	holders   map[uint64][]int32 // block hash → endpoints caching it
	hashes    []uint64
	run       []int // per endpoint id: consecutive leading blocks held
}

var (
	_ Scorer          = (*PreciseScorer)(nil)
	_ KVEventObserver = (*PreciseScorer)(nil)
)

// NewPreciseScorer returns a scorer with an empty view of the caches.
func NewPreciseScorer(blockSize int) *PreciseScorer {
	return &PreciseScorer{blockSize: blockSize, ids: newInterner(), holders: map[uint64][]int32{}}
}

// Score writes each candidate's consecutive held blocks over the request's full blocks.
func (p *PreciseScorer) Score(req *Request, s *Snapshot, cand []int, out []float64) {
	clear(out)
	p.hashes = prefix.AppendTokenBlockHashes(p.hashes[:0], prefix.ModelSalt(req.Model), req.Tokens, p.blockSize)
	if len(p.hashes) == 0 {
		return
	}
	p.run = resize(p.run, p.ids.size())
	clear(p.run)
	for i, h := range p.hashes {
		alive := false
		for _, ep := range p.holders[h] {
			if p.run[ep] == i { // held every block so far
				p.run[ep]++
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

// BlockStored records that endpoint caches hash.
func (p *PreciseScorer) BlockStored(endpoint string, hash uint64) {
	id := p.ids.id(endpoint)
	if hs := p.holders[hash]; !slices.Contains(hs, id) {
		p.holders[hash] = append(hs, id)
	}
}

// BlockRemoved records that endpoint evicted hash.
func (p *PreciseScorer) BlockRemoved(endpoint string, hash uint64) {
	id, ok := p.ids.lookup(endpoint)
	if !ok {
		return
	}
	hs := slices.DeleteFunc(p.holders[hash], func(e int32) bool { return e == id })
	if len(hs) == 0 {
		delete(p.holders, hash)
	} else {
		p.holders[hash] = hs
	}
}

// AllBlocksCleared forgets everything endpoint cached.
func (p *PreciseScorer) AllBlocksCleared(endpoint string) {
	id, ok := p.ids.lookup(endpoint)
	if !ok {
		return
	}
	for h, hs := range p.holders { // each hash is visited once; the order does not matter
		hs = slices.DeleteFunc(hs, func(e int32) bool { return e == id })
		if len(hs) == 0 {
			delete(p.holders, h)
		} else {
			p.holders[h] = hs
		}
	}
}

// Routed, Finished and Removed: the view comes from KV events, not from routing history.
func (p *PreciseScorer) Routed(*Request, string, time.Time)          {}
func (p *PreciseScorer) Finished(*Request, string, Usage, time.Time) {}
func (p *PreciseScorer) Removed(endpoint string)                     { p.AllBlocksCleared(endpoint) }
