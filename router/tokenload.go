package router

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"kvroute/router/prefix"
)

// TokenLoadConfig configures token-load, the scheduling profile of llm-d's optimized-baseline
// guide (llm-d/llm-d guides/optimized-baseline/router/optimized-baseline.values.yaml at
// 0a3b0c93) over the plugins of llm-d-router v0.10.0 (llm-d/llm-d-router, tag v0.10.0): the
// approx-prefix-cache-producer and the inflight-load-producer feed the
// prefix-cache-affinity-filter, then the token-load-scorer alone, then the max-score picker
// (the default picker, pkg/epp/config/loader/defaults.go 179–192).
//
//   - prefix-cache-affinity-filter (pkg/epp/framework/plugins/scheduling/filter/
//     prefixcacheaffinity/plugin.go 165–211): endpoints whose prefix score (matched blocks /
//     request blocks) is at least AffinityThreshold are sticky; with none, all stay; with
//     probability ExplorationProbability the gate is skipped; if the best sticky endpoint's
//     estimated TTFT (in-flight tokens / PeakPrefillThroughput) exceeds the best other
//     endpoint's by more than MaxTTFTPenaltyMs, all stay. Defaults are the plugin's
//     DefaultConfig (0.80, 0, 18,000 ms, 15,928 tokens/s; lines 93–101).
//   - token-load-scorer (scheduling/scorer/tokenload/token_load.go 93–130): 1 − min(1, load /
//     QueueThresholdTokens), load = the endpoint's in-flight tokens + this request's uncached
//     tokens on that endpoint; threshold 4,194,304 (128 requests × 32K).
//   - max-score-picker: the highest score, ties at random.
//
// In-flight tokens are the router's own (requestcontrol/dataproducer/inflightload
// producer.go): a request's uncached tokens on an endpoint are its unmatched indexed blocks,
// each a whole block, plus any tokens past the indexed ones (uncachedInputTokens 610–639);
// routing adds them to the endpoint (PreRequest 393–472) and, with addEstimatedOutputTokens
// off (the default), the first token releases them (ResponseBody 511–526); callers that do
// not report first tokens release them at the end. The prefix producer is approxPrefix:
// blocks of max(64, engine block size) tokens, at most MaxPrefixTokens tokens hashed.
type TokenLoadConfig struct {
	// AffinityThreshold is the prefix score (matched blocks / request blocks, in [0, 1]) at
	// which an endpoint is sticky (0.80; 0 turns the affinity filter off).
	AffinityThreshold float64 `json:"affinity_threshold"`
	// ExplorationProbability is the chance, in [0, 1], that a decision skips the affinity
	// filter (0).
	ExplorationProbability float64 `json:"exploration_probability"`
	// MaxTTFTPenaltyMs is how much longer, in milliseconds, the best sticky endpoint's
	// estimated TTFT may be than the best other endpoint's before all endpoints stay
	// (18,000; 0: no limit).
	MaxTTFTPenaltyMs float64 `json:"max_ttft_penalty_ms"`
	// PeakPrefillThroughput is the prefill rate, in tokens per second, that turns in-flight
	// tokens into an estimated TTFT (15,928; needed when MaxTTFTPenaltyMs > 0).
	PeakPrefillThroughput float64 `json:"peak_prefill_throughput"`
	// QueueThresholdTokens is the in-flight token count at which the token-load score
	// reaches 0 (4,194,304).
	QueueThresholdTokens int64 `json:"queue_threshold_tokens"`
	// BlockSizeTokens is the producer's block size when auto-tuning has no engine block size
	// (16); a block is never below 64 tokens (approximateprefix/plugin.go 52, 353–355).
	BlockSizeTokens int `json:"block_size_tokens"`
	// LRUCapacityPerServer is an endpoint's index capacity in blocks when auto-tuning has no
	// num_gpu_blocks (31,250).
	LRUCapacityPerServer int `json:"lru_capacity_per_server"`
	// AutoTune takes the block size from the first candidate's engine block size and each
	// endpoint's index capacity from its num_gpu_blocks (true).
	AutoTune bool `json:"auto_tune"`
	// MaxPrefixTokens caps the tokens hashed per request; 0 hashes the whole prompt (131,072).
	MaxPrefixTokens int `json:"max_prefix_tokens_to_match"`
}

