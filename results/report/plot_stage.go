package report

import (
	"gonum.org/v1/plot"

	"kvroute/results"
	"kvroute/results/stats"
)

// stageOutput is a stage's output tokens per second as inference-perf counts them: the
// tokens of the stage's completed requests over their span (first arrival to last finish).
var stageOutput = metricDef{"output_tokens_per_s", "output tokens/s", false, false,
	func(r *results.Run) (float64, bool) { return r.Metrics.OutputTokensPerS, okRun(r) },
	func(v float64) string { return fmtSig(v) + " tok/s" }}

// stageMetrics are the panels of a ladder's per-stage figure.
var stageMetrics = []struct {
	m   metricDef
	log bool
}{{metric("ttft_ms_p99"), true}, {metric("ttft_ms_p50"), true}, {metric("hit_rate"), false}, {stageOutput, false}}

// stagePNG draws a group whose arrivals came in load stages against each stage's offered
// rate: one panel per metric, one line per policy through its stages (warm-up stages left
// out), with the 95% interval over replications as error bars; nil when no run has stages.
func stagePNG(g *groupPlan) ([]byte, error) {
	l := g.top()
	if !hasStagesIn(l) {
		return nil, nil
	}
	order, best, worst := ranked(g)
	var panels []*plot.Plot
	for _, om := range stageMetrics {
		m := om.m
		p := newPlot(m.title+" per load stage", "stage rate ("+g.unit+")", axisLabel(m, om.log))
		top, lines := 0.0, 0
		for _, v := range order {
			for _, c := range l.cells {
				if c.variant != v {
					continue
				}
				pts := stagePoints(c, m, om.log)
				if len(pts.XYs) == 0 {
					continue
				}
				if err := addPolicyLine(p, pts, g.policyIndex(v), v == best || v == worst, &top); err != nil {
					return nil, err
				}
				lines++
			}
		}
		scaleY(p, om.log, lines, top)
		panels = append(panels, p)
	}
	leg, names := policyLegend(g, best, worst)
	return panelGrid(panels, 2, leg, names)
}

func hasStagesIn(l level) bool {
	for _, r := range l.runs {
		if len(r.Stages) > 0 {
			return true
		}
	}
	return false
}

// stagePoints returns a policy's metric at each of its stages (not warm-up), at the stage's
// rate, as the mean over replications (geometric for latencies) with its interval; on a log
// scale, non-positive values are left out.
func stagePoints(c *cell, m metricDef, log bool) ciPoints {
	var pts ciPoints
	n := 0
	for _, r := range c.runs {
		n = max(n, len(r.Stages))
	}
	for i := range n {
		var vals []float64
		rate, warm := 0.0, false
		for _, r := range c.runs {
			if i >= len(r.Stages) {
				continue
			}
			st := &r.Stages[i]
			rate, warm = st.Rate, st.Warmup
			if v, ok := m.value(&results.Run{Metrics: st.Metrics}); ok && (!log || v > 0) {
				vals = append(vals, v)
			}
		}
		if warm || len(vals) == 0 {
			continue
		}
		iv := stats.MeanCI(vals)
		if m.ratio {
			iv = stats.GeoMeanCI(vals)
		}
		pts.XYs = append(pts.XYs, xy(rate, iv.Mean))
		pts.lo, pts.hi = append(pts.lo, iv.Lo), append(pts.hi, iv.Hi)
	}
	return pts
}
