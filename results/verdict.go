package results

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// criterion is one "which policy wins" question: a metric, and whether lower is better.
type criterion struct {
	title  string
	lower  bool
	value  func(*Run) (float64, bool)
	format func(float64) string
}

var criteria = []criterion{
	{"best p99 TTFT", true, func(r *Run) (float64, bool) { return r.Metrics.TTFT.P99, r.Metrics.Completed > 0 },
		func(v float64) string { return fmt.Sprintf("%.1f ms", v) }},
	{"best hit rate", false, func(r *Run) (float64, bool) { return r.Metrics.HitRate, r.Metrics.Completed > 0 },
		func(v float64) string { return fmt.Sprintf("%.3f", v) }},
	{"best throughput", false, func(r *Run) (float64, bool) { return r.Metrics.ThroughputRPS, r.Metrics.Completed > 0 },
		func(v float64) string { return fmt.Sprintf("%.2f req/s", v) }},
	{"best goodput", false, func(r *Run) (float64, bool) { return gRPS(r.Metrics.Goodput), r.Metrics.Goodput != nil },
		func(v float64) string { return fmt.Sprintf("%.2f req/s", v) }},
}

// winners returns the labels of the runs at l that are best by c (several on a tie, within a
// relative 1e-9) and the best value; no labels when no run has the metric.
func winners(l level, c criterion) ([]string, float64) {
	var best float64
	var names []string
	for _, r := range l.runs {
		v, ok := c.value(r)
		if !ok {
			continue
		}
		tie := len(names) > 0 && math.Abs(v-best) <= 1e-9*math.Max(math.Abs(v), math.Abs(best))
		better := len(names) == 0 || (c.lower && v < best) || (!c.lower && v > best)
		switch {
		case tie:
			names = append(names, label(r, l.runs))
		case better:
			best, names = v, []string{label(r, l.runs)}
		}
	}
	return names, best
}

// usedCriteria drops the goodput criterion when no run has goodput.
func usedCriteria(runs []Run) []criterion {
	for i := range runs {
		if runs[i].Metrics.Goodput != nil {
			return criteria
		}
	}
	return criteria[:3]
}

// writeVerdict writes the verdict table (one row per group and load level) and, per group
// with several load levels, how often each policy won.
func writeVerdict(b *strings.Builder, plan []groupPlan, crit []criterion) {
	b.WriteString("## Verdict\n\n| group | load (req/s) |")
	for _, c := range crit {
		b.WriteString(" " + c.title + " |")
	}
	b.WriteString("\n|---|---:|" + strings.Repeat("---|", len(crit)) + "\n")
	for gi := range plan {
		g := &plan[gi]
		for _, l := range g.levels {
			fmt.Fprintf(b, "| %s | %s |", md(g.name), l.key)
			for _, c := range crit {
				names, v := winners(l, c)
				cell := "—"
				if len(names) > 0 {
					cell = strings.Join(names, ", ") + " (" + c.format(v) + ")"
				}
				b.WriteString(" " + md(cell) + " |")
			}
			b.WriteString("\n")
		}
	}
	b.WriteString("\n")
	for gi := range plan {
		writeTally(b, &plan[gi], crit)
	}
}

// writeTally writes, for a group with several load levels, one line per criterion naming how
// many levels each winner won.
func writeTally(b *strings.Builder, g *groupPlan, crit []criterion) {
	if len(g.levels) < 2 {
		return
	}
	fmt.Fprintf(b, "In group %s, over %d load levels:\n", md(g.name), len(g.levels))
	for _, c := range crit {
		wins := map[string]int{}
		for _, l := range g.levels {
			names, _ := winners(l, c)
			for _, n := range names {
				wins[n]++
			}
		}
		if len(wins) == 0 {
			continue
		}
		names := sortedKeys(wins)
		slices.SortStableFunc(names, func(a, b string) int { return wins[b] - wins[a] })
		parts := make([]string, len(names))
		for i, n := range names {
			parts[i] = fmt.Sprintf("%s %d", n, wins[n])
		}
		fmt.Fprintf(b, "- %s: %s.\n", c.title, md(strings.Join(parts, ", ")))
	}
	b.WriteString("\n")
}

// md escapes a table cell.
func md(s string) string {
	return strings.NewReplacer("|", "\\|", "\n", " ").Replace(s)
}
