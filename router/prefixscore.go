package router

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"kvroute/router/prefix"
)

// PrefixScoreConfig configures prefix-score, the Gateway API Inference Extension endpoint
// picker's default profile (seed 003; routers.md §3.2–3.4): the approximate prefix scorer,
// the queue scorer and the KV-cache-utilization scorer, summed with weights, then the
// max-score picker.
type PrefixScoreConfig struct {
	// BlockSizeTokens and CharsPerToken give the hashed chunk length in characters (16 × 4 = 64).
	BlockSizeTokens int `json:"block_size_tokens"`
	CharsPerToken   int `json:"average_chars_per_token"`
	// MaxPrefixBlocks caps the chunks hashed per request (256).
	MaxPrefixBlocks int `json:"max_prefix_blocks_to_match"`
	// LRUCapacityPerServer is each endpoint's index capacity in chunks (31,250).
	LRUCapacityPerServer int `json:"lru_capacity_per_server"`
	// AutoTune sizes each endpoint's index from its reported num_gpu_blocks when known (true).
	AutoTune bool `json:"auto_tune"`
	// PrefixWeight, QueueWeight and KVCacheWeight weigh the three scorers (3, 2, 2).
	PrefixWeight  float64 `json:"prefix_weight"`
	QueueWeight   float64 `json:"queue_weight"`
	KVCacheWeight float64 `json:"kv_cache_weight"`
}

// DefaultPrefixScoreConfig returns GIE's defaults.
func DefaultPrefixScoreConfig() PrefixScoreConfig {
	return PrefixScoreConfig{
		BlockSizeTokens: 16, CharsPerToken: 4, MaxPrefixBlocks: 256, LRUCapacityPerServer: 31250,
		AutoTune: true, PrefixWeight: 3, QueueWeight: 2, KVCacheWeight: 2,
	}
}

// Validate checks ranges.
func (c PrefixScoreConfig) Validate() error {
	var errs []error
	for _, f := range []struct {
		name string
		v    int
	}{
		{"block_size_tokens", c.BlockSizeTokens}, {"average_chars_per_token", c.CharsPerToken},
		{"max_prefix_blocks_to_match", c.MaxPrefixBlocks}, {"lru_capacity_per_server", c.LRUCapacityPerServer},
	} {
		if f.v < 1 {
			errs = append(errs, fmt.Errorf("%s %d: want > 0", f.name, f.v))
		}
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"prefix_weight", c.PrefixWeight}, {"queue_weight", c.QueueWeight}, {"kv_cache_weight", c.KVCacheWeight}} {
		if !(f.v >= 0) || math.IsInf(f.v, 0) {
			errs = append(errs, fmt.Errorf("%s %v: want a finite value >= 0", f.name, f.v))
		}
	}
	return errors.Join(errs...)
}

// NewPrefixScore returns GIE's default scheduling profile as a Pipeline named "prefix-score".
func NewPrefixScore(cfg PrefixScoreConfig, rng *rand.Rand) (*Pipeline, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("router: prefix-score: %w", err)
	}
	ps, err := NewPrefixScorer(cfg)
	if err != nil {
		return nil, fmt.Errorf("router: prefix-score: %w", err)
	}
	return NewPipeline("prefix-score", ReasonMaxScore, nil, []Weighted{
		{Scorer: ps, Weight: cfg.PrefixWeight},
		{Scorer: QueueScorer{}, Weight: cfg.QueueWeight},
		{Scorer: KVCacheScorer{}, Weight: cfg.KVCacheWeight},
	}, MaxScorePicker{}, rng)
}

// PrefixScorer is GIE's approximate prefix-cache scorer. The prompt is cut into chunks of
// BlockSizeTokens × CharsPerToken characters (the trailing partial chunk included, at most
// MaxPrefixBlocks), hashed as a chain seeded by model and adapter; an endpoint scores the
// fraction of leading chunks the per-endpoint LRU index says it holds. Routed adds every chunk
// for the chosen endpoint. It is not safe for concurrent use on its own: a Pipeline serializes it.
type PrefixScorer struct {
	cfg   PrefixScoreConfig
	ids   interner
	index *prefix.Index
	count []int
	caps  []int // capacity last set per endpoint id by auto-tuning
	memo  hashMemo
}

var _ Observer = (*PrefixScorer)(nil)

// NewPrefixScorer returns an empty prefix scorer.
func NewPrefixScorer(cfg PrefixScoreConfig) (*PrefixScorer, error) {
	index, err := prefix.NewIndex(cfg.LRUCapacityPerServer)
	if err != nil {
		return nil, err
	}
	return &PrefixScorer{cfg: cfg, ids: newInterner(), index: index}, nil
}

func (p *PrefixScorer) hashes(req *Request) []uint64 {
	h, _ := p.memo.get(req, func(dst []uint64, buf []byte) ([]uint64, []byte, error) {
		chunk := p.cfg.BlockSizeTokens * p.cfg.CharsPerToken
		if len(req.Prompt) < chunk {
			return dst[:0], buf, nil // GIE skips inputs shorter than one chunk
		}
		return prefix.ChainHashString(dst[:0], prefix.Seed(req.Model, req.Adapter), req.Prompt, chunk, p.cfg.MaxPrefixBlocks, true), buf, nil
	})
	return h
}

// Score writes matched chunks / total chunks per candidate.
func (p *PrefixScorer) Score(req *Request, s *Snapshot, cand []int, out []float64) {
	hashes := p.hashes(req)
	clear(out)
	if len(hashes) == 0 {
		return
	}
	p.count = resize(p.count, p.ids.size())
	clear(p.count)
	p.index.Match(hashes, p.count)
	for k, i := range cand {
		if id, ok := p.ids.lookup(s.Endpoints[i].ID); ok {
			out[k] = float64(p.count[id]) / float64(len(hashes))
		}
		if e := &s.Endpoints[i]; p.cfg.AutoTune && e.NumGPUBlocks > 0 {
			p.autoTune(e)
		}
	}
}

// autoTune sizes the endpoint's index from its KV capacity: vLLM's blocks of 16 tokens are the
// chunks of 16 tokens × CharsPerToken characters that GIE hashes.
func (p *PrefixScorer) autoTune(e *EndpointState) {
	id := p.ids.id(e.ID)
	for len(p.caps) <= int(id) {
		p.caps = append(p.caps, 0)
	}
	if want := max(1, e.NumGPUBlocks*16/p.cfg.BlockSizeTokens); p.caps[id] != want {
		if p.index.SetCapacity(id, want) == nil {
			p.caps[id] = want
		}
	}
}

// Routed adds the request's chunks to the chosen endpoint's index.
func (p *PrefixScorer) Routed(req *Request, endpoint string, _ time.Time) {
	if hashes := p.hashes(req); len(hashes) > 0 {
		p.index.Add(hashes, p.ids.id(endpoint))
	}
}

// Finished does nothing: the index forgets through its LRU.
func (*PrefixScorer) Finished(*Request, string, Usage, time.Time) {}

// Removed drops the endpoint's index.
func (p *PrefixScorer) Removed(endpoint string) {
	if id, ok := p.ids.lookup(endpoint); ok {
		p.index.RemoveEndpoint(id)
	}
}
