package report

import (
	"fmt"
	"slices"
	"strings"

	"kvroute/results"
	"kvroute/results/stats"
)

// cell is one policy (with its parameters) at one configured point (level) of a group: its runs, one per
// replication, in replication order.
type cell struct {
	variant string // the policy and its parameters, as sweep files name it
	policy  string
	runs    []*results.Run
}

// metricDef is one metric summarised across replications.
type metricDef struct {
	key   string // the key in summary.json's "policies" entries and summary.csv's columns
	title string
	lower bool // lower is better
	ratio bool // compared as a ratio (latencies) rather than a difference
	value func(*results.Run) (float64, bool)
	unit  func(float64) string
}

func okRun(r *results.Run) bool { return r.Metrics.Completed > 0 }

func fmtMs(v float64) string { return fmtSig(v) + " ms" }

// fmtSig formats v with about three significant digits and thousands separators.
func fmtSig(v float64) string {
	switch a := max(v, -v); {
	case a >= 1000:
		return thousands(int64(v + 0.5*sign(v)))
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

func sign(v float64) float64 {
	if v < 0 {
		return -1
	}
	return 1
}

// thousands writes n with commas every three digits.
func thousands(n int64) string {
	s := fmt.Sprint(max(n, -n))
	var b strings.Builder
	if n < 0 {
		b.WriteByte('-')
	}
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// cellMetrics are the metrics every policy gets a mean and interval of; the first is the
// one the answer at the top of the report is about.
var cellMetrics = []metricDef{
	{"ttft_ms_p99", "p99 TTFT", true, true, func(r *results.Run) (float64, bool) { return r.Metrics.TTFT.P99, okRun(r) }, fmtMs},
	{"ttft_ms_p50", "p50 TTFT", true, true, func(r *results.Run) (float64, bool) { return r.Metrics.TTFT.P50, okRun(r) }, fmtMs},
	{"tpot_ms_p99", "p99 TPOT", true, true, func(r *results.Run) (float64, bool) { return r.Metrics.TPOT.P99, okRun(r) }, fmtMs},
	{"e2e_ms_p99", "p99 E2E", true, true, func(r *results.Run) (float64, bool) { return r.Metrics.E2E.P99, okRun(r) }, fmtMs},
	{"window_throughput_rps", "throughput", false, false, func(r *results.Run) (float64, bool) { return r.Metrics.WindowThroughputRPS, okRun(r) },
		func(v float64) string { return fmtSig(v) + " req/s" }},
	{"window_output_tokens_per_s", "output tokens/s", false, false,
		func(r *results.Run) (float64, bool) { return r.Metrics.WindowOutputTokensPerS, okRun(r) },
		func(v float64) string { return fmtSig(v) + " tok/s" }},
	{"hit_rate", "hit rate", false, false, func(r *results.Run) (float64, bool) { return r.Metrics.HitRate, okRun(r) },
		func(v float64) string { return fmt.Sprintf("%.3f", v) }},
	{"jain_fairness", "Jain's index", false, false, func(r *results.Run) (float64, bool) { return r.Metrics.JainFairness, okRun(r) },
		func(v float64) string { return fmt.Sprintf("%.3f", v) }},
	{"preemptions", "preemptions", true, false, func(r *results.Run) (float64, bool) { return float64(r.Metrics.Preemptions), true },
		fmtSig},
	{"goodput_rps", "goodput", false, false, func(r *results.Run) (float64, bool) { return gRPS(r.Metrics.Goodput), r.Metrics.Goodput != nil },
		func(v float64) string { return fmtSig(v) + " req/s" }},
}

// metric returns the definition called key.
func metric(key string) metricDef {
	i := slices.IndexFunc(cellMetrics, func(m metricDef) bool { return m.key == key })
	return cellMetrics[i]
}

// samples returns the metric's value in each run that has it, with the runs' replication
// numbers.
func (c *cell) samples(m metricDef) (vals []float64, reps []int) {
	for _, r := range c.runs {
		if v, ok := m.value(r); ok {
			vals, reps = append(vals, v), append(reps, r.Replication)
		}
	}
	return vals, reps
}

// interval returns the metric's mean and confidence interval over the cell's replications
// (for a latency, compared as a ratio, the geometric mean and its interval on the log
// scale); false when no run has the metric.
func (c *cell) interval(m metricDef) (stats.Interval, bool) {
	v, _ := c.samples(m)
	if len(v) == 0 {
		return stats.Interval{}, false
	}
	if m.ratio {
		return stats.GeoMeanCI(v), true
	}
	// The other metrics are counts, rates and fractions: the interval of their mean is cut to
	// the values the mean can take, so it never reads "-6.77 preemptions" or a hit rate above 1.
	iv := stats.MeanCI(v)
	iv.Lo = max(iv.Lo, 0)
	if m.key == "hit_rate" || m.key == "jain_fairness" {
		iv.Hi = min(iv.Hi, 1)
	}
	return iv, true
}

// paired returns the metric's values in a and b over the replications both have.
func paired(a, b *cell, m metricDef) (x, y []float64) {
	av, ar := a.samples(m)
	bv, br := b.samples(m)
	for i, r := range ar {
		if j := slices.Index(br, r); j >= 0 {
			x, y = append(x, av[i]), append(y, bv[j])
		}
	}
	return x, y
}

// variantOf names r's policy with its parameters (from the scenario's policy_params), in
// key order, as sweep files label it: "prefix-cache,block_size=64".
func variantOf(r *results.Run) string {
	pp, _ := r.Scenario["policy_params"].(map[string]any)
	if len(pp) == 0 {
		return r.Policy
	}
	var b strings.Builder
	b.WriteString(r.Policy)
	for _, k := range sortedKeys(pp) {
		fmt.Fprintf(&b, ",%s=%v", k, pp[k])
	}
	return b.String()
}

// cellsOf splits a level's runs into cells, in the order their variants first appear.
func cellsOf(runs []*results.Run) []*cell {
	var out []*cell
	for _, r := range runs {
		v := variantOf(r)
		i := slices.IndexFunc(out, func(c *cell) bool { return c.variant == v })
		if i < 0 {
			out = append(out, &cell{variant: v, policy: r.Policy})
			i = len(out) - 1
		}
		out[i].runs = append(out[i].runs, r)
	}
	for _, c := range out {
		slices.SortStableFunc(c.runs, func(a, b *results.Run) int { return a.Replication - b.Replication })
	}
	return out
}

// PolicySummary is one policy at one configured point of a group, over its replications: what
// summary.json's "policies" array holds.
type PolicySummary struct {
	Group string `json:"group"`
	// RequestRate is the point's configured arrival rate, 0 where none was configured.
	RequestRate float64 `json:"request_rate"`
	// Policy is the policy with its parameters, as the sweep file names it.
	Policy string `json:"policy"`
	// Runs names the replications' runs, in replication order.
	Runs []string `json:"runs"`
	// Metrics maps a metric (ttft_ms_p99, hit_rate, …) to its mean (geometric for
	// latencies) and 95% interval over the replications.
	Metrics map[string]stats.Interval `json:"metrics"`
}

// policySummaries lists every cell of the plan with its intervals.
func policySummaries(plan []groupPlan) []PolicySummary {
	var out []PolicySummary
	for gi := range plan {
		g := &plan[gi]
		for _, l := range g.levels {
			for _, c := range l.cells {
				ps := PolicySummary{Group: g.name, RequestRate: l.rate, Policy: c.variant, Metrics: map[string]stats.Interval{}}
				for _, r := range c.runs {
					ps.Runs = append(ps.Runs, r.Name)
				}
				for _, m := range cellMetrics {
					if iv, ok := c.interval(m); ok {
						ps.Metrics[m.key] = iv
					}
				}
				out = append(out, ps)
			}
		}
	}
	return out
}
