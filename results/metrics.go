package results

import (
	"maps"
	"slices"
	"time"
)

// Dist summarises a latency distribution in milliseconds.
type Dist struct {
	Mean float64 `json:"mean"`
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
}

// Metrics is a run's summary, the "metrics" object of summary.json (DESIGN.md).
type Metrics struct {
	Requests      int     `json:"requests"`
	Completed     int     `json:"completed"`
	Failed        int     `json:"failed"`
	DurationS     float64 `json:"duration_s"`
	ThroughputRPS float64 `json:"throughput_rps"`
	// ArrivalWindowS is the arrival window, last arrival − first arrival, in seconds (the run's
	// duration when every request arrived at once); WindowThroughputRPS is the requests
	// completed within it per second of it: the throughput while the offered load lasted,
	// without the drain tail that DurationS and ThroughputRPS include.
	ArrivalWindowS      float64 `json:"arrival_window_s"`
	WindowThroughputRPS float64 `json:"window_throughput_rps"`
	// WindowOutputTokensPerS is the output tokens generated within the arrival window per
	// second of it (each request's tokens spread evenly from its first token to its finish).
	// A Collector sets it, to the resolution of its service buckets; an Aggregator leaves 0.
	WindowOutputTokensPerS float64        `json:"window_output_tokens_per_s"`
	InputTokensPerS        float64        `json:"input_tokens_per_s"`
	OutputTokensPerS       float64        `json:"output_tokens_per_s"`
	TTFT                   Dist           `json:"ttft_ms"`
	TPOT                   Dist           `json:"tpot_ms"`
	ITL                    Dist           `json:"itl_ms"`
	E2E                    Dist           `json:"e2e_ms"`
	HitRate                float64        `json:"hit_rate"`
	JainFairness           float64        `json:"jain_fairness"`
	Preemptions            int            `json:"preemptions"`
	Retries                int            `json:"retries"`
	PrefixSplitRate        float64        `json:"prefix_split_rate"`
	Reasons                map[string]int `json:"reasons,omitempty"`
	// Endpoints counts the requests (completed or not) that ended on each endpoint: how the
	// router spread the load.
	Endpoints map[string]int `json:"endpoints,omitempty"`
	// Goodput is set when the aggregator was given an SLO (SetSLO).
	Goodput *Goodput `json:"goodput,omitempty"`
	// Tenants holds each tenant's share of the run, by tenant name, when the run had more
	// than one tenant.
	Tenants map[string]TenantMetrics `json:"tenants,omitempty"`
}

// Aggregator folds records into Metrics in constant memory per tenant, endpoint and prefix
// group. The zero value is not usable; call NewAggregator.
type Aggregator struct {
	n, completed, failed, preemptions, retries int
	prompt, cached, output                     int64
	first, last, lastArrival                   time.Duration
	ttft, tpot, itl, e2e, finishes             Histogram
	itlFromSteps                               bool
	tenantService                              map[string]float64
	tenants                                    map[string]*tenantAgg
	groupEndpoints                             map[string]map[string]int
	reasons                                    map[string]int
	endpoints                                  map[string]int
	slo                                        SLO
	good                                       int
}

// NewAggregator returns an empty aggregator.
func NewAggregator() *Aggregator {
	return &Aggregator{tenantService: map[string]float64{}, tenants: map[string]*tenantAgg{}, groupEndpoints: map[string]map[string]int{}, reasons: map[string]int{},
		endpoints: map[string]int{}}
}

// SetSLO makes Metrics report goodput against s; call it before the first Add.
func (a *Aggregator) SetSLO(s SLO) { a.slo = s }

// AddITL records count inter-token gaps of d (a simulator reports each decode step's duration
// once per sequence it advanced). Once AddITL is used, records' TPOT no longer stands in for ITL.
func (a *Aggregator) AddITL(d time.Duration, count int) {
	a.itlFromSteps = true
	a.itl.Add(d, count)
}

