package report

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/tw"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"

	"kvroute/results"
)

// CompareFile is the report Comparison.WriteDir writes.
const CompareFile = "compare.md"

// CompareConfig sets the tolerances of a simulated-against-live comparison. The defaults
// follow the fidelity published for LLM-serving simulators: BLIS reports median errors of
// 6.7–9.2% on E2E (mean to p99), 7.1% on ITL and 17.6–29.0% on TTFT (mean to p99), Vidur
// under 9% on latency; TTFT is looser because queueing compounds every step-time error.
type CompareConfig struct {
	// TTFT, TPOT and E2E are the largest relative errors |sim − live| / live accepted for the
	// mean, p50, p90 and p99 of each latency, in that order (0.2 = 20%). Defaults: TTFT 20%,
	// 20%, 25%, 30%; TPOT and E2E 10%, 10%, 10%, 15%.
	TTFT, TPOT, E2E [4]float64
	// HitRate is the largest absolute error accepted on the token-weighted hit rate (0..1);
	// default 0.05 (five points).
	HitRate float64
}

// DefaultCompareConfig returns the documented tolerances.
func DefaultCompareConfig() CompareConfig {
	return CompareConfig{
		TTFT: [4]float64{0.20, 0.20, 0.25, 0.30}, TPOT: [4]float64{0.10, 0.10, 0.10, 0.15},
		E2E: [4]float64{0.10, 0.10, 0.10, 0.15}, HitRate: 0.05,
	}
}

// Validate rejects negative, NaN and infinite tolerances.
func (c CompareConfig) Validate() error {
	var errs []error
	all := append(append(append([]float64{c.HitRate}, c.TTFT[:]...), c.TPOT[:]...), c.E2E[:]...)
	for _, v := range all {
		if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			errs = append(errs, fmt.Errorf("results: compare tolerance %v: want a finite value >= 0", v))
		}
	}
	return errors.Join(errs...)
}

// MetricError is one metric of a simulated and a live run side by side.
type MetricError struct {
	// Metric names the value: "ttft_ms.p99", "hit_rate", or "server_hit_rate" (the live
	// servers' own prefix-cache counters, from the scenario).
	Metric string
	// Sim and Live are the two values (milliseconds for latencies, 0..1 for hit rates).
	Sim, Live float64
	// Err is (Sim − Live) / Live for latencies (Relative) and Sim − Live for hit rates; NaN
	// when the live latency is 0 and the simulated one is not.
	Err      float64
	Relative bool
	// Tolerance is the largest |Err| accepted; Within reports |Err| ≤ Tolerance.
	Tolerance float64
	Within    bool
}

// Pair is a simulated run matched with a live run of the same workload and load.
type Pair struct {
	Sim, Live results.Run
	// MatchedBy says how: "name", "policy+load" or "load".
	MatchedBy string
	// Errors holds one entry per compared metric, in a fixed order.
	Errors []MetricError
}

// Within reports whether every metric of the pair is within its tolerance.
func (p *Pair) Within() bool {
	for _, e := range p.Errors {
		if !e.Within {
			return false
		}
	}
	return true
}

// Comparison is the outcome of Compare.
type Comparison struct {
	// Config holds the tolerances used.
	Config CompareConfig
	// Pairs lists the matched runs, in the simulated runs' order.
	Pairs []Pair
	// UnmatchedSim and UnmatchedLive name the runs left without a partner.
	UnmatchedSim, UnmatchedLive []string
}

// Compare matches simulated runs with live runs and computes each pair's errors. Runs are
// matched by name first; the rest by policy and load level (four significant digits), and
// then by load level alone, each only where the match is unique on both sides. It fails
// when no pair is found.
func Compare(sim, live []results.Run, c CompareConfig) (*Comparison, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	out := &Comparison{Config: c}
	simUsed, liveUsed := make([]bool, len(sim)), make([]bool, len(live))
	matched := make([]int, len(sim))
	by := make([]string, len(sim))
	for i := range matched {
		matched[i] = -1
	}
	keys := []struct {
		name string
		key  func(*results.Run) string
	}{
		{"name", func(r *results.Run) string { return r.Name }},
		{"policy+load", func(r *results.Run) string { return r.Policy + "\x00" + loadKey(r.RequestRate) }},
		{"load", func(r *results.Run) string { return loadKey(r.RequestRate) }},
	}
	for _, k := range keys {
		s, l := uniqueKeys(sim, simUsed, k.key), uniqueKeys(live, liveUsed, k.key)
		for key, i := range s {
			if j, ok := l[key]; ok {
				matched[i], by[i], simUsed[i], liveUsed[j] = j, k.name, true, true
			}
		}
	}
	for i, j := range matched {
		if j < 0 {
			out.UnmatchedSim = append(out.UnmatchedSim, sim[i].Name)
			continue
		}
		out.Pairs = append(out.Pairs, Pair{Sim: sim[i], Live: live[j], MatchedBy: by[i], Errors: c.errors(&sim[i], &live[j])})
	}
	for j := range live {
		if !liveUsed[j] {
			out.UnmatchedLive = append(out.UnmatchedLive, live[j].Name)
		}
	}
	if len(out.Pairs) == 0 {
		return out, fmt.Errorf("results: compare: no simulated run matches a live run (simulated %v, live %v)", out.UnmatchedSim, out.UnmatchedLive)
	}
	return out, nil
}

