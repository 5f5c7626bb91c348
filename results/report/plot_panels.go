package report

import (
	"fmt"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// overviewMetrics are the panels of a group's against-load figure.
var overviewMetrics = []struct {
	key string
	log bool
}{{"ttft_ms_p99", true}, {"ttft_ms_p50", true}, {"hit_rate", false}, {"throughput_rps", false}}

// ciPoints are a policy's means against load with their intervals, for error bars.
type ciPoints struct {
	plotter.XYs
	lo, hi []float64
}

// YError returns the distances from the mean down to the interval's low end and up to its high end.
func (c ciPoints) YError(i int) (float64, float64) { return c.XYs[i].Y - c.lo[i], c.hi[i] - c.XYs[i].Y }

// policyLegend returns a legend of every variant of g in its style, best and worst marked.
func policyLegend(g *groupPlan, best, worst string) plot.Legend {
	leg := plot.NewLegend()
	for i, v := range g.policies {
		l, err := plotter.NewLine(plotter.XYs{{X: 0, Y: 0}, {X: 1, Y: 0}})
		if err != nil {
			continue
		}
		l.LineStyle = lineStyle(i, v == best || v == worst)
		leg.Add(legendName(v, best, worst), l)
	}
	return leg
}

// overviewPNG draws the group's metrics against load, one panel per metric and one line
// per policy with its 95% interval as error bars; nil with fewer than two load levels.
func overviewPNG(g *groupPlan) ([]byte, error) {
	if len(g.levels) < 2 {
		return nil, nil
	}
	order, best, worst := ranked(g)
	var panels []*plot.Plot
	for _, om := range overviewMetrics {
		m := metric(om.key)
		ylabel := m.title
		switch {
		case om.log:
			ylabel += " (ms, log scale)"
		case m.key == "throughput_rps":
			ylabel += " (completed req/s)"
		}
		p := newPlot(m.title+" against load", "request rate (req/s)", ylabel)
		top, lines := 0.0, 0
		for _, v := range order {
			pts := levelPoints(g, v, m, om.log)
			if len(pts.XYs) == 0 {
				continue
			}
			for _, h := range pts.hi {
				top = max(top, h)
			}
			if err := addPolicy(p, pts, g.policyIndex(v), v == best || v == worst); err != nil {
				return nil, err
			}
			lines++
		}
		if om.log && lines > 0 {
			p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, logTicks{}
		} else if !om.log {
			p.Y.Min, p.Y.Max = 0, max(top*1.05, 1e-9)
		}
		panels = append(panels, p)
	}
	return panelGrid(panels, 2, policyLegend(g, best, worst))
}

// levelPoints returns variant v's mean of m at each load level with its interval; on a
// log scale, non-positive values are left out and interval ends floored above zero.
func levelPoints(g *groupPlan, v string, m metricDef, log bool) ciPoints {
	var pts ciPoints
	for _, l := range g.levels {
		for _, c := range l.cells {
			iv, ok := c.interval(m)
			if c.variant != v || !ok || (log && iv.Mean <= 0) {
				continue
			}
			lo := iv.Lo
			if log {
				lo = max(lo, iv.Mean/100)
			}
			pts.XYs = append(pts.XYs, plotter.XY{X: l.rate, Y: iv.Mean})
			pts.lo, pts.hi = append(pts.lo, lo), append(pts.hi, iv.Hi)
		}
	}
	return pts
}

// addPolicy adds a policy's line, glyphs and error bars in style i.
func addPolicy(p *plot.Plot, pts ciPoints, i int, wide bool) error {
	l, s, err := plotter.NewLinePoints(pts.XYs)
	if err != nil {
		return err
	}
	l.LineStyle = lineStyle(i, wide)
	s.GlyphStyle.Color, s.GlyphStyle.Shape, s.GlyphStyle.Radius = policyColor(i), glyphs[i%len(glyphs)], vg.Points(2.5)
	eb, err := plotter.NewYErrorBars(pts)
	if err != nil {
		return err
	}
	eb.LineStyle = lineStyle(i, false)
	eb.LineStyle.Dashes = nil
	p.Add(eb, l, s)
	return nil
}

// cdfPNG draws the TTFT CDF of every policy's first replication, one panel per load level;
// nil when no run has one.
func cdfPNG(g *groupPlan) ([]byte, error) {
	order, best, worst := ranked(g)
	var panels []*plot.Plot
	drawn := false
	for _, l := range g.levels {
		p := newPlot(fmt.Sprintf("TTFT CDF at %s req/s", l.key), "TTFT (ms, log scale)", "fraction of requests")
		p.Y.Min, p.Y.Max = 0, 1
		lines := 0
		for _, v := range order {
			for _, c := range l.cells {
				if c.variant != v {
					continue
				}
				xys := cdfXYs(c.runs[0].Series)
				if xys == nil {
					continue
				}
				ln, err := plotter.NewLine(xys)
				if err != nil {
					return nil, err
				}
				ln.LineStyle = lineStyle(g.policyIndex(v), v == best || v == worst)
				p.Add(ln)
				lines++
			}
		}
		if lines > 0 { // a log axis with no data has no range
			p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, logTicks{}
			drawn = true
		}
		panels = append(panels, p)
	}
	if !drawn {
		return nil, nil
	}
	return panelGrid(panels, gridCols(len(panels)), policyLegend(g, best, worst))
}

// logTicks labels the powers of ten of a log axis, or, when its range holds fewer than two,
// evenly spaced values as plot.DefaultTicks places them.
type logTicks struct{}

// Ticks returns the axis' ticks between min and max.
func (logTicks) Ticks(min, max float64) []plot.Tick {
	ticks := plot.LogTicks{Prec: -1}.Ticks(min, max)
	labels := 0
	for _, t := range ticks {
		if t.Label != "" {
			labels++
		}
	}
	if labels >= 2 {
		return ticks
	}
	return plot.DefaultTicks{}.Ticks(min, max)
}

// gridCols is the number of columns of a near-square grid of n panels.
func gridCols(n int) int { return max(1, int(math.Ceil(math.Sqrt(float64(n))))) }
