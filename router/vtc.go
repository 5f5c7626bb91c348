package router

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"time"
)

// VTCConfig configures vtc-basic, AIBrix's simplified Virtual Token Counter (seed 001; the
// defaults are the AIBRIX_ROUTER_VTC_* environment defaults).
type VTCConfig struct {
	// Window is the sliding window over which a tenant's tokens count (5 minutes).
	Window Duration `json:"window"`
	// BucketWidth is the window's time unit: tokens are kept per bucket (1 minute).
	BucketWidth Duration `json:"bucket_width"`
	// MinTokens and MaxTokens bound the adaptive normalisation (1,000 and 8,000 tokens).
	MinTokens float64 `json:"min_tokens"`
	MaxTokens float64 `json:"max_tokens"`
	// InputTokenWeight and OutputTokenWeight weigh prompt and generated tokens (1 and 2).
	InputTokenWeight  float64 `json:"input_token_weight"`
	OutputTokenWeight float64 `json:"output_token_weight"`
	// MaxPodLoad is the running-request count at which the utilisation score saturates (100).
	MaxPodLoad float64 `json:"max_pod_load"`
	// FairnessWeight and UtilizationWeight weigh the two scores (1 and 1).
	FairnessWeight    float64 `json:"fairness_weight"`
	UtilizationWeight float64 `json:"utilization_weight"`
}

// DefaultVTCConfig returns AIBrix's vtc-basic defaults.
func DefaultVTCConfig() VTCConfig {
	return VTCConfig{
		Window: Duration(5 * time.Minute), BucketWidth: Duration(time.Minute),
		MinTokens: 1000, MaxTokens: 8000, InputTokenWeight: 1, OutputTokenWeight: 2,
		MaxPodLoad: 100, FairnessWeight: 1, UtilizationWeight: 1,
	}
}

// Validate checks ranges and cross-field rules.
func (c VTCConfig) Validate() error {
	var errs []error
	pos := func(name string, v float64) {
		if !(v > 0) || math.IsInf(v, 0) {
			errs = append(errs, fmt.Errorf("%s %v: want a finite value > 0", name, v))
		}
	}
	nonneg := func(name string, v float64) {
		if !(v >= 0) || math.IsInf(v, 0) {
			errs = append(errs, fmt.Errorf("%s %v: want a finite value >= 0", name, v))
		}
	}
	if c.BucketWidth <= 0 || c.Window < c.BucketWidth {
		errs = append(errs, fmt.Errorf("window %v, bucket_width %v: want 0 < bucket_width <= window", c.Window.D(), c.BucketWidth.D()))
	}
	pos("min_tokens", c.MinTokens)
	pos("max_tokens", c.MaxTokens)
	if c.MaxTokens < c.MinTokens {
		errs = append(errs, fmt.Errorf("max_tokens %v < min_tokens %v", c.MaxTokens, c.MinTokens))
	}
	pos("max_pod_load", c.MaxPodLoad)
	nonneg("input_token_weight", c.InputTokenWeight)
	nonneg("output_token_weight", c.OutputTokenWeight)
	nonneg("fairness_weight", c.FairnessWeight)
	nonneg("utilization_weight", c.UtilizationWeight)
	return errors.Join(errs...)
}

// VTC is vtc-basic: each eligible endpoint i (in snapshot order) scores
//
//	FairnessWeight·|i − min(tokens/bucket, n−1)| + UtilizationWeight·min(running/MaxPodLoad, 1) + U[0, 0.1)
//
// where tokens is the tenant's weighted token count in the window, bucket = max(MinTokens,
// (min+max)/2) over all tenants' counts, and running is the scraped vllm:num_requests_running;
// the lowest score wins. Tenants that have used more land further along the endpoint list, so
// heavy and light tenants are kept apart. Requests without a tenant go to a random endpoint.
//
// AIBrix charges an estimated output length at routing time; kvroute charges the prompt at
// Routed and the real completion length at Finished, since it sees real usage.
type VTC struct {
	cfg     VTCConfig
	mu      sync.Mutex
	rng     *rand.Rand
	cand    []int
	tenants map[string]*tenantWindow
	open    map[string]string // request ID -> tenant, between Routed and Finished
}

var (
	_ Policy   = (*VTC)(nil)
	_ Observer = (*VTC)(nil)
)

// NewVTC returns a vtc-basic policy; rng supplies the tie-breaking noise.
func NewVTC(cfg VTCConfig, rng *rand.Rand) (*VTC, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("router: vtc-basic: %w", err)
	}
	return &VTC{cfg: cfg, rng: rng, tenants: make(map[string]*tenantWindow), open: make(map[string]string)}, nil
}

// Name returns "vtc-basic".
func (*VTC) Name() string { return "vtc-basic" }

