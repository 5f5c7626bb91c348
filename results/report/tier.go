package report

import (
	"fmt"
	"strings"

	"kvroute/results/stats"
)

// SectionTier compares groups that differ only in the fleet's CPU KV tier.
const SectionTier = "## CPU tier"

// tierKey matches the CPU tier's size in a group name ("offload kv_offloading_size=64,…").
var tierKey = axisKey("kv_offloading_size")

// tierPairs finds, in plan order, each group with a CPU tier and its twin without one
// (size 0): ref is the group without, alt the one with, value the tier's GiB per replica.
func tierPairs(plan []groupPlan) []axisTwin { return axisTwins(plan, tierKey, "0") }

// gap judges the group's top level by p99 TTFT and returns the worst policy against the best
// (ok false for the worst when one policy ran).
func gap(g *groupPlan) (j judgement, worst vs, judged, ok bool) {
	j, judged = judge(g.top().cells, metric("ttft_ms_p99"))
	if !judged || len(j.others) == 0 {
		return j, vs{}, judged, false
	}
	return j, j.others[len(j.others)-1], true, true
}

// writeTierAnswer writes the answer's line for each pair: the policies to use with and
// without the tier, and the best-to-worst gap in each (with one policy, its p99 TTFT in each).
func writeTierAnswer(b *strings.Builder, pairs []axisTwin) {
	for _, p := range pairs {
		jo, wo, judged1, ok1 := gap(p.ref)
		jn, wn, judged2, ok2 := gap(p.alt)
		if !judged1 || !judged2 {
			continue
		}
		fmt.Fprintf(b, "- CPU tier, for **%s**: without one, use %s (%s); with %s GiB per replica, %s (%s).",
			p.base, tiedNames(jo), ivText(jo.bestIV, jo.m.unit), p.value, tiedNames(jn), ivText(jn.bestIV, jn.m.unit))
		if ok1 && ok2 {
			fmt.Fprintf(b, " The worst policy's p99 TTFT is %s the best's without the tier (%s) and %s with it (%s).",
				ratioText(wo.iv), wo.c.variant, ratioText(wn.iv), wn.c.variant)
		}
		b.WriteString("\n\n")
	}
}

// tiedNames lists the best policy and those tied with it.
func tiedNames(j judgement) string {
	var names []string
	for _, c := range j.tied() {
		names = append(names, c.variant)
	}
	return strings.Join(names, ", ")
}

// writeTierSection writes, per pair, each policy's p99 and p50 TTFT with the tier as a
// multiple of without it, paired over replications (both saw the same requests).
func writeTierSection(b *strings.Builder, plan []groupPlan) {
	pairs := tierPairs(plan)
	if len(pairs) == 0 {
		return
	}
	b.WriteString(SectionTier + "\n\n")
	for _, p := range pairs {
		off, on := p.ref.top(), p.alt.top()
		fmt.Fprintf(b, "**%s** at %s, with a CPU tier of %s GiB per replica against none; a ratio below 1× means "+
			"the tier helps (paired over replications):\n\n", p.base, on.rateText(p.alt.unit), p.value)
		b.WriteString("| policy | p99 TTFT without | p99 TTFT with | p99 with/without | p50 with/without |\n|---|---|---|---|---|\n")
		for _, c := range on.cells {
			i := indexCell(off.cells, c.variant)
			if i < 0 {
				continue
			}
			row := []string{c.variant}
			for _, cc := range []*cell{off.cells[i], c} {
				iv, _ := cc.interval(metric("ttft_ms_p99"))
				row = append(row, ivText(iv, fmtMs))
			}
			for _, k := range []string{"ttft_ms_p99", "ttft_ms_p50"} {
				x, y := paired(c, off.cells[i], metric(k))
				iv, _ := stats.PairedT(x, y, true)
				row = append(row, ratioText(iv))
			}
			b.WriteString("| " + strings.Join(row, " | ") + " |\n")
		}
		b.WriteString("\n")
	}
}

// indexCell finds the cell of a variant, or -1.
func indexCell(cells []*cell, variant string) int {
	for i, c := range cells {
		if c.variant == variant {
			return i
		}
	}
	return -1
}
