package report

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"kvroute/results"
	"kvroute/results/stats"
)

// Alpha is the family-wise error rate of a verdict: the chance, over all the comparisons
// against one level's best policy, of calling any tie a difference.
const Alpha = 1 - stats.Confidence

// AvoidRatio is how many times the best policy's p99 TTFT a policy must significantly reach
// before the answer says to avoid it.
const AvoidRatio = 2.0

// vs is one policy compared with the best of its level by one metric.
type vs struct {
	c  *cell
	iv stats.Interval // c/best for a ratio metric, c − best otherwise, over paired replications
	p  float64        // the paired t-test's p-value
	// worse is set when c is worse than the best, significantly after Holm's correction.
	worse bool
}

// judgement is the verdict on one metric at one load level.
type judgement struct {
	m      metricDef
	best   *cell
	bestIV stats.Interval
	tested bool // every comparison had at least two paired replications
	others []vs // every other policy, best mean first
}

// tied returns the best policy and those not significantly worse than it.
func (j judgement) tied() []*cell {
	out := []*cell{j.best}
	for _, o := range j.others {
		if !o.worse {
			out = append(out, o.c)
		}
	}
	return out
}

// winner reports whether the best policy is significantly better than every other one.
func (j judgement) winner() bool { return j.tested && len(j.tied()) == 1 }

// judge finds the level's best policy by mean and tests every other against it; false when
// no policy has the metric.
func judge(cells []*cell, m metricDef) (judgement, bool) {
	type scored struct {
		c  *cell
		iv stats.Interval
	}
	var ss []scored
	for _, c := range cells {
		if iv, ok := c.interval(m); ok {
			ss = append(ss, scored{c, iv})
		}
	}
	if len(ss) == 0 {
		return judgement{}, false
	}
	slices.SortStableFunc(ss, func(a, b scored) int {
		if m.lower {
			return cmp.Compare(a.iv.Mean, b.iv.Mean)
		}
		return cmp.Compare(b.iv.Mean, a.iv.Mean)
	})
	j := judgement{m: m, best: ss[0].c, bestIV: ss[0].iv, tested: true}
	var ps []float64
	for _, s := range ss[1:] {
		x, y := paired(s.c, j.best, m)
		iv, p := stats.PairedT(x, y, m.ratio)
		j.tested = j.tested && iv.Tested()
		j.others = append(j.others, vs{c: s.c, iv: iv, p: p})
		ps = append(ps, p)
	}
	for i, rej := range stats.Holm(ps, Alpha) {
		o := &j.others[i]
		zero := 0.0
		if m.ratio {
			zero = 1
		}
		o.worse = rej && o.iv.Tested() && (o.iv.Mean > zero) == m.lower && o.iv.Mean != zero
	}
	return j, true
}

// verdictMetrics are the questions of the verdict table, in column order.
func verdictMetrics(runs []results.Run) []metricDef {
	out := []metricDef{metric("ttft_ms_p99"), metric("hit_rate"), metric("window_throughput_rps")}
	for i := range runs {
		if runs[i].Metrics.Goodput != nil {
			return append(out, metric("goodput_rps"))
		}
	}
	return out
}

// verdictCell writes one judgement as a table cell: the winner, or the tied policies.
func verdictCell(j judgement) string {
	best := fmt.Sprintf("%s %s", j.best.variant, ivText(j.bestIV, j.m.unit))
	switch {
	case len(j.others) == 0:
		return best
	case !j.tested:
		return best + " (one replication: untested)"
	case j.winner():
		return "**" + best + "**"
	}
	t := j.tied()
	names := make([]string, 0, len(t)-1)
	for _, c := range t[1:] {
		names = append(names, c.variant)
	}
	return fmt.Sprintf("tied (%d): %s; %s", len(t), best, strings.Join(names, ", "))
}

// ivText formats a mean with its interval: "123 ms [110, 140]", or just the mean for one
// sample.
func ivText(iv stats.Interval, unit func(float64) string) string {
	if !iv.Tested() {
		return unit(iv.Mean)
	}
	lo, hi := unit(iv.Lo), unit(iv.Hi)
	if u := strings.TrimLeft(strings.TrimLeft(hi, "-0123456789.,"), " "); u != "" {
		lo = strings.TrimSuffix(lo, " "+u)
	}
	return fmt.Sprintf("%s [%s, %s]", unit(iv.Mean), lo, strings.TrimSpace(hi))
}

// ratioText formats a ratio interval: "5.3× [4.1, 6.8]".
func ratioText(iv stats.Interval) string {
	if !iv.Tested() {
		return fmtSig(iv.Mean) + "×"
	}
	return fmt.Sprintf("%s× [%s, %s]", fmtSig(iv.Mean), fmtSig(iv.Lo), fmtSig(iv.Hi))
}

// writeVerdict writes the verdict table: one row per group and load level, one column per
// metric, naming a winner only when its lead is significant.
func writeVerdict(b *strings.Builder, plan []groupPlan, ms []metricDef) {
	b.WriteString(SectionVerdict + "\n\nPer configured point and metric: the best policy by mean (geometric for latencies; 95% interval) in bold when it " +
		"is significantly better than every other policy, otherwise the policies tied with it: those whose paired " +
		"difference from it is not significant (paired t-test over replications, Holm-corrected, α = 0.05).\n\n")
	b.WriteString("| group | rate | replications |")
	for _, m := range ms {
		b.WriteString(" " + m.title + " |")
	}
	b.WriteString("\n|---|---:|---:|" + strings.Repeat("---|", len(ms)) + "\n")
	for gi := range plan {
		g := &plan[gi]
		for _, l := range g.levels {
			fmt.Fprintf(b, "| %s | %s | %d |", md(g.name), l.key, reps(l))
			for _, m := range ms {
				cell := "—"
				if j, ok := judge(l.cells, m); ok {
					cell = verdictCell(j)
				}
				b.WriteString(" " + md(cell) + " |")
			}
			b.WriteString("\n")
		}
	}
	b.WriteString("\n")
}

// reps returns the largest number of replications of any policy at l.
func reps(l level) int {
	n := 0
	for _, c := range l.cells {
		n = max(n, len(c.runs))
	}
	return n
}

// md escapes a table cell.
func md(s string) string {
	return strings.NewReplacer("|", "\\|", "\n", " ").Replace(s)
}

// scenarioInt reads an integer at a dotted path of a scenario (int, float64 or json.Number).
func scenarioInt(s map[string]any, path ...string) (int, bool) {
	var v any = s
	for _, k := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return 0, false
		}
		v = m[k]
	}
	switch x := v.(type) {
	case int:
		return x, true
	case float64:
		return int(x), x == math.Trunc(x)
	case json.Number:
		n, err := strconv.Atoi(x.String())
		return n, err == nil
	}
	return 0, false
}
