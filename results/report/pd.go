package report

import (
	"fmt"
	"math"
	"strings"

	"kvroute/results/stats"
)

// SectionPD compares fleets that differ only in how their GPUs are split into prefill and
// decode pools (the sweep's fleet.split axis), by goodput under the sweep's SLO.
const SectionPD = "## P/D"

// pdKey matches the fleet's split in a group name ("pd split=4P+4D,…").
var pdKey = axisKey("split")

// pdAggregated is the split value of a fleet with no roles.
const pdAggregated = "aggregated"

// pdFamily is an aggregated fleet's group and its P/D twins, in plan order.
type pdFamily struct {
	base   string
	agg    *groupPlan
	splits []axisTwin
}

// pdFamilies gathers the P/D twins of each aggregated group.
func pdFamilies(plan []groupPlan) []pdFamily {
	var out []pdFamily
	at := map[*groupPlan]int{}
	for _, t := range axisTwins(plan, pdKey, pdAggregated) {
		i, ok := at[t.ref]
		if !ok {
			i, at[t.ref] = len(out), len(out)
			out = append(out, pdFamily{base: t.base, agg: t.ref})
		}
		out[i].splits = append(out[i].splits, t)
	}
	return out
}

// pdConfig is one fleet configuration's policies at one configured point, judged by goodput.
type pdConfig struct {
	name  string // "aggregated" or the split
	cells []*cell
	j     judgement
	ok    bool // some run had goodput
}

// pdPoint is one configured point of a family: every configuration at that rate.
type pdPoint struct {
	key, rate string
	configs   []pdConfig // aggregated first
}

// points returns the family's configured points that its aggregated group ran, each with the
// splits that ran it too.
func (f pdFamily) points() []pdPoint {
	var out []pdPoint
	for _, l := range f.agg.levels {
		p := pdPoint{key: l.key, rate: l.rateText(f.agg.unit)}
		p.configs = append(p.configs, newPDConfig(pdAggregated, l.cells))
		for _, t := range f.splits {
			for _, sl := range t.alt.levels {
				if sl.key == l.key {
					p.configs = append(p.configs, newPDConfig(t.value, sl.cells))
				}
			}
		}
		out = append(out, p)
	}
	return out
}

func newPDConfig(name string, cells []*cell) pdConfig {
	c := pdConfig{name: name, cells: cells}
	c.j, c.ok = judge(cells, metric("goodput_rps"))
	return c
}

// overall judges every configuration's policies together, each labelled "split / policy".
func (p pdPoint) overall() (judgement, bool) {
	var all []*cell
	for _, c := range p.configs {
		for _, x := range c.cells {
			all = append(all, &cell{variant: c.name + " / " + x.variant, policy: x.policy, runs: x.runs})
		}
	}
	return judge(all, metric("goodput_rps"))
}

// bestSplit returns the split whose best policy has the most goodput, or false when no split
// has goodput.
func (p pdPoint) bestSplit() (pdConfig, bool) {
	var best pdConfig
	found := false
	for _, c := range p.configs[1:] {
		if c.ok && (!found || c.j.bestIV.Mean > best.j.bestIV.Mean) {
			best, found = c, true
		}
	}
	return best, found
}

// PDMinGain is the smallest goodput difference, as a fraction of the aggregated fleet's best
// goodput, that the P/D answer calls a gain or a loss: a significant difference below it
// (P/D's longer first token shifting a few requests past the end of the run) is "no
// significant difference".
const PDMinGain = 0.02

// pdVerdict compares the best split's best policy with the aggregated fleet's, paired over
// replications: +1 when P/D's goodput is significantly higher (by PDMinGain at least), −1
// when lower, 0 when the difference is within noise or below PDMinGain (or untested).
func (p pdPoint) pdVerdict() (split pdConfig, diff stats.Interval, sign int, ok bool) {
	agg := p.configs[0]
	split, ok = p.bestSplit()
	if !ok || !agg.ok {
		return pdConfig{}, stats.Interval{}, 0, false
	}
	diff = goodputDiff(split.j.best, agg.j.best)
	switch {
	case !diff.Tested() || math.Abs(diff.Mean) < PDMinGain*agg.j.bestIV.Mean:
	case diff.Lo > 0:
		sign = 1
	case diff.Hi < 0:
		sign = -1
	}
	return split, diff, sign, true
}

// sloText names the SLO the family's runs were held to, from the first run that has one.
func (f pdFamily) sloText() string {
	for _, r := range f.agg.runs {
		if g := r.Metrics.Goodput; g != nil {
			var parts []string
			for _, o := range []struct {
				name string
				ms   float64
			}{{"TTFT", g.SLO.TTFTMs}, {"TPOT", g.SLO.TPOTMs}, {"E2E", g.SLO.E2EMs}} {
				if o.ms > 0 {
					parts = append(parts, o.name+" ≤ "+fmtMs(o.ms))
				}
			}
			return strings.Join(parts, ", ")
		}
	}
	return ""
}

