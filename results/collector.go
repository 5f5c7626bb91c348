package results

import (
	"maps"
	"slices"
	"time"
)

// CollectorOpts describes the run a Collector builds.
type CollectorOpts struct {
	// Name, Policy, Group, Labels and Scenario are copied into the Run.
	Name, Policy, Group string
	Labels              []string
	Scenario            map[string]any
	// RequestRate is the offered load in requests per second; 0 measures it from the
	// arrivals as (n−1)/(last arrival − first arrival).
	RequestRate float64
	// SLO, when set, adds goodput to the metrics.
	SLO SLO
	// Replication is copied into the Run: its 1-based replication number, 0 without any.
	Replication int
	// BucketWidth is the initial width of the service buckets (default 1 s); it doubles
	// whenever the run outgrows MaxBuckets buckets (default 120).
	BucketWidth time.Duration
	MaxBuckets  int
}

// Collector folds a run's records and step latencies into a Run in memory that does not grow
// with the number of requests: histograms, per-tenant service in at most MaxBuckets time
// buckets, and counters. The result does not depend on the order records arrive in, except
// for float rounding in the means. The zero value is not usable; call NewCollector.
type Collector struct {
	opts            CollectorOpts
	agg             *Aggregator
	arrivals        int
	firstArr, lastA time.Duration
	width           time.Duration
	buckets         int
	prompt, output  map[string][]int64
}

// NewCollector returns an empty collector for the run o describes.
func NewCollector(o CollectorOpts) *Collector {
	if o.BucketWidth <= 0 {
		o.BucketWidth = time.Second
	}
	if o.MaxBuckets <= 1 {
		o.MaxBuckets = 120
	}
	a := NewAggregator()
	a.SetSLO(o.SLO)
	return &Collector{opts: o, agg: a, width: o.BucketWidth, prompt: map[string][]int64{}, output: map[string][]int64{}}
}

// AddITL records count inter-token gaps of d, as Aggregator.AddITL.
func (c *Collector) AddITL(d time.Duration, count int) { c.agg.AddITL(d, count) }

// Add folds one terminal record in.
func (c *Collector) Add(r *Record) {
	c.agg.Add(r)
	if c.arrivals == 0 || r.Arrival < c.firstArr {
		c.firstArr = r.Arrival
	}
	c.lastA = max(c.lastA, r.Arrival)
	c.arrivals++
	if r.Status != StatusCompleted {
		return
	}
	c.fit(max(r.Finish, r.FirstToken))
	c.credit(c.prompt, r.Tenant, r.FirstToken, int64(r.PromptTokens))
	c.spread(r.Tenant, r.FirstToken, r.Finish, int64(r.OutputTokens))
}

// Run returns the run so far.
func (c *Collector) Run() Run {
	o := c.opts
	run := Run{
		Name: o.Name, Policy: o.Policy, Group: o.Group, Labels: slices.Clone(o.Labels),
		Scenario: maps.Clone(o.Scenario), Metrics: c.agg.Metrics(), RequestRate: o.RequestRate,
		Replication: o.Replication, RateMeasured: o.RequestRate == 0,
	}
	run.Metrics.WindowOutputTokensPerS = c.windowOutput(run.Metrics.ArrivalWindowS)
	if run.RequestRate == 0 && c.arrivals > 1 && c.lastA > c.firstArr {
		run.RequestRate = float64(c.arrivals-1) / (c.lastA - c.firstArr).Seconds()
	}
	s := &Series{TTFTCDF: c.agg.ttft.CDF()}
	if c.buckets > 0 {
		s.BucketS = c.width.Seconds()
		s.PromptTokens = padded(c.prompt, c.buckets)
		s.OutputTokens = padded(c.output, c.buckets)
	}
	run.Series = s
	return run
}

// windowOutput returns the output tokens per second generated within the arrival window of
// w seconds from the first arrival, from the service buckets: a bucket the window's edge cuts
// counts in proportion to the part inside.
func (c *Collector) windowOutput(w float64) float64 {
	if w <= 0 {
		return 0
	}
	from := c.firstArr.Seconds()
	to, width := from+w, c.width.Seconds()
	total := 0.0
	for _, t := range sortedKeys(c.output) {
		for i, n := range c.output[t] {
			lo, hi := float64(i)*width, float64(i+1)*width
			if in := min(hi, to) - max(lo, from); in > 0 {
				total += float64(n) * in / width
			}
		}
	}
	return total / w
}

// fit widens the buckets until time t falls in one of at most MaxBuckets.
func (c *Collector) fit(t time.Duration) {
	for int(t/c.width) >= c.opts.MaxBuckets {
		c.width *= 2
		c.buckets = (c.buckets + 1) / 2
		for _, m := range []map[string][]int64{c.prompt, c.output} {
			for k, v := range m {
				m[k] = halve(v)
			}
		}
	}
}

// credit adds n tokens to tenant's bucket holding time t.
func (c *Collector) credit(m map[string][]int64, tenant string, t time.Duration, n int64) {
	i := int(max(t, 0) / c.width)
	v := m[tenant]
	for len(v) <= i {
		v = append(v, 0)
	}
	v[i] += n
	m[tenant] = v
	c.buckets = max(c.buckets, i+1)
}

// spread credits n output tokens evenly over [from, to]: bucket i gets the tokens cumulated by
// its end minus those cumulated by its start, so the split is exact and merges exactly.
func (c *Collector) spread(tenant string, from, to time.Duration, n int64) {
	from = max(from, 0)
	if n <= 0 {
		return
	}
	if to <= from {
		c.credit(c.output, tenant, to, n)
		return
	}
	cum := func(t time.Duration) int64 {
		if t >= to {
			return n
		}
		return int64(float64(n) * float64(t-from) / float64(to-from))
	}
	for i := int(from / c.width); i <= int(to/c.width); i++ {
		end := time.Duration(i+1) * c.width
		start := max(time.Duration(i)*c.width, from)
		if got := cum(end) - cum(start); got > 0 {
			c.credit(c.output, tenant, start, got)
		}
	}
}

// halve merges adjacent pairs of buckets.
func halve(v []int64) []int64 {
	out := make([]int64, (len(v)+1)/2)
	for i, x := range v {
		out[i/2] += x
	}
	return out
}

func sortedKeys(m map[string][]int64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// padded copies m with every slice extended to n buckets.
func padded(m map[string][]int64, n int) map[string][]int64 {
	out := make(map[string][]int64, len(m))
	for k, v := range m {
		p := make([]int64, n)
		copy(p, v)
		out[k] = p
	}
	return out
}
