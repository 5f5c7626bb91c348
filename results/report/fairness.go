package report

import (
	"fmt"
	"strings"

	"kvroute/results"
)

// FloodRatio is how many times the requests of every other tenant the heaviest tenant must
// send to count as flooding; below it, no tenant floods and every tenant is well-behaved.
const FloodRatio = 2.0

// flooder returns the run's flooding tenant, or "" when no tenant sent FloodRatio times the
// requests of every other.
func flooder(m *results.Metrics) string {
	top, ok := m.HeaviestTenant()
	if !ok {
		return ""
	}
	for name, t := range m.Tenants {
		if name != top && float64(m.Tenants[top].Requests) < FloodRatio*float64(t.Requests) {
			return ""
		}
	}
	return top
}

// wellBehaved returns the slowest well-behaved tenant's TTFT quantile q (p50 or p99 of the
// tenant's own requests): over every tenant but the flooder. False with fewer than two tenants.
func wellBehaved(r *results.Run, q func(results.Dist) float64) (float64, bool) {
	m := &r.Metrics
	if len(m.Tenants) < 2 || m.Completed == 0 {
		return 0, false
	}
	f, worst, seen := flooder(m), 0.0, false
	for name, t := range m.Tenants {
		if name != f && t.Completed > 0 {
			worst, seen = max(worst, q(t.TTFT)), true
		}
	}
	return worst, seen
}

// floodShare returns the flooding tenant's share of the run's service (0..1).
func floodShare(r *results.Run) (float64, bool) {
	m := &r.Metrics
	f := flooder(m)
	if f == "" {
		return 0, false
	}
	total := 0.0
	for _, t := range m.Tenants {
		total += t.Service
	}
	if total == 0 {
		return 0, false
	}
	return m.Tenants[f].Service / total, true
}

// fairnessMetrics are the questions a scenario with tenants is answered on too, after Jain's
// index: how the tenants that do not flood fare.
var fairnessMetrics = []metricDef{
	{"wb_ttft_ms_p99", "well-behaved p99 TTFT", true, true,
		func(r *results.Run) (float64, bool) {
			return wellBehaved(r, func(d results.Dist) float64 { return d.P99 })
		}, fmtMs},
	{"wb_ttft_ms_p50", "well-behaved p50 TTFT", true, true,
		func(r *results.Run) (float64, bool) {
			return wellBehaved(r, func(d results.Dist) float64 { return d.P50 })
		}, fmtMs},
	{"flood_share", "flooder's share of service", false, false, floodShare,
		func(v float64) string { return fmt.Sprintf("%.1f%%", 100*v) }},
}

// tenantsOf describes the tenants of a level's first run with tenants: the flooder and the
// others, by name.
func tenantsOf(l level) (flood string, others []string) {
	for _, r := range l.runs {
		m := &r.Metrics
		if len(m.Tenants) < 2 {
			continue
		}
		flood = flooder(m)
		for _, n := range sortedKeys(m.Tenants) {
			if n != flood {
				others = append(others, tenantLabel(n))
			}
		}
		return flood, others
	}
	return "", nil
}

func tenantLabel(n string) string {
	if n == "" {
		return "(none)"
	}
	return n
}

// writeFairnessAnswer adds the fairness lines of a group with tenants to the answer: who
// shields the well-behaved tenants best, and Jain's index.
func writeFairnessAnswer(b *strings.Builder, g *groupPlan, l level) {
	flood, others := tenantsOf(l)
	who := "every tenant (none floods)"
	if flood != "" {
		who = fmt.Sprintf("the well-behaved tenants (%s) while %s floods", strings.Join(others, ", "), tenantLabel(flood))
	}
	fmt.Fprintf(b, "- Fairness, for %s: the slowest well-behaved tenant's p99 TTFT: %s", who,
		verdictOrDash(l.cells, fairnessMetrics[0]))
	fmt.Fprintf(b, "; Jain's index over per-tenant service: %s (see %s).\n",
		verdictOrDash(l.cells, metric("jain_fairness")), strings.TrimPrefix(SectionFairness, "## "))
}

func verdictOrDash(cells []*cell, m metricDef) string {
	if j, ok := judge(cells, m); ok {
		return verdictCell(j)
	}
	return "—"
}

// fairnessColumns are the columns of the Fairness table.
var fairnessColumns = []metricDef{metric("jain_fairness"), fairnessMetrics[2], fairnessMetrics[1], fairnessMetrics[0]}

// writeFairness writes, for every group with tenants, each policy's fairness at each level
// with its interval over replications; nothing when no group has tenants.
func writeFairness(b *strings.Builder, plan []groupPlan) {
	header := false
	for gi := range plan {
		g := &plan[gi]
		if !g.tenants {
			continue
		}
		if !header {
			b.WriteString(SectionFairness + "\n\n" + fairnessIntro + "| group | rate | policy | replications |")
			for _, m := range fairnessColumns {
				b.WriteString(" " + m.title + " |")
			}
			b.WriteString("\n|---|---:|---|---:|" + strings.Repeat("---:|", len(fairnessColumns)) + "\n")
			header = true
		}
		for _, l := range g.levels {
			for _, c := range l.cells {
				fmt.Fprintf(b, "| %s | %s | %s | %d |", md(g.name), l.key, md(c.variant), len(c.runs))
				for _, m := range fairnessColumns {
					cell := "—"
					if iv, ok := c.interval(m); ok {
						cell = ivText(iv, m.unit)
					}
					b.WriteString(" " + md(cell) + " |")
				}
				b.WriteString("\n")
			}
		}
	}
	if header {
		b.WriteString("\n")
	}
}

var fairnessIntro = fmt.Sprintf("Jain's index is (Σx)²/(n·Σx²) over the tenants' service x, with service as VTC counts it "+
	"(Sheng et al., \"Fairness in Serving Large Language Models\", OSDI 2024): prompt tokens + 2 × output tokens of "+
	"completed requests. 1 means every tenant got the same service; a tenant that asks for more lowers it whatever the "+
	"router does, so read it beside the well-behaved tenants' TTFT. The flooder is the tenant that sent at least "+
	"%g× the requests of every other; the well-behaved tenants are the others (all tenants when none floods), "+
	"and their TTFT is the slowest one's quantile over its own requests. Latencies: geometric mean over replications "+
	"[95%% interval]; the others: mean [95%% interval].\n\n", FloodRatio)
