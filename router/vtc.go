package router

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"time"
)

// Variants of vtc-basic.
const (
	// VTCAIBrix charges at routing time with AIBrix's estimates, as AIBrix v0.7.0 does
	// (vllm-project/aibrix c5465890, pkg/plugins/gateway/algorithms/vtc/vtc_basic.go Route).
	VTCAIBrix = "aibrix-v0.7.0"
	// VTCRealUsage charges the prompt at routing time and the real completion length when the
	// request finishes: kvroute's earlier rule, for a router that sees real usage.
	VTCRealUsage = "real-usage"
)

// VTCConfig configures vtc-basic, AIBrix's simplified Virtual Token Counter (the defaults are
// the AIBRIX_ROUTER_VTC_* environment defaults of vtc/token_tracker.go and vtc_basic.go).
type VTCConfig struct {
	// Variant picks how tenants are charged: "aibrix-v0.7.0" (default) or "real-usage".
	Variant string `json:"variant"`
	// Window is the sliding window over which a tenant's tokens count (5 minutes).
	Window Duration `json:"window"`
	// BucketWidth is the window's resolution (1 second: with the "minutes" unit AIBrix's
	// toTimestamp still keys buckets by Unix seconds, token_tracker.go 66–71).
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
		Variant: VTCAIBrix, Window: Duration(5 * time.Minute), BucketWidth: Duration(time.Second),
		MinTokens: 1000, MaxTokens: 8000, InputTokenWeight: 1, OutputTokenWeight: 2,
		MaxPodLoad: 100, FairnessWeight: 1, UtilizationWeight: 1,
	}
}

// Validate checks ranges and cross-field rules.
func (c VTCConfig) Validate() error {
	var errs []error
	if c.Variant != VTCAIBrix && c.Variant != VTCRealUsage {
		errs = append(errs, fmt.Errorf("variant %q: want %q or %q", c.Variant, VTCAIBrix, VTCRealUsage))
	}
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
// (min+max)/2) over the totals of the tenants whose total is positive (MinTokens and MaxTokens
// when there are none), and running is the scraped vllm:num_requests_running; the first lowest
// score wins (vtc_basic.go Route). Tenants that have used more land further along the endpoint
// list, so heavy and light tenants are kept apart. Requests without a tenant go to a random
// endpoint.
//
// Only the requesting tenant's window is pruned, when it routes (token_tracker.go
// GetTokenCount, UpdateTokenCount): an idle tenant's last total stays in min and max.
// The aibrix-v0.7.0 variant charges at routing time ceil(len(prompt)/4) input and
// ceil(1.5 × input) output tokens (vtc/token_estimator.go); real-usage charges the prompt at
// Routed and the real completion length at Finished.
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
	var tokens float64
	if w := p.tenants[req.Tenant]; w != nil {
		w.prune(p.cutoff(s.Now))
		tokens = w.total
	}
	lo, hi := p.extremes()
	bucket := math.Max(p.cfg.MinTokens, (lo+hi)/2)
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

// Routed charges the tenant: AIBrix's estimates, or the prompt under real-usage.
func (p *VTC) Routed(req *Request, _ Decision, _ string, now time.Time) {
	if req.Tenant == "" {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cfg.Variant == VTCAIBrix {
		in := math.Ceil(float64(len(req.Prompt)) / 4)
		out := math.Ceil(in * 1.5)
		p.charge(req.Tenant, now, p.cfg.InputTokenWeight*in+p.cfg.OutputTokenWeight*out)
		return
	}
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
	p.charge(req.Tenant, now, p.cfg.InputTokenWeight*float64(in))
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
	p.charge(tenant, now, p.cfg.OutputTokenWeight*float64(u.CompletionTokens))
}

// Removed does nothing: vtc-basic keeps no per-endpoint state.
func (*VTC) Removed(string) {}

// unit returns the bucket number of t.
func (p *VTC) unit(t time.Time) int64 { return t.UnixNano() / int64(p.cfg.BucketWidth) }

// cutoff is the oldest bucket still in the window ending at now (AIBrix's getCutoffTimestamp:
// the bucket of now − window).
func (p *VTC) cutoff(now time.Time) int64 { return p.unit(now.Add(-p.cfg.Window.D())) }

// charge prunes the tenant's window, then adds tokens to its current bucket.
func (p *VTC) charge(tenant string, now time.Time, tokens float64) {
	w := p.tenants[tenant]
	if w == nil {
		w = &tenantWindow{}
		p.tenants[tenant] = w
	}
	w.prune(p.cutoff(now))
	w.add(p.unit(now), tokens)
}

// extremes returns the smallest and largest totals among tenants with a positive total, as
// last pruned, defaulting to MinTokens and MaxTokens as AIBrix's tracker does (GetMinTokenCount,
// GetMaxTokenCount).
func (p *VTC) extremes() (lo, hi float64) {
	lo, hi = math.Inf(1), 0
	for _, w := range p.tenants { // min and max do not depend on the order
		if w.total > 0 {
			lo, hi = math.Min(lo, w.total), math.Max(hi, w.total)
		}
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