// uniqueKeys maps each key held by exactly one unused run to that run's index.
func uniqueKeys(runs []results.Run, used []bool, key func(*results.Run) string) map[string]int {
	idx, count := map[string]int{}, map[string]int{}
	for i := range runs {
		if !used[i] {
			k := key(&runs[i])
			idx[k] = i
			count[k]++
		}
	}
	for k, n := range count {
		if n > 1 {
			delete(idx, k)
		}
	}
	return idx
}

var quantileNames = [4]string{"mean", "p50", "p90", "p99"}

// errors computes the pair's metric errors: TTFT, TPOT and E2E (mean, p50, p90, p99), the
// hit rate, and the servers' hit rate when the live run recorded one.
func (c CompareConfig) errors(sim, live *results.Run) []MetricError {
	var out []MetricError
	for _, m := range []struct {
		name      string
		sim, live results.Dist
		tol       [4]float64
	}{
		{"ttft_ms", sim.Metrics.TTFT, live.Metrics.TTFT, c.TTFT},
		{"tpot_ms", sim.Metrics.TPOT, live.Metrics.TPOT, c.TPOT},
		{"e2e_ms", sim.Metrics.E2E, live.Metrics.E2E, c.E2E},
	} {
		s := [4]float64{m.sim.Mean, m.sim.P50, m.sim.P90, m.sim.P99}
		l := [4]float64{m.live.Mean, m.live.P50, m.live.P90, m.live.P99}
		for q := range quantileNames {
			out = append(out, relError(m.name+"."+quantileNames[q], s[q], l[q], m.tol[q]))
		}
	}
	out = append(out, absError("hit_rate", sim.Metrics.HitRate, live.Metrics.HitRate, c.HitRate))
	if v, ok := scenarioFloat(live.Scenario, "server_hit_rate"); ok {
		out = append(out, absError("server_hit_rate", sim.Metrics.HitRate, v, c.HitRate))
	}
	return out
}

func relError(name string, sim, live, tol float64) MetricError {
	e := MetricError{Metric: name, Sim: sim, Live: live, Relative: true, Tolerance: tol}
	switch {
	case live != 0:
		e.Err = (sim - live) / live
	case sim != 0:
		e.Err = math.NaN()
	}
	e.Within = math.Abs(e.Err) <= tol
	return e
}

func absError(name string, sim, live, tol float64) MetricError {
	e := MetricError{Metric: name, Sim: sim, Live: live, Err: sim - live, Tolerance: tol}
	e.Within = math.Abs(e.Err) <= tol+1e-12
	return e
}

// scenarioFloat reads a number from a scenario, whether decoded (json.Number) or built.
func scenarioFloat(s map[string]any, key string) (float64, bool) {
	switch v := s[key].(type) {
	case float64:
		return v, true
	case json.Number:
		f, err := v.Float64()
		return f, err == nil
	}
	return 0, false
}

// formatting of the values and errors of a MetricError.
func (e MetricError) values() (sim, live, err, tol, ok string) {
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }
	if !e.Relative {
		f = func(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) }
	}
	switch {
	case math.IsNaN(e.Err):
		err = "n/a"
	case e.Relative:
		err = fmt.Sprintf("%+.1f%%", 100*e.Err)
	default:
		err = fmt.Sprintf("%+.3f", e.Err)
	}
	tol = fmt.Sprintf("±%.3f", e.Tolerance)
	if e.Relative {
		tol = fmt.Sprintf("±%.0f%%", 100*e.Tolerance)
	}
	ok = "yes"
	if !e.Within {
		ok = "NO"
	}
	return f(e.Sim), f(e.Live), err, tol, ok
}

