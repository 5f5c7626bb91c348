package results

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// maxTenantLines is how many tenants get their own line; the rest are summed as "other".
const maxTenantLines = 8

// servicePNG draws r's per-tenant tokens served per second over time above Jain's index per
// time bucket, on a shared time axis.
func servicePNG(r *Run) ([]byte, error) {
	s := r.Series
	top := newPlot("Per-tenant service — "+r.Name, "", "tokens served/s (prompt + output)")
	bottom := newPlot("", "time since start (s)", "Jain's index per bucket")
	bottom.Y.Min, bottom.Y.Max = 0, 1.05
	n := s.Buckets()
	tenants, other := topTenants(s)
	type line struct {
		name string
		xys  plotter.XYs
	}
	var lines []line
	for _, t := range tenants {
		name := t
		if name == "" {
			name = "(none)"
		}
		lines = append(lines, line{name, tokenRate(s, []string{t}, n)})
	}
	if len(other) > 0 {
		lines = append(lines, line{fmt.Sprintf("other (%d tenants)", len(other)), tokenRate(s, other, n)})
	}
	peak := 0.0
	for i, l := range lines {
		for _, xy := range l.xys {
			peak = max(peak, xy.Y)
		}
		if err := addLine(top, l.name, l.xys, i, i/maxTenantLines, false); err != nil {
			return nil, err
		}
	}
	top.Y.Min, top.Y.Max = 0, max(peak*1.05, 1e-9)
	var jain plotter.XYs
	for i := range n {
		if j, ok := s.JainAt(i); ok {
			jain = append(jain, plotter.XY{X: (float64(i) + 0.5) * s.BucketS, Y: j})
		}
	}
	if len(jain) > 0 {
		if err := addLine(bottom, fmt.Sprintf("over the whole run: %.3f", r.Metrics.JainFairness), jain, 0, 0, true); err != nil {
			return nil, err
		}
	}
	bottom.Legend.Top = false
	top.X.Min, bottom.X.Min = 0, 0
	top.X.Max, bottom.X.Max = float64(n)*s.BucketS, float64(n)*s.BucketS
	return stackedPNG(top, bottom)
}

// stackedPNG renders plots one above the other with aligned axes.
func stackedPNG(plots ...*plot.Plot) ([]byte, error) {
	img := vgimg.New(plotW, plotH*vg.Length(len(plots))*3/4)
	tiles := draw.Tiles{Rows: len(plots), Cols: 1, PadY: vg.Millimeter, PadTop: vg.Millimeter, PadBottom: vg.Millimeter,
		PadLeft: vg.Millimeter, PadRight: vg.Millimeter}
	grid := make([][]*plot.Plot, len(plots))
	for i, p := range plots {
		grid[i] = []*plot.Plot{p}
	}
	canvases := plot.Align(grid, tiles, draw.New(img))
	for i, p := range plots {
		p.Draw(canvases[i][0])
	}
	var buf bytes.Buffer
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// topTenants splits s's tenants into the maxTenantLines most served (by total service, ties
// by name) in name order, and the rest.
func topTenants(s *Series) (top, rest []string) {
	all := s.Tenants()
	if len(all) <= maxTenantLines {
		return all, nil
	}
	total := map[string]float64{}
	for _, t := range all {
		for i := range s.Buckets() {
			total[t] += s.Service(t, i)
		}
	}
	ranked := slices.Clone(all)
	slices.SortStableFunc(ranked, func(a, b string) int { return cmp.Compare(total[b], total[a]) })
	top, rest = ranked[:maxTenantLines-1], ranked[maxTenantLines-1:]
	slices.Sort(top)
	slices.Sort(rest)
	return top, rest
}

// tokenRate returns the tokens per second served to tenants in each of n buckets, at the
// buckets' midpoints.
func tokenRate(s *Series, tenants []string, n int) plotter.XYs {
	xys := make(plotter.XYs, n)
	for i := range n {
		var tok int64
		for _, t := range tenants {
			tok += at(s.PromptTokens[t], i) + at(s.OutputTokens[t], i)
		}
		xys[i] = plotter.XY{X: (float64(i) + 0.5) * s.BucketS, Y: float64(tok) / s.BucketS}
	}
	return xys
}