// DefaultTokenLoadConfig returns the llm-d-router v0.10.0 plugin defaults
// (approximateprefix/types.go 99–165 for the producer).
func DefaultTokenLoadConfig() TokenLoadConfig {
	return TokenLoadConfig{
		AffinityThreshold: 0.80, MaxTTFTPenaltyMs: 18000, PeakPrefillThroughput: 15928,
		QueueThresholdTokens: 4194304, BlockSizeTokens: 16, LRUCapacityPerServer: prefix.DefaultIndexCapacity,
		AutoTune: true, MaxPrefixTokens: llmdMaxPrefixTokens,
	}
}

// Validate checks ranges.
func (c TokenLoadConfig) Validate() error {
	var errs []error
	for _, f := range []struct {
		name   string
		v, max float64
	}{
		{"affinity_threshold", c.AffinityThreshold, 1}, {"exploration_probability", c.ExplorationProbability, 1},
		{"max_ttft_penalty_ms", c.MaxTTFTPenaltyMs, math.MaxFloat64}, {"peak_prefill_throughput", c.PeakPrefillThroughput, math.MaxFloat64},
	} {
		if !(f.v >= 0 && f.v <= f.max) {
			errs = append(errs, fmt.Errorf("%s %v: want 0..%v", f.name, f.v, f.max))
		}
	}
	if c.MaxTTFTPenaltyMs > 0 && c.PeakPrefillThroughput == 0 {
		errs = append(errs, errors.New("peak_prefill_throughput must be > 0 when max_ttft_penalty_ms is"))
	}
	if c.QueueThresholdTokens < 1 || c.BlockSizeTokens < 1 || c.LRUCapacityPerServer < 1 {
		errs = append(errs, fmt.Errorf("queue_threshold_tokens %d, block_size_tokens %d, lru_capacity_per_server %d: want > 0",
			c.QueueThresholdTokens, c.BlockSizeTokens, c.LRUCapacityPerServer))
	}
	if c.MaxPrefixTokens < 0 {
		errs = append(errs, fmt.Errorf("max_prefix_tokens_to_match %d: want >= 0", c.MaxPrefixTokens))
	}
	return errors.Join(errs...)
}

// TokenLoad is the token-load policy: a Pipeline that also hears first tokens.
type TokenLoad struct {
	*Pipeline
	load *TokenLoadScorer
}

var (
	_ FirstTokenObserver = (*TokenLoad)(nil)
	_ TextFree           = (*TokenLoad)(nil)
)

// NewTokenLoad returns the token-load profile; rng drives exploration and ties.
func NewTokenLoad(cfg TokenLoadConfig, rng *rand.Rand) (*TokenLoad, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("router: token-load: %w", err)
	}
	ap, err := newApproxPrefix(cfg)
	if err != nil {
		return nil, fmt.Errorf("router: token-load: %w", err)
	}
	sc := &TokenLoadScorer{threshold: cfg.QueueThresholdTokens, prefix: ap, ids: newInterner(), load: newActiveSeqs()}
	f := &affinityFilter{cfg: cfg, prefix: ap, load: sc, rng: rng}
	p, err := NewPipeline("token-load", ReasonMaxScore, []Filter{f}, []Weighted{{Scorer: sc, Weight: 1}}, MaxScorePicker{}, rng)
	if err != nil {
		return nil, err
	}
	return &TokenLoad{Pipeline: p, load: sc}, nil
}

// FirstToken releases the request's in-flight tokens.
func (t *TokenLoad) FirstToken(req *Request, endpoint string, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.load.FirstToken(req, endpoint, now)
}

// TextFree is false: without token ids the prefix producer hashes characters.
func (*TokenLoad) TextFree() bool { return false }

// TokenLoadScorer is llm-d's token-load-scorer over the router's own in-flight tokens. With
// a prefix producer it discounts each request's matched prefix when charging it. Not safe
// for concurrent use on its own: a Pipeline serializes it.
type TokenLoadScorer struct {
	threshold int64
	prefix    *approxPrefix // nil: no discount
	ids       interner
	load      activeSeqs
}

var (
	_ Scorer             = (*TokenLoadScorer)(nil)
	_ Observer           = (*TokenLoadScorer)(nil)
	_ FirstTokenObserver = (*TokenLoadScorer)(nil)
)

// NewTokenLoadScorer returns a token-load scorer with the given threshold (llm-d: 4,194,304)
// that charges whole prompts.
func NewTokenLoadScorer(threshold int64) *TokenLoadScorer {
	return &TokenLoadScorer{threshold: max(threshold, 1), ids: newInterner(), load: newActiveSeqs()}
}

