package report

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"

	"kvroute/results"
)

// maxTenantLines is how many tenants get their own line; the rest are summed as "other".
const maxTenantLines = 8

// servicePNG draws, at the group's highest load, one panel per policy (its first
// replication) of the tokens served per second to each tenant over time, titled with
// Jain's index over the run; nil when no run there has two tenants.
func servicePNG(g *groupPlan) ([]byte, error) {
	var panels []*plot.Plot
	var names []string // the tenants of the legend, in style order
	for _, c := range g.top().cells {
		r := c.runs[0]
		s := r.Series
		if len(s.Tenants()) < 2 || s.Buckets() == 0 {
			continue
		}
		p := newPlot(panelTitle(c.variant, fmt.Sprintf("Jain %.3f", r.Metrics.JainFairness)), "time since the run began (s)",
			"tokens served (tokens/s)")
		n := s.Buckets()
		tenants, other := topTenants(s)
		lines := make([][]string, 0, len(tenants)+1)
		for _, t := range tenants {
			lines = append(lines, []string{t})
		}
		if len(other) > 0 {
			lines = append(lines, other)
		}
		peak := 0.0
		for _, ts := range lines {
			name := tenantName(ts)
			i := slices.Index(names, name)
			if i < 0 {
				names, i = append(names, name), len(names)
			}
			xys := tokenRate(s, ts, n)
			for _, xy := range xys {
				peak = max(peak, xy.Y)
			}
			l, err := plotter.NewLine(xys)
			if err != nil {
				return nil, err
			}
			l.LineStyle = lineStyle(i, false)
			p.Add(l)
		}
		p.Y.Min, p.Y.Max = 0, max(peak*1.05, 1e-9)
		p.X.Min, p.X.Max = 0, float64(n)*s.BucketS
		panels = append(panels, p)
	}
	if len(panels) == 0 {
		return nil, nil
	}
	shareAxes(panels)
	leg := plot.NewLegend()
	for i, name := range names {
		l, err := plotter.NewLine(plotter.XYs{{X: 0, Y: 0}, {X: 1, Y: 0}})
		if err != nil {
			return nil, err
		}
		l.LineStyle = lineStyle(i, false)
		leg.Add(name, l)
	}
	return panelGrid(panels, gridCols(len(panels)), leg, names)
}

// titleWidth is how many characters of a panel's title fit on one line.
const titleWidth = 44

// panelTitle is "name — suffix" when it fits a panel's width; otherwise the name broken after
// its commas into lines that fit, and the suffix on a line of its own.
func panelTitle(name, suffix string) string {
	if len(name)+3+len(suffix) <= titleWidth {
		return name + " — " + suffix
	}
	var lines []string
	line := ""
	for _, part := range strings.SplitAfter(name, ",") {
		if line != "" && len(line)+len(part) > titleWidth {
			lines, line = append(lines, line), ""
		}
		line += part
	}
	return strings.Join(append(lines, line, suffix), "\n")
}

// tenantName labels a tenant's line, or the line of several summed tenants.
func tenantName(ts []string) string {
	switch {
	case len(ts) > 1:
		return fmt.Sprintf("other (%d tenants)", len(ts))
	case ts[0] == "":
		return "(none)"
	}
	return ts[0]
}

// topTenants splits s's tenants into the maxTenantLines most served (by total service, ties
// by name) in name order, and the rest.
func topTenants(s *results.Series) (top, rest []string) {
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
func tokenRate(s *results.Series, tenants []string, n int) plotter.XYs {
	xys := make(plotter.XYs, n)
	for i := range n {
		var tok int64
		for _, t := range tenants {
			tok += s.Tokens(t, i)
		}
		xys[i] = plotter.XY{X: (float64(i) + 0.5) * s.BucketS, Y: float64(tok) / s.BucketS}
	}
	return xys
}

// shareAxes gives every panel the union of their axis ranges, so they compare at a glance.
func shareAxes(panels []*plot.Plot) {
	x, y := panels[0].X.Max, panels[0].Y.Max
	for _, p := range panels {
		x, y = max(x, p.X.Max), max(y, p.Y.Max)
	}
	for _, p := range panels {
		p.X.Max, p.Y.Max = x, y
	}
}