// Pick scores the eligible endpoints for the request's tenant.
func (p *VTC) Pick(req *Request, s *Snapshot) (Decision, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var err error
	if p.cand, err = Eligible(p.cand, req, s); err != nil {
		return Decision{}, err
	}
	if req.Tenant == "" {
		return Decision{Index: p.cand[p.rng.IntN(len(p.cand))], Reason: ReasonNoTenantRandom}, nil
	}
	unit := p.unit(s.Now)
	lo, hi := p.extremes(unit)
	bucket := math.Max(p.cfg.MinTokens, (lo+hi)/2)
	var tokens float64
	if w := p.tenants[req.Tenant]; w != nil {
		tokens = w.total
	}
	norm := math.Min(tokens/bucket, float64(len(p.cand)-1))
	best, bestScore := -1, math.Inf(1)
	for k, i := range p.cand {
		util := math.Min(float64(s.Endpoints[i].Running)/p.cfg.MaxPodLoad, 1)
		score := p.cfg.FairnessWeight*math.Abs(float64(k)-norm) + p.cfg.UtilizationWeight*util + p.rng.Float64()*0.1
		if score < bestScore {
			best, bestScore = i, score
		}
	}
	return Decision{Index: best, Reason: ReasonFairness}, nil
}

// Routed charges the tenant for the prompt.
func (p *VTC) Routed(req *Request, _ string, now time.Time) {
	if req.Tenant == "" {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, dup := p.open[req.ID]; dup {
		return
	}
	p.open[req.ID] = req.Tenant
	in := req.InputTokens
	if in == 0 {
		in = len(req.Tokens)
	}
	if in == 0 {
		in = (len(req.Prompt) + 3) / 4 // AIBrix's character estimate: ~4 characters a token
	}
	p.charge(req.Tenant, p.unit(now), p.cfg.InputTokenWeight*float64(in))
}

// Finished charges the tenant for the generated tokens, once per request.
func (p *VTC) Finished(req *Request, _ string, u Usage, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	tenant, ok := p.open[req.ID]
	if !ok {
		return
	}
	delete(p.open, req.ID)
	p.charge(tenant, p.unit(now), p.cfg.OutputTokenWeight*float64(u.CompletionTokens))
}

// Removed does nothing: vtc-basic keeps no per-endpoint state.
func (*VTC) Removed(string) {}

// unit returns the bucket number of t.
func (p *VTC) unit(t time.Time) int64 { return t.UnixNano() / int64(p.cfg.BucketWidth) }

// charge adds tokens to the tenant's current bucket.
func (p *VTC) charge(tenant string, unit int64, tokens float64) {
	w := p.tenants[tenant]
	if w == nil {
		w = &tenantWindow{}
		p.tenants[tenant] = w
	}
	w.prune(unit - int64(p.cfg.Window/p.cfg.BucketWidth))
	w.add(unit, tokens)
}

// extremes prunes every tenant's window to the one ending at unit and returns the smallest and
// largest counts, defaulting to MinTokens and MaxTokens as AIBrix's tracker does.
func (p *VTC) extremes(unit int64) (lo, hi float64) {
	lo, hi = math.Inf(1), 0
	cutoff := unit - int64(p.cfg.Window/p.cfg.BucketWidth)
	for name, w := range p.tenants { // min, max and deletion do not depend on the order
		w.prune(cutoff)
		if len(w.buckets) == 0 {
			delete(p.tenants, name)
			continue
		}
		lo, hi = math.Min(lo, w.total), math.Max(hi, w.total)
	}
	if math.IsInf(lo, 1) {
		lo = p.cfg.MinTokens
	}
	if hi == 0 {
		hi = p.cfg.MaxTokens
	}
	return lo, hi
}

// tenantWindow is one tenant's token counts per time bucket, oldest first.
type tenantWindow struct {
	buckets []tokenBucket
	total   float64
}

type tokenBucket struct {
	unit   int64
	tokens float64
}

func (w *tenantWindow) add(unit int64, tokens float64) {
	if n := len(w.buckets); n > 0 && w.buckets[n-1].unit == unit {
		w.buckets[n-1].tokens += tokens
	} else {
		w.buckets = append(w.buckets, tokenBucket{unit, tokens})
	}
	w.total += tokens
}

// prune drops buckets older than cutoff (AIBrix drops timestamps < cutoff).
func (w *tenantWindow) prune(cutoff int64) {
	k := 0
	for k < len(w.buckets) && w.buckets[k].unit < cutoff {
		w.total -= w.buckets[k].tokens
		k++
	}
	if k > 0 {
		w.buckets = append(w.buckets[:0], w.buckets[k:]...)
		if len(w.buckets) == 0 {
			w.total = 0
		}
	}
}
