package report

import (
	"bytes"
	"cmp"
	"fmt"
	"image/color"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"kvroute/results"
)

// PlotDir is the folder of a results directory that holds the report's figures.
const PlotDir = "plots"

// figure is one rendered plot and where report.md places it.
type figure struct {
	path    string // relative to the results directory
	caption string
	group   string // the group's name
	kind    string // "overview", "cdf", "service"
	png     []byte
}

// Plot sizes: one plot area plus a legend column beside it, and the panels of a figure.
const (
	plotW   = 8 * vg.Inch
	plotH   = 4 * vg.Inch
	legendW = 2 * vg.Inch
	panelW  = 4.2 * vg.Inch
	panelH  = 3 * vg.Inch
)

// palette is Tableau 10: ten colours that stay distinguishable side by side. Style i gets
// colour i mod 10 and dash pattern i / 10 (solid, then dashed), so the first twenty
// policies differ in colour or line style, and glyph i mod 5 on top.
var palette = []color.RGBA{
	{31, 119, 180, 255}, {255, 127, 14, 255}, {44, 160, 44, 255}, {214, 39, 40, 255},
	{148, 103, 189, 255}, {140, 86, 75, 255}, {227, 119, 194, 255}, {127, 127, 127, 255},
	{188, 189, 34, 255}, {23, 190, 207, 255},
}

var glyphs = []draw.GlyphDrawer{draw.CircleGlyph{}, draw.SquareGlyph{}, draw.TriangleGlyph{}, draw.PlusGlyph{}, draw.CrossGlyph{}}

func policyColor(i int) color.Color { return palette[i%len(palette)] }

// lineStyle is policy style i, drawn wider when it is highlighted.
func lineStyle(i int, wide bool) draw.LineStyle {
	w := vg.Points(1.3)
	if wide {
		w = vg.Points(3)
	}
	return draw.LineStyle{Color: policyColor(i), Width: w, Dashes: plotutil.Dashes(i / len(palette))}
}

// buildFigures renders every figure of the plan in a fixed order: per group, the metrics
// against load, the TTFT distributions per load, and per-tenant service at the highest load.
func buildFigures(plan []groupPlan) ([]figure, error) {
	var figs []figure
	for gi := range plan {
		g := &plan[gi]
		for _, f := range []struct {
			kind, name, caption string
			draw                func(*groupPlan) ([]byte, error)
		}{
			{"overview", "overview", "p99 and p50 TTFT, hit rate and output tokens/s of the arrival window against the offered rate (mean, geometric for latencies, and 95% interval over replications)", overviewPNG},
			{"stages", "stages", "p99 and p50 TTFT, hit rate and output tokens/s of the requests that arrived in each load stage, warm-up left out (mean, geometric for latencies, and 95% interval over replications)", stagePNG},
			{"cdf", "ttft-cdf", "TTFT distribution at each rate (first replication)", cdfPNG},
			{"service", "service", "Tokens served to each tenant over time, at the highest rate (first replication)", servicePNG},
		} {
			b, err := f.draw(g)
			if err != nil {
				return nil, fmt.Errorf("results: %s figure of group %q: %w", f.kind, g.name, err)
			}
			if b != nil {
				figs = append(figs, figure{path: PlotDir + "/" + f.name + "-" + g.slug + ".png",
					caption: g.name + ": " + f.caption, group: g.name, kind: f.kind, png: b})
			}
		}
	}
	return figs, nil
}

// ranked returns the group's policy variants with the best and worst (by mean p99 TTFT at
// the highest load) last, so they are drawn on top, and which those two are.
func ranked(g *groupPlan) (order []string, best, worst string) {
	order = slices.Clone(g.policies)
	if j, ok := judge(g.top().cells, metric("ttft_ms_p99")); ok {
		best = j.best.variant
		if len(j.others) > 0 {
			worst = j.others[len(j.others)-1].c.variant
		}
	}
	rank := func(v string) int {
		switch v {
		case best:
			return 2
		case worst:
			return 1
		}
		return 0
	}
	slices.SortStableFunc(order, func(a, b string) int { return cmp.Compare(rank(a), rank(b)) })
	return order, best, worst
}

// legendName marks the best and worst policies in a legend.
func legendName(v, best, worst string) string {
	switch v {
	case best:
		return v + " (best p99)"
	case worst:
		return v + " (worst p99)"
	}
	return v
}

// legendWidth is the width of a legend column that holds the longest of names whole: at
// least legendW.
func legendWidth(leg plot.Legend, names []string) vg.Length {
	w := legendW
	for _, n := range names {
		w = max(w, leg.TextStyle.Width(n)+leg.ThumbnailWidth+leg.Padding+vg.Points(12))
	}
	return w
}

// panelGrid renders panels in rows of cols with one legend column on the right, as wide as
// the longest of names needs. Nil panels leave their tile empty.
func panelGrid(panels []*plot.Plot, cols int, leg plot.Legend, names []string) ([]byte, error) {
	rows := (len(panels) + cols - 1) / cols
	legendW := legendWidth(leg, names)
	w, h := panelW*vg.Length(cols)+legendW, panelH*vg.Length(rows)
	img := vgimg.New(w, h)
	dc := draw.New(img)
	grid := make([][]*plot.Plot, rows)
	for r := range grid {
		grid[r] = make([]*plot.Plot, cols)
		for c := range cols {
			if i := r*cols + c; i < len(panels) {
				grid[r][c] = panels[i]
			}
		}
	}
	tiles := draw.Tiles{Rows: rows, Cols: cols, PadX: vg.Millimeter * 3, PadY: vg.Millimeter * 3,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	area := draw.Crop(dc, 0, -legendW, 0, 0)
	canvases := plot.Align(grid, tiles, area)
	for r := range grid {
		for c, p := range grid[r] {
			if p != nil {
				p.Draw(canvases[r][c])
			}
		}
	}
	leg.Top, leg.Left = true, true
	leg.Draw(draw.Crop(dc, w-legendW+vg.Points(6), 0, 0, -vg.Points(8)))
	var buf bytes.Buffer
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(&buf); err != nil {
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

// addLine adds a line with points in colour i and dash pattern dash (compare.go's plots).
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

// plotPNG renders p as a PNG, with its legend (when legend is set) in a column to the right
// of the plot area, so that no line is hidden behind it. gonum/plot's rasteriser and
// image/png are deterministic: the same plot gives the same bytes.
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

func gRPS(g *results.Goodput) float64 {
	if g == nil {
		return 0
	}
	return g.RPS
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
