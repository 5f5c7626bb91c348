package router

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"time"
)

// Filter narrows the candidate endpoints (indices into the snapshot). It may reuse cand's
// storage. Returning no candidates makes the pipeline fail with ErrNoEndpoint, as a GIE
// scheduler profile does.
type Filter interface {
	Filter(req *Request, s *Snapshot, cand []int) []int
}

// Scorer writes a score in [0, 1] for each candidate into out (len(out) == len(cand));
// higher is better. Scores outside [0, 1] are clamped by the pipeline.
type Scorer interface {
	Score(req *Request, s *Snapshot, cand []int, out []float64)
}

// Picker chooses among scored candidates and returns the chosen endpoint index.
type Picker interface {
	Pick(scores []float64, cand []int, rng *rand.Rand) int
}

// Weighted is a scorer with its weight in the sum.
type Weighted struct {
	Scorer Scorer
	Weight float64
}

// Pipeline composes filters, weighted scorers and a picker into a Policy, the shape of the
// Gateway API Inference Extension's scheduler profile (kubernetes-sigs/gateway-api-inference-extension v1.5.0, pkg/epp/framework/interface/scheduling/plugins.go): filters in sequence,
// the final score of an endpoint is Σ weight·score, then the picker decides. Scorers and
// filters that implement Observer receive the pipeline's Observer calls.
type Pipeline struct {
	name    string
	reason  string
	filters []Filter
	scorers []Weighted
	picker  Picker
	matcher PrefixMatcher // the first filter or scorer that is one; nil: none

	mu     sync.Mutex
	rng    *rand.Rand
	cand   []int
	total  []float64
	scores []float64
}

var (
	_ Policy        = (*Pipeline)(nil)
	_ Observer      = (*Pipeline)(nil)
	_ PrefixMatcher = (*Pipeline)(nil)

	_ KVEventBatchObserver = (*Pipeline)(nil)
)

// NewPipeline returns a pipeline named name. The ready-and-serves-model filter always runs
// first; a nil picker means MaxScorePicker. reason labels its decisions.
func NewPipeline(name, reason string, filters []Filter, scorers []Weighted, picker Picker, rng *rand.Rand) (*Pipeline, error) {
	for _, w := range scorers {
		if w.Scorer == nil || !(w.Weight >= 0) || math.IsInf(w.Weight, 0) {
			return nil, fmt.Errorf("router: pipeline %s: scorer %T has weight %v: want a finite weight >= 0", name, w.Scorer, w.Weight)
		}
	}
	if picker == nil {
		picker = MaxScorePicker{}
	}
	p := &Pipeline{name: name, reason: reason, filters: filters, scorers: scorers, picker: picker, rng: rng}
	for _, f := range filters {
		if m, ok := f.(PrefixMatcher); ok && p.matcher == nil {
			p.matcher = m
		}
	}
	for _, w := range scorers {
		if m, ok := w.Scorer.(PrefixMatcher); ok && p.matcher == nil {
			p.matcher = m
		}
	}
	return p, nil
}

// Name returns the pipeline's registry name.
func (p *Pipeline) Name() string { return p.name }

// Pick runs filters, scorers and the picker.
func (p *Pipeline) Pick(req *Request, s *Snapshot) (Decision, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var err error
	if p.cand, err = Eligible(p.cand, req, s); err != nil {
		return Decision{}, err
	}
	for _, f := range p.filters {
		if p.cand = f.Filter(req, s, p.cand); len(p.cand) == 0 {
			return Decision{}, fmt.Errorf("%w: filter %T left no candidate", ErrNoEndpoint, f)
		}
	}
	n := len(p.cand)
	p.total = resize(p.total, n)
	p.scores = resize(p.scores, n)
	clear(p.total)
	for _, w := range p.scorers {
		w.Scorer.Score(req, s, p.cand, p.scores)
		for k, v := range p.scores {
			p.total[k] += w.Weight * clamp01(v)
		}
	}
	return Decision{Index: p.picker.Pick(p.total, p.cand, p.rng), Reason: p.reason}, nil
}

// Routed forwards to the stages that observe.
func (p *Pipeline) Routed(req *Request, d Decision, endpoint string, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.eachObserver(func(o Observer) { o.Routed(req, d, endpoint, now) })
}

// Finished forwards to the stages that observe.
func (p *Pipeline) Finished(req *Request, endpoint string, u Usage, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.eachObserver(func(o Observer) { o.Finished(req, endpoint, u, now) })
}