// writePDAnswer writes the answer's P/D line for each family: at its highest configured
// point, the configuration and policy with the most goodput under the SLO (and those tied
// with it) against the aggregated fleet's best; then, point by point, where P/D pays
// (significantly more goodput than the aggregated fleet's best policy), loses, or ties.
func writePDAnswer(b *strings.Builder, plan []groupPlan) {
	for _, f := range pdFamilies(plan) {
		slo := f.sloText()
		if slo == "" {
			fmt.Fprintf(b, "- P/D, for **%s**: no SLO was set, so there is no goodput to compare the splits by; "+
				"set `slo: {ttft_ms: …, tpot_ms: …}` in the sweep file.\n\n", f.base)
			continue
		}
		pts := f.points()
		top := pts[len(pts)-1]
		j, ok := top.overall()
		if !ok {
			continue
		}
		fmt.Fprintf(b, "- P/D, for **%s** (SLO: %s), at %s: the most goodput is **%s**, %s", f.base, slo, top.rate,
			j.best.variant, ivText(j.bestIV, j.m.unit))
		if t := j.tied(); len(t) > 1 {
			fmt.Fprintf(b, " (tied with it: %s)", strings.Join(variants(t[1:]), ", "))
		}
		if agg := top.configs[0]; agg.ok {
			fmt.Fprintf(b, "; the aggregated fleet's best, %s, %s", tiedNames(agg.j), ivText(agg.j.bestIV, agg.j.m.unit))
		}
		b.WriteString(". " + pdWhen(pts) + "\n\n")
	}
}

// pdWhen says at which points P/D pays, loses or ties, with the best split and its goodput
// difference from the aggregated fleet's best policy.
func pdWhen(pts []pdPoint) string {
	var pays, loses, even []string
	for _, p := range pts {
		split, diff, sign, ok := p.pdVerdict()
		if !ok {
			continue
		}
		s := fmt.Sprintf("%s (%s, %s)", p.rate, split.name, diffText(diff))
		switch sign {
		case 1:
			pays = append(pays, s)
		case -1:
			loses = append(loses, s)
		default:
			even = append(even, s)
		}
	}
	var parts []string
	for _, g := range []struct {
		what string
		pts  []string
	}{{"P/D pays at", pays}, {"loses at", loses}, {"no significant difference at", even}} {
		if len(g.pts) > 0 {
			parts = append(parts, g.what+" "+strings.Join(g.pts, ", "))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return strings.Join(parts, "; ") + " (in brackets: the best split, and its best policy's goodput minus the aggregated " +
		"fleet's best policy's, paired over replications)."
}

// diffText formats a signed goodput difference with its interval: "+2.8 req/s [2.1, 3.5]".
func diffText(iv stats.Interval) string {
	unit := metric("goodput_rps").unit
	s := ivText(iv, unit)
	if iv.Mean > 0 {
		s = "+" + s
	}
	if !iv.Tested() {
		s += " (untested)"
	}
	return s
}

// variants lists the cells' variants.
func variants(cs []*cell) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.variant
	}
	return out
}

// writePDSection writes, per family and configured point, each configuration's best
// policies by goodput, their share of requests within the SLO, p99 TTFT and TPOT, and the
// goodput difference from the aggregated fleet's best.
func writePDSection(b *strings.Builder, plan []groupPlan) {
	var fams []pdFamily
	for _, f := range pdFamilies(plan) {
		if f.sloText() != "" { // without an SLO there is no goodput: the answer line says so
			fams = append(fams, f)
		}
	}
	if len(fams) == 0 {
		return
	}
	b.WriteString(SectionPD + "\n\n")
	for _, f := range fams {
		slo := f.sloText()
		fmt.Fprintf(b, "**%s**, by fleet split, under the SLO (%s): per split the policy with the most goodput (and those "+
			"tied with it), its requests within the SLO, p99 TTFT and p99 TPOT, and its goodput minus the aggregated fleet's "+
			"best (paired over replications):\n\n", f.base, slo)
		b.WriteString("| rate | fleet | most goodput | goodput | within SLO | p99 TTFT | p99 TPOT | − aggregated's best |\n" +
			"|---|---|---|---|---|---|---|---|\n")
		for _, p := range f.points() {
			for i, c := range p.configs {
				if c.ok {
					b.WriteString("| " + strings.Join(pdRow(p, i, c), " | ") + " |\n")
				}
			}
		}
		b.WriteString("\n")
	}
}

// pdRow is one configuration's row of the P/D table.
func pdRow(p pdPoint, i int, c pdConfig) []string {
	best := c.j.best
	row := []string{p.key, c.name, tiedNames(c.j), ivText(c.j.bestIV, c.j.m.unit), withinSLO(best)}
	for _, k := range []string{"ttft_ms_p99", "tpot_ms_p99"} {
		iv, _ := best.interval(metric(k))
		row = append(row, ivText(iv, fmtMs))
	}
	agg := p.configs[0]
	if i == 0 || !agg.ok {
		return append(row, "—")
	}
	return append(row, diffText(goodputDiff(best, agg.j.best)))
}

// goodputDiff is c's goodput minus base's, paired over replications.
func goodputDiff(c, base *cell) stats.Interval {
	x, y := paired(c, base, metric("goodput_rps"))
	diff, _ := stats.PairedT(x, y, false)
	return diff
}

// withinSLO is the mean share of the cell's requests that met the SLO, in percent.
func withinSLO(c *cell) string {
	var v []float64
	for _, r := range c.runs {
		if g := r.Metrics.Goodput; g != nil {
			v = append(v, 100*g.Fraction)
		}
	}
	if len(v) == 0 {
		return "—"
	}
	return fmt.Sprintf("%.1f%%", stats.MeanCI(v).Mean)
}
