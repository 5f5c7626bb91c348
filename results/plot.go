package results

import (
	"bytes"
	"fmt"
	"image/color"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
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

// Plot sizes: the plot area plus a legend column beside it.
const (
	plotW   = 8 * vg.Inch
	plotH   = 4 * vg.Inch
	legendW = 2 * vg.Inch
)

// palette holds twelve colours that stay distinguishable side by side (Tableau 10 plus two);
// policy i gets palette[i%12], and from the 13th policy on a dash pattern as well.
var palette = []color.RGBA{
	{31, 119, 180, 255}, {255, 127, 14, 255}, {44, 160, 44, 255}, {214, 39, 40, 255},
	{148, 103, 189, 255}, {140, 86, 75, 255}, {227, 119, 194, 255}, {127, 127, 127, 255},
	{188, 189, 34, 255}, {23, 190, 207, 255}, {0, 0, 0, 255}, {255, 215, 0, 255},
}

func policyColor(i int) color.Color { return palette[i%len(palette)] }

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
		b, err := plotPNG(p, h, kind != "reasons")
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

// plotPNG renders p as a PNG, with its legend (when legend is set) in a column to the right
// of the plot area, so that no line is hidden behind it. gonum/plot's rasteriser and image/png are deterministic:
// the same plot gives the same bytes.
func plotPNG(p *plot.Plot, h vg.Length, legend bool) ([]byte, error) {
	img := vgimg.PngCanvas{Canvas: vgimg.New(plotW, h)}
	dc := draw.New(img)
	if !legend {
		p.Draw(dc)
		var buf bytes.Buffer
		_, err := img.WriteTo(&buf)
		return buf.Bytes(), err
	}
	leg := p.Legend
	p.Legend = plot.NewLegend()
	p.Draw(draw.Crop(dc, 0, -legendW, 0, 0))
	leg.Top, leg.Left = true, true
	leg.YOffs = -p.Title.TextStyle.Height(p.Title.Text) - vg.Points(8)
	leg.Draw(draw.Crop(dc, plotW-legendW+vg.Points(6), 0, 0, 0))
	p.Legend = leg
	var buf bytes.Buffer
	if _, err := img.WriteTo(&buf); err != nil {
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
	l.Color = policyColor(i)
	l.Dashes = plotutil.Dashes(dash + i/len(palette))
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
	{"ttft", "p99 (solid) and p50 (dashed) TTFT against load", "TTFT (ms, log scale)", []loadMetric{
		{" p99", 0, func(r *Run) (float64, bool) {
			return r.Metrics.TTFT.P99, r.Metrics.Completed > 0 && r.Metrics.TTFT.P99 > 0
		}},
		{" p50", 1, func(r *Run) (float64, bool) {
			return r.Metrics.TTFT.P50, r.Metrics.Completed > 0 && r.Metrics.TTFT.P50 > 0
		}},
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
	if s.kind == "ttft" {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
		return p
	}
	p.Y.Min = 0
	p.Y.Max = max(top*1.05, 1e-9)
	return p
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
		bc.Color = policyColor(g.policyIndex(b.run.Policy))
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
