package report

import (
	"math"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// overviewMetrics are the panels of a group's against-load figure.
var overviewMetrics = []struct {
	key string
	log bool
}{{"ttft_ms_p99", true}, {"ttft_ms_p50", true}, {"hit_rate", false}, {"window_output_tokens_per_s", false}}

// axisLabel is the y axis label of a metric of the against-load figures, with its unit.
func axisLabel(m metricDef, log bool) string {
	switch {
	case log:
		return m.title + " (ms, log scale)"
	case m.key == "window_throughput_rps":
		return "completed req/s (arrival window)"
	case m.key == "window_output_tokens_per_s":
		return "output tok/s (arrival window)"
	case m.key == "output_tokens_per_s":
		return "output tok/s (stage's requests)"
	case m.key == "hit_rate":
		return "hit rate (cached/prompt tokens)"
	}
	return m.title
}

// ciPoints are a policy's means against load with their intervals, for error bars.
type ciPoints struct {
	plotter.XYs
	lo, hi []float64
}

// YError returns the distances from the mean down to the interval's low end and up to its high end.
func (c ciPoints) YError(i int) (float64, float64) { return c.XYs[i].Y - c.lo[i], c.hi[i] - c.XYs[i].Y }

// policyLegend returns a legend of every variant of g in its style, best and worst marked,
// and the names it holds.
func policyLegend(g *groupPlan, best, worst string) (plot.Legend, []string) {
	leg := plot.NewLegend()
	var names []string
	for i, v := range g.policies {
		l, err := plotter.NewLine(plotter.XYs{{X: 0, Y: 0}, {X: 1, Y: 0}})
		if err != nil {
			continue
		}
		l.LineStyle = lineStyle(i, v == best || v == worst)
		names = append(names, legendName(v, best, worst))
		leg.Add(names[len(names)-1], l)
	}
	return leg, names
}

// overviewPNG draws the group's metrics against load, one panel per metric and one line
// per policy with its 95% interval as error bars; nil with fewer than two load levels.
func overviewPNG(g *groupPlan) ([]byte, error) {
	if len(g.levels) < 2 || !g.levels[0].configured() {
		return nil, nil
	}
	order, best, worst := ranked(g)
	var panels []*plot.Plot
	for _, om := range overviewMetrics {
		m := metric(om.key)
		p := newPlot(m.title+" against load", "offered rate ("+g.unit+")", axisLabel(m, om.log))
		top, lines := 0.0, 0
		for _, v := range order {
			pts := levelPoints(g, v, m, om.log)
			if len(pts.XYs) == 0 {
				continue
			}
			if err := addPolicyLine(p, pts, g.policyIndex(v), v == best || v == worst, &top); err != nil {
				return nil, err
			}
			lines++
		}
		scaleY(p, om.log, lines, top)
		panels = append(panels, p)
	}
	leg, names := policyLegend(g, best, worst)
	return panelGrid(panels, 2, leg, names)
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
			pts.XYs = append(pts.XYs, xy(l.rate, iv.Mean))
			lo := iv.Lo
			pts.lo, pts.hi = append(pts.lo, lo), append(pts.hi, iv.Hi)
		}
	}
	return pts
}

func xy(x, y float64) plotter.XY { return plotter.XY{X: x, Y: y} }

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
		title := "TTFT CDF"
		if l.configured() {
			title += " at " + l.rateText(g.unit)
		}
		p := newPlot(title, "TTFT (ms, log scale)", "fraction of requests")
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
	leg, names := policyLegend(g, best, worst)
	return panelGrid(panels, gridCols(len(panels)), leg, names)
}

// logTicks labels a log axis: its powers of ten when it spans two or more; otherwise 1, 2
// and 5 times them, or, in a range narrower still, every whole multiple of the power of ten
// below the range, so at least two ticks always carry a label.
type logTicks struct{}

// Ticks returns the axis' ticks between min and max.
func (logTicks) Ticks(min, max float64) []plot.Tick {
	ticks := within(plot.LogTicks{Prec: -1}.Ticks(min, max), min, max)
	if labelled(ticks) >= 2 {
		return ticks
	}
	for _, mults := range [][]float64{{1, 2, 5}, {1, 2, 3, 4, 5, 6, 7, 8, 9}} {
		var out []plot.Tick
		for e := math.Floor(math.Log10(min)); e <= math.Ceil(math.Log10(max)); e++ {
			for _, k := range mults {
				if v := k * math.Pow(10, e); v >= min && v <= max {
					out = append(out, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'g', -1, 64)})
				}
			}
		}
		if len(out) >= 2 {
			return append(out, unlabelled(ticks)...)
		}
	}
	return plot.DefaultTicks{}.Ticks(min, max)
}

// within returns the ticks between min and max: those outside are not drawn, and a label
// outside does not count.
func within(ticks []plot.Tick, min, max float64) []plot.Tick {
	var out []plot.Tick
	for _, t := range ticks {
		if t.Value >= min && t.Value <= max {
			out = append(out, t)
		}
	}
	return out
}

func labelled(ticks []plot.Tick) int {
	n := 0
	for _, t := range ticks {
		if t.Label != "" {
			n++
		}
	}
	return n
}

// unlabelled returns the minor ticks of ticks.
func unlabelled(ticks []plot.Tick) []plot.Tick {
	var out []plot.Tick
	for _, t := range ticks {
		if t.Label == "" {
			out = append(out, t)
		}
	}
	return out
}

// gridCols is the number of columns of a near-square grid of n panels.
func gridCols(n int) int { return max(1, int(math.Ceil(math.Sqrt(float64(n))))) }

// addPolicyLine adds one policy's line and raises top to its highest interval bound.
func addPolicyLine(p *plot.Plot, pts ciPoints, idx int, highlight bool, top *float64) error {
	for _, h := range pts.hi {
		*top = max(*top, h)
	}
	return addPolicy(p, pts, idx, highlight)
}

// scaleY sets a panel's y axis: log-scaled with labelled ticks when the metric is a latency
// and some line was drawn, else linear from 0 to a little above the highest bound.
func scaleY(p *plot.Plot, log bool, lines int, top float64) {
	if log && lines > 0 {
		p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, logTicks{}
	} else if !log {
		p.Y.Min, p.Y.Max = 0, max(top*1.05, 1e-9)
	}
}