// Removed forwards to the stages that observe.
func (p *Pipeline) Removed(endpoint string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.eachObserver(func(o Observer) { o.Removed(endpoint) })
}

func (p *Pipeline) eachObserver(fn func(Observer)) {
	for _, f := range p.filters {
		if o, ok := f.(Observer); ok {
			fn(o)
		}
	}
	for _, w := range p.scorers {
		if o, ok := w.Scorer.(Observer); ok {
			fn(o)
		}
	}
}

// MaxScorePicker picks the highest total score, uniformly at random among ties (GIE's
// max-score-picker shuffles, then stable-sorts by score).
type MaxScorePicker struct{}

// Pick returns the endpoint with the highest score.
func (MaxScorePicker) Pick(scores []float64, cand []int, rng *rand.Rand) int {
	best, bestScore, ties := -1, math.Inf(-1), 0
	for k, i := range cand {
		switch v := scores[k]; {
		case v > bestScore:
			best, bestScore, ties = i, v, 1
		case v == bestScore:
			ties++
			if rng.IntN(ties) == 0 {
				best = i
			}
		}
	}
	return best
}

// QueueScorer scores (maxQ − q)/(maxQ − minQ) on the scraped waiting-queue length, 1 for all
// when every queue is equal (GIE queue-scorer).
type QueueScorer struct{}

// Score writes the queue scores.
func (QueueScorer) Score(_ *Request, s *Snapshot, cand []int, out []float64) {
	lo, hi := math.MaxInt, math.MinInt
	for _, i := range cand {
		lo, hi = min(lo, s.Endpoints[i].Waiting), max(hi, s.Endpoints[i].Waiting)
	}
	for k, i := range cand {
		if hi == lo {
			out[k] = 1
		} else {
			out[k] = float64(hi-s.Endpoints[i].Waiting) / float64(hi-lo)
		}
	}
}

// KVCacheScorer scores 1 − KVUsage (GIE kv-cache-utilization-scorer).
type KVCacheScorer struct{}

// Score writes the KV-cache scores.
func (KVCacheScorer) Score(_ *Request, s *Snapshot, cand []int, out []float64) {
	for k, i := range cand {
		out[k] = 1 - s.Endpoints[i].KVUsage
	}
}

func clamp01(v float64) float64 {
	switch {
	case v > 1:
		return 1
	case v >= 0:
		return v
	}
	return 0 // negative or NaN
}

// resize returns a slice of length n, reusing b's storage when it is large enough.
func resize[T any](b []T, n int) []T {
	if cap(b) < n {
		return make([]T, n)
	}
	return b[:n]
}

// BlockStored forwards a KV event to the stages that read the caches.
func (p *Pipeline) BlockStored(endpoint string, hash uint64, medium string) {
	p.eachKV(func(o KVEventObserver) { o.BlockStored(endpoint, hash, medium) })
}

// BlocksStored forwards a whole BlockStored event to the stages that read the caches: whole
// to those that take it so, block by block to the others.
func (p *Pipeline) BlocksStored(endpoint string, hashes []uint64, parent uint64, hasParent bool, medium string) {
	p.eachKV(func(o KVEventObserver) { StoreBlocks(o, endpoint, hashes, parent, hasParent, medium) })
}

// BlockRemoved forwards a KV event to the stages that read the caches.
func (p *Pipeline) BlockRemoved(endpoint string, hash uint64, medium string) {
	p.eachKV(func(o KVEventObserver) { o.BlockRemoved(endpoint, hash, medium) })
}

// AllBlocksCleared forwards a KV event to the stages that read the caches.
func (p *Pipeline) AllBlocksCleared(endpoint string) {
	p.eachKV(func(o KVEventObserver) { o.AllBlocksCleared(endpoint) })
}

func (p *Pipeline) eachKV(fn func(KVEventObserver)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, w := range p.scorers {
		if o, ok := w.Scorer.(KVEventObserver); ok {
			fn(o)
		}
	}
}

// MatchedTokens is the match of the first filter or scorer that is a PrefixMatcher, as the
// Pick that chose i computed it; 0 when none is.
func (p *Pipeline) MatchedTokens(req *Request, s *Snapshot, i int) int {
	if p.matcher == nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.matcher.MatchedTokens(req, s, i)
}
