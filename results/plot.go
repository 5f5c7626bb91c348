package results

import (
	"bytes"
	"fmt"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// figure is one rendered plot and where report.md places it.
type figure struct {
	path    string // relative to the results directory, under PlotDir
	caption string
	group   string // the group's name
	level   string // load key; "" for group-wide and per-run figures
	kind    string // "cdf", "ttft", "hit", "throughput", "reasons", "service"
	png     []byte
}

// Plot sizes: wide enough for a legend beside five policies, small enough for a report.
const (
	plotW = 6 * vg.Inch
	plotH = 4 * vg.Inch
)

// buildFigures renders every plot of the plan in a fixed order.
func buildFigures(plan []groupPlan) ([]figure, error) {
	var figs []figure
	runSlugs := newSlugger()
	for gi := range plan {
		g := &plan[gi]
		fs, err := groupFigures(g)
		if err != nil {
			return nil, err
		}
		figs = append(figs, fs...)
		for _, r := range g.runs {
			if len(r.Series.Tenants()) < 2 || r.Series.Buckets() == 0 {
				continue
			}
			b, err := servicePNG(r)
			if err != nil {
				return nil, fmt.Errorf("results: service plot of run %q: %w", r.Name, err)
			}
			figs = append(figs, figure{path: "service-" + runSlugs.unique(r.Name) + ".png",
				caption: "Per-tenant service over time, " + r.Name, group: g.name, kind: "service", png: b})
		}
	}
	return figs, nil
}

// groupFigures renders a group's CDF and reason plots per load level and its against-load plots.
func groupFigures(g *groupPlan) ([]figure, error) {
	var figs []figure
	add := func(kind, lvl, name, caption string, p *plot.Plot, h vg.Length) error {
		if p == nil {
			return nil
		}
		b, err := plotPNG(p, h)
		if err != nil {
			return fmt.Errorf("results: %s plot of group %q: %w", kind, g.name, err)
		}
		figs = append(figs, figure{path: name + ".png", caption: caption, group: g.name, level: lvl, kind: kind, png: b})
		return nil
	}
	for _, l := range g.levels {
		suffix := g.slug + "-" + rateSlug(l.key)
		at := fmt.Sprintf("%s at %s req/s", g.name, l.key)
		if err := add("cdf", l.key, "ttft-cdf-"+suffix, "TTFT CDF, "+at, cdfPlot(g, l), plotH); err != nil {
			return nil, err
		}
		rp, rh := reasonsPlot(g, l)
		if err := add("reasons", l.key, "reasons-"+suffix, "Routing decisions, "+at, rp, rh); err != nil {
			return nil, err
		}
	}
	if len(g.levels) < 2 {
		return figs, nil
	}
	for _, s := range againstLoad {
		if err := add(s.kind, "", s.kind+"-vs-rate-"+g.slug, s.title+", "+g.name, vsRatePlot(g, s), plotH); err != nil {
			return nil, err
		}
	}
	return figs, nil
}

// plotPNG renders p as a PNG; gonum/plot's rasteriser and image/png are deterministic, so the
// same plot gives the same bytes.
func plotPNG(p *plot.Plot, h vg.Length) ([]byte, error) {
	wt, err := p.WriterTo(plotW, h, "png")
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if _, err := wt.WriteTo(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// newPlot returns a plot with a title, axis labels and the legend at the top left.
func newPlot(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = x
	p.Y.Label.Text = y
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())
	return p
}

// addLine adds a line with points in colour i and dash pattern dash.
func addLine(p *plot.Plot, name string, xys plotter.XYs, i, dash int, points bool) error {
	l, err := plotter.NewLine(xys)
	if err != nil {
		return err
	}
	l.Color = plotutil.Color(i)
	l.Dashes = plotutil.Dashes(dash)
	l.Width = vg.Points(1.5)
	p.Add(l)
	if points {
		s, err := plotter.NewScatter(xys)
		if err != nil {
			return err
		}
		s.Color = l.Color
		s.Shape = draw.CircleGlyph{}
		p.Add(s)
	}
	p.Legend.Add(name, l)
	return nil
}

// cdfPlot draws the TTFT CDF of each run at level l on a log time axis; nil when no run has one.
func cdfPlot(g *groupPlan, l level) *plot.Plot {
	p := newPlot("TTFT CDF — "+g.name+" at "+l.key+" req/s", "TTFT (ms, log scale)", "fraction of requests")
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Y.Min, p.Y.Max = 0, 1
	n := 0
	for _, r := range l.runs {
		if r.Series == nil || len(r.Series.TTFTCDF) == 0 {
			continue
		}
		xys := make(plotter.XYs, 0, len(r.Series.TTFTCDF)+1)
		first := max(r.Series.TTFTCDF[0].Ms, 1e-3)
		xys = append(xys, plotter.XY{X: first, Y: 0})
		for _, pt := range r.Series.TTFTCDF {
			xys = append(xys, plotter.XY{X: max(pt.Ms, 1e-3), Y: pt.Frac})
		}
		if addLine(p, label(r, l.runs), xys, g.policyIndex(r.Policy), 0, false) == nil {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	p.Legend.Left, p.Legend.Top = false, false
	return p
}

// loadSeries is one against-load plot: one line per policy (and per metric of its list).
type loadSeries struct {
	kind, title, ylabel string
	metrics             []loadMetric
}

type loadMetric struct {
	suffix string
	dash   int
	value  func(*Run) (float64, bool)
}

var againstLoad = []loadSeries{
	{"ttft", "p50 and p99 TTFT against load", "TTFT (ms)", []loadMetric{
		{" p99", 0, func(r *Run) (float64, bool) { return r.Metrics.TTFT.P99, r.Metrics.Completed > 0 }},
		{" p50", 1, func(r *Run) (float64, bool) { return r.Metrics.TTFT.P50, r.Metrics.Completed > 0 }},
	}},
	{"hit-rate", "Prefix-cache hit rate against load", "hit rate (token-weighted)", []loadMetric{
		{"", 0, func(r *Run) (float64, bool) { return r.Metrics.HitRate, true }},
	}},
	{"throughput", "Throughput against load", "completed requests/s", []loadMetric{
		{"", 0, func(r *Run) (float64, bool) { return r.Metrics.ThroughputRPS, true }},
		{" goodput", 1, func(r *Run) (float64, bool) {
			g := r.Metrics.Goodput
			return gRPS(g), g != nil
		}},
	}},
}

func gRPS(g *Goodput) float64 {
	if g == nil {
		return 0
	}
	return g.RPS
}

// vsRatePlot draws s's metrics against the request rate, one line per policy.
func vsRatePlot(g *groupPlan, s loadSeries) *plot.Plot {
	p := newPlot(s.title+" — "+g.name, "request rate (req/s)", s.ylabel)
	n, top := 0, 0.0
	for pi, pol := range g.policies {
		for _, m := range s.metrics {
			var xys plotter.XYs
			for _, l := range g.levels {
				for _, r := range l.runs {
					if v, ok := m.value(r); ok && r.Policy == pol {
						xys = append(xys, plotter.XY{X: l.rate, Y: v})
						top = max(top, v)
					}
				}
			}
			if len(xys) > 0 && addLine(p, pol+m.suffix, xys, pi, m.dash, true) == nil {
				n++
			}
		}
	}
	if n == 0 {
		return nil
	}
	p.Y.Min = 0
	p.Y.Max = legendRoom(top, n)
	return p
}

// legendRoom returns an axis maximum that leaves room above data reaching top for a legend of
// n entries at the top of the plot.
func legendRoom(top float64, n int) float64 {
	if top <= 0 {
		return 1
	}
	return top * (1 + 0.08*float64(n+1))
}

// reasonsPlot draws each run's decision-branch counts at level l as horizontal bars, one
// block per run from the top, and returns the height that fits them; nil when no run
// recorded a reason.
func reasonsPlot(g *groupPlan, l level) (*plot.Plot, vg.Length) {
	type block struct {
		run     *Run
		reasons []string
	}
	var blocks []block
	n := 0
	for _, r := range l.runs {
		if ks := sortedKeys(r.Metrics.Reasons); len(ks) > 0 {
			blocks = append(blocks, block{r, ks})
			n += len(ks)
		}
	}
	if n == 0 {
		return nil, 0
	}
	p := newPlot("Routing decisions — "+g.name+" at "+l.key+" req/s", "decisions", "")
	names := make([]string, n)
	top := n // bars fill positions n-1 (top) down to 0
	for _, b := range blocks {
		vals := make(plotter.Values, len(b.reasons))
		for i, k := range b.reasons {
			// Position top-1-i holds reason i; the chart's values run upwards from XMin.
			vals[len(b.reasons)-1-i] = float64(b.run.Metrics.Reasons[k])
			names[top-1-i] = label(b.run, l.runs) + ": " + k
		}
		top -= len(b.reasons)
		bc, err := plotter.NewBarChart(vals, vg.Points(14))
		if err != nil {
			continue
		}
		bc.Horizontal = true
		bc.XMin = float64(top)
		bc.Color = plotutil.Color(g.policyIndex(b.run.Policy))
		bc.LineStyle.Width = 0
		p.Add(bc)
	}
	p.NominalY(names...)
	p.X.Min = 0
	return p, max(plotH*5/8, vg.Length(n)*vg.Points(24)+1.2*vg.Inch)
}

// sortedKeys returns m's keys in sorted order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
