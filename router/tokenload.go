package router

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"kvroute/router/prefix"
	"kvroute/router/tokenize"
)

// TokenLoadConfig configures token-load, llm-d's "optimized baseline" scheduling profile
// (llm-d/llm-d guides/optimized-baseline; plugins of llm-d/llm-d-router at 066c20ea):
//
//   - prefix-cache-affinity-filter (pkg/epp/framework/plugins/scheduling/filter/
//     prefixcacheaffinity/plugin.go): endpoints whose prefix score (matched blocks / request
//     blocks) is at least AffinityThreshold are sticky; with none, all stay; with
//     probability ExplorationProbability the gate is skipped; if the best sticky endpoint's
//     estimated TTFT (in-flight tokens / PeakPrefillThroughput) exceeds the best other
//     endpoint's by more than MaxTTFTPenaltyMs, all stay. Defaults are the plugin's
//     DefaultConfig (0.80, 0, 18,000 ms, 15,928 tokens/s).
//   - token-load-scorer (scheduling/scorer/tokenload): 1 − min(1, in-flight tokens /
//     QueueThresholdTokens), threshold 4,194,304 (128 requests × 32K).
//   - max-score-picker: the highest score, ties at random.
//
// In-flight tokens are the router's own (requestcontrol/dataproducer/inflightload
// producer.go): each routed request adds its prompt tokens minus the prefix the endpoint
// matched, and with addEstimatedOutputTokens off (the default) they are released at the
// first token (StartOfStream); callers that do not report first tokens release them at the
// end. The prefix match is the approximate prefix producer's: chained hashes of 64-token
// blocks (llm-d-router v0.10.0 dataproducer/prefixhash: blocks of at least 64 tokens, the
// trailing partial block hashed, model in the first hash) in a per-endpoint LRU of 31,250
// blocks; without token ids, 64 × 4 characters stand for a block.
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
	// BlockSizeTokens is the prefix index's block size in tokens (64).
	BlockSizeTokens int `json:"block_size_tokens"`
	// LRUCapacityPerServer is an endpoint's prefix index capacity in blocks (31,250).
	LRUCapacityPerServer int `json:"lru_capacity_per_server"`
}

// DefaultTokenLoadConfig returns the llm-d plugin defaults.
func DefaultTokenLoadConfig() TokenLoadConfig {
	return TokenLoadConfig{
		AffinityThreshold: 0.80, MaxTTFTPenaltyMs: 18000, PeakPrefillThroughput: 15928,
		QueueThresholdTokens: 4194304, BlockSizeTokens: 64, LRUCapacityPerServer: 31250,
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
	ap, err := newApproxPrefix(cfg.BlockSizeTokens, cfg.LRUCapacityPerServer)
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

// Score writes 1 − min(1, in-flight tokens / threshold).
func (t *TokenLoadScorer) Score(_ *Request, s *Snapshot, cand []int, out []float64) {
	for k, i := range cand {
		out[k] = 1 - math.Min(1, float64(t.inFlight(s.Endpoints[i].ID))/float64(t.threshold))
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
		n -= min(n, t.prefix.matchedTokens(req, d.Seq, endpoint))
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

// Filter keeps the sticky candidates unless the gate is skipped or broken.
func (f *affinityFilter) Filter(req *Request, s *Snapshot, cand []int) []int {
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

// approxPrefix is the approximate prefix producer: chained block hashes per request, a
// per-endpoint LRU index of the blocks routed there.
type approxPrefix struct {
	block int
	ids   interner
	index *prefix.Index
	count []int
	memo  hashMemo
}

func newApproxPrefix(block, capacity int) (*approxPrefix, error) {
	index, err := prefix.NewIndex(capacity)
	if err != nil {
		return nil, err
	}
	return &approxPrefix{block: block, ids: newInterner(), index: index}, nil
}

// hashes returns the request's block hashes: token blocks when token ids are known, else
// chunks of block × 4 characters; the trailing partial block included.
func (a *approxPrefix) hashes(req *Request, seq uint64) []uint64 {
	h, _ := a.memo.get(seq, func(dst []uint64, buf []byte) ([]uint64, []byte, error) {
		seed := prefix.Seed(req.Model, req.Adapter)
		if len(req.Tokens) > 0 {
			buf = tokenize.AppendTokenBytes(buf[:0], req.Tokens)
			return prefix.ChainHash(dst[:0], seed, buf, a.block*4, 0, true), buf, nil
		}
		return prefix.ChainHashString(dst[:0], seed, req.Prompt, a.block*4, 0, true), buf, nil
	})
	return h
}

// scores writes matched blocks / request blocks per candidate.
func (a *approxPrefix) scores(req *Request, s *Snapshot, cand []int, out []float64) {
	clear(out)
	hs := a.hashes(req, s.Seq)
	if len(hs) == 0 {
		return
	}
	a.count = resize(a.count, a.ids.size())
	a.index.Match(hs, a.count)
	for k, i := range cand {
		if id, ok := a.ids.lookup(s.Endpoints[i].ID); ok {
			out[k] = float64(a.count[id]) / float64(len(hs))
		}
	}
}

// matchedTokens is how many of the request's tokens endpoint holds, in whole blocks.
func (a *approxPrefix) matchedTokens(req *Request, seq uint64, endpoint string) int64 {
	id, ok := a.ids.lookup(endpoint)
	hs := a.hashes(req, seq)
	if !ok || len(hs) == 0 {
		return 0
	}
	a.count = resize(a.count, a.ids.size())
	a.index.Match(hs, a.count)
	return int64(a.count[id] * a.block)
}

// add records the request's blocks on endpoint.
func (a *approxPrefix) add(req *Request, seq uint64, endpoint string) {
	if hs := a.hashes(req, seq); len(hs) > 0 {
		a.index.Add(hs, a.ids.id(endpoint))
	}
}

// remove drops endpoint's index.
func (a *approxPrefix) remove(endpoint string) {
	if id, ok := a.ids.lookup(endpoint); ok {
		a.index.RemoveEndpoint(id)
	}
}