// inFlight returns the endpoint's in-flight tokens.
func (t *TokenLoadScorer) inFlight(endpoint string) int64 {
	if id, ok := t.ids.lookup(endpoint); ok {
		return t.load.prefill(id)
	}
	return 0
}

// Score writes 1 − min(1, (in-flight tokens + the request's uncached tokens) / threshold).
func (t *TokenLoadScorer) Score(req *Request, s *Snapshot, cand []int, out []float64) {
	n := inputTokens(req)
	total := 0
	if t.prefix != nil {
		if !t.prefix.prepared {
			t.prefix.prepare(s, cand)
		}
		t.prefix.prepared = false
		n = t.prefix.inputTokens(req)
		total = t.prefix.match(req, s.Seq)
	}
	for k, i := range cand {
		id := s.Endpoints[i].ID
		load := t.inFlight(id)
		if t.prefix != nil {
			load += t.prefix.uncached(n, total, id)
		} else {
			load += n
		}
		out[k] = 1 - math.Min(1, float64(load)/float64(t.threshold))
	}
}

// inputTokens is the request's prompt length in tokens, estimated at 4 characters per token
// when unknown.
func inputTokens(req *Request) int64 {
	if n := isl(req); n > 0 {
		return int64(n)
	}
	return int64(len(req.Prompt)+3) / 4
}

// Routed charges the request's uncached tokens to endpoint and records its prefix there.
func (t *TokenLoadScorer) Routed(req *Request, d Decision, endpoint string, _ time.Time) {
	id := t.ids.id(endpoint)
	n := inputTokens(req)
	if t.prefix != nil {
		n = t.prefix.inputTokens(req)
		n = t.prefix.uncached(n, t.prefix.match(req, d.Seq), endpoint)
		t.prefix.add(req, d.Seq, endpoint)
	}
	t.load.add(req.ID, id, n, nil, nil)
}

// FirstToken releases the request's tokens.
func (t *TokenLoadScorer) FirstToken(req *Request, _ string, _ time.Time) { t.load.prefillDone(req.ID) }

// Finished releases the request's tokens if its first token was not reported.
func (t *TokenLoadScorer) Finished(req *Request, _ string, _ Usage, _ time.Time) { t.load.done(req.ID) }

// Removed forgets the endpoint's load and prefixes.
func (t *TokenLoadScorer) Removed(endpoint string) {
	if id, ok := t.ids.lookup(endpoint); ok {
		t.load.drop(id)
	}
	if t.prefix != nil {
		t.prefix.remove(endpoint)
	}
}

// affinityFilter is llm-d's prefix-cache-affinity-filter with the prefill-throughput TTFT
// source (see TokenLoadConfig).
type affinityFilter struct {
	cfg    TokenLoadConfig
	prefix *approxPrefix
	load   *TokenLoadScorer
	rng    *rand.Rand
	frac   []float64
}

// MatchedTokens is the approximate producer's match on endpoint i as the Pick that chose it
// saw the index: what llm-d's P/D decider reads from the producer its handler wires.
func (f *affinityFilter) MatchedTokens(req *Request, s *Snapshot, i int) int {
	return f.prefix.matched(req, s, i)
}

// Filter keeps the sticky candidates unless the gate is skipped or broken.
func (f *affinityFilter) Filter(req *Request, s *Snapshot, cand []int) []int {
	f.prefix.prepare(s, cand)
	if len(cand) <= 1 || f.cfg.AffinityThreshold <= 0 {
		return cand
	}
	if f.rng.Float64() < f.cfg.ExplorationProbability {
		return cand
	}
	f.frac = resize(f.frac, len(cand))
	f.prefix.scores(req, s, cand, f.frac)
	bestSticky, bestOther, sticky := math.Inf(1), math.Inf(1), 0
	for k, i := range cand {
		ttft := float64(f.load.inFlight(s.Endpoints[i].ID)) / f.cfg.PeakPrefillThroughput * 1000
		if f.frac[k] >= f.cfg.AffinityThreshold {
			sticky++
			bestSticky = min(bestSticky, ttft)
		} else {
			bestOther = min(bestOther, ttft)
		}
	}
	if sticky == 0 {
		return cand
	}
	if f.cfg.MaxTTFTPenaltyMs > 0 && sticky < len(cand) && bestSticky-bestOther > f.cfg.MaxTTFTPenaltyMs {
		return cand
	}
	out := cand[:0]
	for k, i := range cand {
		if f.frac[k] >= f.cfg.AffinityThreshold {
			out = append(out, i)
		}
	}
	return out
}