// label names a pair: the simulated run's name, and the live one's when it differs.
func (p *Pair) label() string {
	if p.Sim.Name == p.Live.Name {
		return p.Sim.Name
	}
	return p.Sim.Name + " ↔ " + p.Live.Name
}

// outOfTolerance lists the metrics of the pair that missed their tolerance.
func (p *Pair) outOfTolerance() []string {
	var out []string
	for _, e := range p.Errors {
		if !e.Within {
			out = append(out, e.Metric)
		}
	}
	return out
}

// WriteTable writes the comparison as terminal tables: every metric of every pair, then the
// verdict per pair.
func (c *Comparison) WriteTable(w io.Writer) error {
	t := tablewriter.NewTable(w, tablewriter.WithHeaderAutoFormat(tw.Off),
		tablewriter.WithRowAlignmentConfig(tw.CellAlignment{PerColumn: rightAfter(2, 7)}))
	t.Header("pair", "metric", "sim", "live", "error", "tolerance", "within")
	for i := range c.Pairs {
		p := &c.Pairs[i]
		for _, e := range p.Errors {
			s, l, er, tol, ok := e.values()
			if err := t.Append(p.label(), e.Metric, s, l, er, tol, ok); err != nil {
				return fmt.Errorf("results: compare table: %w", err)
			}
		}
	}
	if err := t.Render(); err != nil {
		return fmt.Errorf("results: compare table: %w", err)
	}
	v := tablewriter.NewTable(w, tablewriter.WithHeaderAutoFormat(tw.Off))
	v.Header("pair", "matched by", "verdict", "out of tolerance")
	for i := range c.Pairs {
		p := &c.Pairs[i]
		if err := v.Append(p.label(), p.MatchedBy, verdict(p), strings.Join(p.outOfTolerance(), " ")); err != nil {
			return fmt.Errorf("results: compare table: %w", err)
		}
	}
	if err := v.Render(); err != nil {
		return fmt.Errorf("results: compare table: %w", err)
	}
	return nil
}

func verdict(p *Pair) string {
	if p.Within() {
		return "within tolerance"
	}
	return "out of tolerance"
}

