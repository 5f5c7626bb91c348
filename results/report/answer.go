package report

import (
	"fmt"
	"strings"
)

// writeAnswer opens the report with what to use for each group's traffic: at its highest
// configured rate (or its one configured point), the policy with the lowest p99 TTFT when its
// lead is significant (or the policies tied for it), those that are significantly slower,
// those to avoid and why; one line per lower rate; and, with tenants, the fairness lines.
func writeAnswer(b *strings.Builder, plan []groupPlan) {
	b.WriteString(SectionAnswer + "\n\n")
	m := metric("ttft_ms_p99")
	for gi := range plan {
		g := &plan[gi]
		top := g.top()
		j, ok := judge(top.cells, m)
		if !ok {
			fmt.Fprintf(b, "**%s**: no run completed a request.\n\n", g.name)
			continue
		}
		at := "its highest load, " + top.rateText(g.unit)
		if !top.configured() || len(g.levels) == 1 {
			at = top.rateText(g.unit)
		}
		fmt.Fprintf(b, "**%s** at %s, by p99 TTFT over %s:\n\n", g.name, at, plural(reps(top), "replication"))
		writeChoice(b, j)
		if len(g.levels) > 1 {
			fmt.Fprintf(b, "- At lower rates (%s), by p99 TTFT: ", g.unit)
			var parts []string
			for _, l := range g.levels[:len(g.levels)-1] {
				if lj, ok := judge(l.cells, m); ok {
					parts = append(parts, l.key+": "+levelSummary(lj))
				}
			}
			b.WriteString(strings.Join(parts, "; ") + ".\n")
		}
		if g.tenants {
			writeFairnessAnswer(b, g, top)
		}
		b.WriteString("\n")
	}
	writeTierAnswer(b, tierPairs(plan))
	writePDAnswer(b, plan)
}

// writeChoice writes the use / tied / slower / avoid lines of one judgement.
func writeChoice(b *strings.Builder, j judgement) {
	best := j.best.variant + " " + ivText(j.bestIV, j.m.unit)
	switch {
	case len(j.others) == 0:
		fmt.Fprintf(b, "- Only one policy ran: %s.\n", best)
		return
	case !j.tested:
		fmt.Fprintf(b, "- Lowest p99 TTFT: %s. One replication cannot tell a difference from noise: set "+
			"`replications: 5` in the sweep file to test it.\n", best)
		var parts []string
		for _, o := range j.others {
			parts = append(parts, o.c.variant+" "+ratioText(o.iv))
		}
		fmt.Fprintf(b, "- The others' p99 TTFT as a multiple of the lowest (untested): %s.\n", strings.Join(parts, ", "))
	case j.winner():
		fmt.Fprintf(b, "- **Use %s**: the lowest p99 TTFT, %s, significantly below every other policy.\n",
			j.best.variant, ivText(j.bestIV, j.m.unit))
	default:
		tied := j.tied()
		var parts []string
		for _, c := range tied {
			iv, _ := c.interval(j.m)
			parts = append(parts, c.variant+" "+ivText(iv, j.m.unit))
		}
		fmt.Fprintf(b, "- **No single winner: %d policies are tied** for the lowest p99 TTFT (their differences from "+
			"the best are within noise): %s. Choose among them on hit rate, throughput or simplicity.\n",
			len(tied), strings.Join(parts, ", "))
	}
	var slower, avoid []string
	for _, o := range j.others {
		switch {
		case !o.worse:
		case o.iv.Mean >= AvoidRatio:
			why := fmt.Sprintf("**%s**: p99 TTFT %s the best's", o.c.variant, ratioText(o.iv))
			if f := cellFlags(o.c); f != "" {
				why += "; it " + strings.TrimPrefix(f, o.c.variant+" ")
			}
			avoid = append(avoid, why)
		default:
			slower = append(slower, fmt.Sprintf("%s %s", o.c.variant, ratioText(o.iv)))
		}
	}
	if len(slower) > 0 {
		fmt.Fprintf(b, "- Significantly slower, by less than %g×: %s.\n", AvoidRatio, strings.Join(slower, ", "))
	}
	if len(avoid) > 0 {
		fmt.Fprintf(b, "- **Avoid** (p99 TTFT at least %g× the best's, significantly):\n", AvoidRatio)
		for _, a := range avoid {
			fmt.Fprintf(b, "  - %s.\n", a)
		}
		var bad []*cell
		for _, o := range j.others {
			if o.worse && o.iv.Mean >= AvoidRatio {
				bad = append(bad, o.c)
			}
		}
		fmt.Fprintf(b, "- Why, in means per run: the best (%d) have a hit rate of %s and %s preemptions; those to avoid, "+
			"a hit rate of %s and %s preemptions.\n", len(j.tied()), span(j.tied(), "hit_rate"), span(j.tied(), "preemptions"),
			span(bad, "hit_rate"), span(bad, "preemptions"))
	}
}

// span formats the range of the cells' means of a metric: "0.80–0.85", or one value.
func span(cells []*cell, key string) string {
	m := metric(key)
	lo, hi, n := 0.0, 0.0, 0
	for _, c := range cells {
		if iv, ok := c.interval(m); ok {
			if n == 0 || iv.Mean < lo {
				lo = iv.Mean
			}
			if n == 0 || iv.Mean > hi {
				hi = iv.Mean
			}
			n++
		}
	}
	switch {
	case n == 0:
		return "—"
	case m.unit(lo) == m.unit(hi):
		return m.unit(lo)
	}
	return m.unit(lo) + "–" + m.unit(hi)
}

// levelSummary says in a few words who leads at a level.
func levelSummary(j judgement) string {
	switch {
	case len(j.others) == 0 || !j.tested:
		return j.best.variant + " lowest (untested)"
	case j.winner():
		return j.best.variant + " wins (" + ivText(j.bestIV, j.m.unit) + ")"
	}
	return fmt.Sprintf("%d of %d tied with %s (%s)", len(j.tied()), len(j.others)+1, j.best.variant, fmtMs(j.bestIV.Mean))
}

// plural writes n and the noun, with an s unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