// Add folds one record in.
func (a *Aggregator) Add(r *Record) {
	if a.n == 0 || r.Arrival < a.first {
		a.first = r.Arrival
	}
	a.last = max(a.last, r.Finish)
	a.lastArrival = max(a.lastArrival, r.Arrival)
	a.n++
	a.tenant(r.Tenant).add(r)
	a.preemptions += r.Preemptions
	a.retries += r.Retries
	if r.Reason != "" {
		a.reasons[r.Reason]++
	}
	if r.Endpoint != "" {
		a.endpoints[r.Endpoint]++
	}
	if r.Status != StatusCompleted {
		a.failed++
		return
	}
	a.completed++
	if a.slo.Met(r) {
		a.good++
	}
	a.prompt += int64(r.PromptTokens)
	a.cached += int64(r.CachedTokens)
	a.output += int64(r.OutputTokens)
	a.tenantService[r.Tenant] += float64(r.PromptTokens) + 2*float64(r.OutputTokens)
	if t, ok := r.TTFT(); ok {
		a.ttft.Add(t, 1)
	}
	if t, ok := r.TPOT(); ok {
		a.tpot.Add(t, 1)
		if !a.itlFromSteps {
			a.itl.Add(t, r.OutputTokens-1)
		}
	}
	a.e2e.Add(r.Finish-r.Arrival, 1)
	a.finishes.Add(r.Finish, 1)
	if r.PrefixGroup != "" && r.Endpoint != "" {
		m := a.groupEndpoints[r.PrefixGroup]
		if m == nil {
			m = map[string]int{}
			a.groupEndpoints[r.PrefixGroup] = m
		}
		m[r.Endpoint]++
	}
}

// Metrics returns the summary so far.
func (a *Aggregator) Metrics() Metrics {
	m := Metrics{
		Requests: a.n, Completed: a.completed, Failed: a.failed, Preemptions: a.preemptions, Retries: a.retries,
		TTFT: dist(&a.ttft), TPOT: dist(&a.tpot), ITL: dist(&a.itl), E2E: dist(&a.e2e),
		JainFairness: Jain(a.tenantService), PrefixSplitRate: a.splitRate(),
	}
	if len(a.reasons) > 0 {
		m.Reasons = maps.Clone(a.reasons)
	}
	if len(a.endpoints) > 0 {
		m.Endpoints = maps.Clone(a.endpoints)
	}
	if d := (a.last - a.first).Seconds(); d > 0 {
		m.DurationS = d
		m.ThroughputRPS = float64(a.completed) / d
		m.InputTokensPerS = float64(a.prompt) / d
		m.OutputTokensPerS = float64(a.output) / d
	}
	m.ArrivalWindowS, m.WindowThroughputRPS = a.window()
	m.Tenants = a.tenantMetrics()
	if a.slo.Enabled() {
		m.Goodput = &Goodput{SLO: a.slo, Good: a.good}
		if a.n > 0 {
			m.Goodput.Fraction = float64(a.good) / float64(a.n)
		}
		if m.DurationS > 0 {
			m.Goodput.RPS = float64(a.good) / m.DurationS
		}
	}
	if a.prompt > 0 {
		m.HitRate = float64(a.cached) / float64(a.prompt)
	}
	return m
}

// window returns the arrival window in seconds and the requests completed within it per
// second; with every request arriving at once, the window is the run's duration.
func (a *Aggregator) window() (float64, float64) {
	end := a.lastArrival
	if end <= a.first {
		end = a.last
	}
	w := (end - a.first).Seconds()
	if w <= 0 {
		return 0, 0
	}
	return w, float64(a.finishes.CountAtMost(end)) / w
}

// splitRate is the fraction of prefix-group requests that did not go to their group's most
// used endpoint: 0 when every group stayed on one replica.
func (a *Aggregator) splitRate() float64 {
	total, off := 0, 0
	for _, eps := range a.groupEndpoints {
		top, sum := 0, 0
		for _, c := range eps {
			top, sum = max(top, c), sum+c
		}
		total += sum
		off += sum - top
	}
	if total == 0 {
		return 0
	}
	return float64(off) / float64(total)
}

func dist(h *Histogram) Dist {
	return Dist{Mean: durMs(h.Mean()), P50: durMs(h.Quantile(0.5)), P90: durMs(h.Quantile(0.9)), P99: durMs(h.Quantile(0.99))}
}

// Jain returns Jain's fairness index (Σx)² / (n·Σx²) over the values of x, in key order;
// 1 when there are no values or all are zero.
func Jain(x map[string]float64) float64 {
	keys := make([]string, 0, len(x))
	for k := range x {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var s, s2 float64
	for _, k := range keys {
		s += x[k]
		s2 += x[k] * x[k]
	}
	if s2 == 0 {
		return 1
	}
	return s * s / (float64(len(keys)) * s2)
}