// WriteDir writes compare.md and its plots to dir: the tolerances, each pair's metric table
// with its TTFT CDF (simulated and live curves), p50 and p99 TTFT against load when there
// are several pairs, the verdict table and the unmatched runs. simName and liveName label
// the two sides (their directories, say).
func (c *Comparison) WriteDir(dir, simName, liveName string) error {
	figs, err := c.figures()
	if err != nil {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Simulation against live\n\nSimulated: `%s`. Live: `%s`. %d matched pairs.\n\n", simName, liveName, len(c.Pairs))
	b.WriteString("Latency errors are relative, (sim − live) / live; hit-rate errors are absolute, sim − live. " +
		"`hit_rate` is the live client's (usage cached_tokens / prompt_tokens); `server_hit_rate` is the live " +
		"servers' vllm:prefix_cache_hits / queries over the run. Tolerances follow published simulator fidelity " +
		"(BLIS: E2E 6.7–9.2%, TTFT 17.6–29% median error; Vidur: under 9%).\n\n")
	c.writeVerdict(&b)
	for i := range c.Pairs {
		p := &c.Pairs[i]
		fmt.Fprintf(&b, "## %s\n\nMatched by %s; load %s req/s simulated, %s live. %s.\n\n| metric | sim | live | error | tolerance | within |\n|---|---:|---:|---:|---:|---|\n",
			p.label(), p.MatchedBy, loadKey(p.Sim.RequestRate), loadKey(p.Live.RequestRate), verdict(p))
		for _, e := range p.Errors {
			s, l, er, tol, ok := e.values()
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", e.Metric, s, l, er, tol, ok)
		}
		b.WriteString("\n")
		if f := figs[i]; f.path != "" {
			fmt.Fprintf(&b, "![%s](%s)\n\n", f.caption, f.path)
		}
	}
	if f := figs[len(c.Pairs)]; f.path != "" {
		fmt.Fprintf(&b, "## TTFT against load\n\n![%s](%s)\n\n", f.caption, f.path)
	}
	if len(c.UnmatchedSim)+len(c.UnmatchedLive) > 0 {
		fmt.Fprintf(&b, "## Unmatched runs\n\nSimulated: %s. Live: %s.\n", orNone(c.UnmatchedSim), orNone(c.UnmatchedLive))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("results: %w", err)
	}
	if err := writeFile(dir, CompareFile, []byte(b.String())); err != nil {
		return err
	}
	for _, f := range figs {
		if f.path != "" {
			if err := writeFile(dir, f.path, f.png); err != nil {
				return err
			}
		}
	}
	return nil
}

func (c *Comparison) writeVerdict(b *strings.Builder) {
	b.WriteString("## Verdict\n\n| pair | matched by | verdict | out of tolerance |\n|---|---|---|---|\n")
	for i := range c.Pairs {
		p := &c.Pairs[i]
		fmt.Fprintf(b, "| %s | %s | %s | %s |\n", p.label(), p.MatchedBy, verdict(p), strings.Join(p.outOfTolerance(), ", "))
	}
	t := c.Config
	fmt.Fprintf(b, "\nTolerances: TTFT %s; TPOT %s; E2E %s (mean, p50, p90, p99); hit rate ±%.3f.\n\n",
		pcts(t.TTFT), pcts(t.TPOT), pcts(t.E2E), t.HitRate)
}

func pcts(v [4]float64) string {
	return fmt.Sprintf("%.0f/%.0f/%.0f/%.0f%%", 100*v[0], 100*v[1], 100*v[2], 100*v[3])
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// figures renders one TTFT CDF per pair (empty when neither run has one) and, last, the
// TTFT-against-load plot (empty with fewer than two pairs).
func (c *Comparison) figures() ([]figure, error) {
	slugs := newSlugger()
	figs := make([]figure, len(c.Pairs)+1)
	for i := range c.Pairs {
		p := &c.Pairs[i]
		pl := newPlot("TTFT CDF — "+p.label(), "TTFT (ms, log scale)", "fraction of requests")
		pl.X.Scale, pl.X.Tick.Marker = plot.LogScale{}, logTicks{}
		pl.Y.Min, pl.Y.Max = 0, 1
		n := 0
		for k, r := range []*results.Run{&p.Sim, &p.Live} {
			if xys := cdfXYs(r.Series); xys != nil && addLine(pl, []string{"simulated", "live"}[k], xys, k, k, false) == nil {
				n++
			}
		}
		if n == 0 {
			continue
		}
		b, err := plotPNG(pl, plotH, true)
		if err != nil {
			return nil, fmt.Errorf("results: compare plot of %q: %w", p.label(), err)
		}
		figs[i] = figure{path: "compare-ttft-cdf-" + slugs.unique(p.Sim.Name) + ".png", caption: "TTFT CDF, " + p.label(), png: b}
	}
	if len(c.Pairs) < 2 {
		return figs, nil
	}
	pl := newPlot("TTFT against load — simulated (solid) and live (dashed)", "request rate (req/s)", "TTFT (ms, log scale)")
	pl.Y.Scale, pl.Y.Tick.Marker = plot.LogScale{}, logTicks{}
	for k, side := range []string{"simulated", "live"} {
		for qi, q := range []string{"p99", "p50"} {
			var xys plotter.XYs
			for i := range c.Pairs {
				r := []*results.Run{&c.Pairs[i].Sim, &c.Pairs[i].Live}[k]
				v := map[string]float64{"p99": r.Metrics.TTFT.P99, "p50": r.Metrics.TTFT.P50}[q]
				if v > 0 {
					xys = append(xys, plotter.XY{X: c.Pairs[i].Live.RequestRate, Y: v})
				}
			}
			if len(xys) > 0 {
				if err := addLine(pl, side+" "+q, xys, qi, k, true); err != nil {
					return nil, fmt.Errorf("results: compare load plot: %w", err)
				}
			}
		}
	}
	b, err := plotPNG(pl, plotH, true)
	if err != nil {
		return nil, fmt.Errorf("results: compare load plot: %w", err)
	}
	figs[len(c.Pairs)] = figure{path: "compare-ttft-vs-rate.png", caption: "p50 and p99 TTFT against load, simulated and live", png: b}
	return figs, nil
}

// cdfXYs returns a TTFT CDF as plot points starting at 0, or nil when there is none.
func cdfXYs(s *results.Series) plotter.XYs {
	if s == nil || len(s.TTFTCDF) == 0 {
		return nil
	}
	xys := plotter.XYs{{X: max(s.TTFTCDF[0].Ms, 1e-3), Y: 0}}
	for _, pt := range s.TTFTCDF {
		xys = append(xys, plotter.XY{X: max(pt.Ms, 1e-3), Y: pt.Frac})
	}
	return xys
}
