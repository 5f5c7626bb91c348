package results

import (
	"encoding/json"
	"fmt"
	"strings"
)

// reportIntro states the definitions every number in the report follows.
const reportIntro = "Latencies are in milliseconds, as `vllm bench serve` defines them: TTFT = first token − arrival, " +
	"TPOT = (E2E − TTFT) / (output tokens − 1), ITL = the gap between successive tokens, E2E = finish − arrival. " +
	"Throughput counts completed requests over the run's duration (last finish − first arrival). " +
	"The hit rate is token-weighted (cached prompt tokens / prompt tokens); Jain's index is over per-tenant service " +
	"(prompt + 2 × output tokens).\n\n"

// buildReport renders report.md from the runs, their plan and the rendered figures.
func buildReport(runs []Run, plan []groupPlan, figs []figure) ([]byte, error) {
	var b strings.Builder
	b.WriteString("# kvroute results\n\n")
	fmt.Fprintf(&b, "%d runs in %d scenario groups. ", len(runs), len(plan))
	b.WriteString(reportIntro)
	crit := usedCriteria(runs)
	writeVerdict(&b, plan, crit)
	writeRunsTable(&b, plan, crit[len(crit)-1].title == "best goodput")
	writeStagesSection(&b, runs)
	for gi := range plan {
		writeGroup(&b, &plan[gi], figs)
	}
	if err := writeScenarios(&b, plan); err != nil {
		return nil, err
	}
	return []byte(b.String()), nil
}

// writeRunsTable writes the key metrics, one row per run, grouped as the plan is.
func writeRunsTable(b *strings.Builder, plan []groupPlan, goodput bool) {
	b.WriteString("## Runs\n\n| run | policy | group | load (req/s) | completed | failed | req/s | out tok/s | " +
		"TTFT p50 | TTFT p99 | TPOT p50 | TPOT p99 | ITL p99 | E2E p99 | hit rate | Jain | preemptions |")
	align := "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
	if goodput {
		b.WriteString(" goodput (req/s) | met SLO |")
		align += "---:|---:|"
	}
	b.WriteString("\n" + align + "\n")
	for gi := range plan {
		for _, l := range plan[gi].levels {
			for _, r := range l.runs {
				m := &r.Metrics
				fmt.Fprintf(b, "| %s | %s | %s | %s | %d/%d | %d | %.2f | %.1f | %.1f | %.1f | %.2f | %.2f | %.2f | %.1f | %.3f | %.3f | %d |",
					md(r.Name), md(r.Policy), md(plan[gi].name), l.key, m.Completed, m.Requests, m.Failed,
					m.ThroughputRPS, m.OutputTokensPerS, m.TTFT.P50, m.TTFT.P99, m.TPOT.P50, m.TPOT.P99,
					m.ITL.P99, m.E2E.P99, m.HitRate, m.JainFairness, m.Preemptions)
				if goodput {
					if g := m.Goodput; g != nil {
						fmt.Fprintf(b, " %.2f | %.1f%% |", g.RPS, 100*g.Fraction)
					} else {
						b.WriteString(" — | — |")
					}
				}
				b.WriteString("\n")
			}
		}
	}
	b.WriteString("\n")
}

// writeGroup writes a group's section: its figures and its decision-branch counts.
func writeGroup(b *strings.Builder, g *groupPlan, figs []figure) {
	fmt.Fprintf(b, "## Group %s\n\n", md(g.name))
	sections := []struct{ kind, title string }{
		{"cdf", "TTFT distribution"}, {"ttft", "TTFT against load"},
		{"hit-rate", "Hit rate against load"}, {"throughput", "Throughput against load"},
	}
	n := len(b.String())
	for _, s := range sections {
		writeFigures(b, g, figs, s.kind, s.title)
	}
	writeReasons(b, g, figs)
	writeFigures(b, g, figs, "service", "Per-tenant service over time")
	if len(b.String()) == n {
		b.WriteString("No plots: no run in this group completed a request or recorded a routing decision.\n\n")
	}
}

// writeFigures embeds the group's figures of one kind under a heading (none when title is "").
func writeFigures(b *strings.Builder, g *groupPlan, figs []figure, kind, title string) {
	first := true
	for _, f := range figs {
		if f.group != g.name || f.kind != kind {
			continue
		}
		if first && title != "" {
			fmt.Fprintf(b, "### %s\n\n", title)
		}
		first = false
		caption := strings.NewReplacer("[", "\\[", "]", "\\]", "\n", " ").Replace(f.caption)
		fmt.Fprintf(b, "![%s](%s)\n\n", caption, f.path)
	}
}

// writeReasons writes the decision-branch counts of every run in g that recorded any.
func writeReasons(b *strings.Builder, g *groupPlan, figs []figure) {
	header := false
	for _, l := range g.levels {
		for _, r := range l.runs {
			total := 0
			for _, c := range r.Metrics.Reasons {
				total += c
			}
			if total == 0 {
				continue
			}
			if !header {
				b.WriteString("### Routing decisions\n\n| run | load (req/s) | branch | decisions | share |\n|---|---:|---|---:|---:|\n")
				header = true
			}
			for _, k := range sortedKeys(r.Metrics.Reasons) {
				c := r.Metrics.Reasons[k]
				fmt.Fprintf(b, "| %s | %s | %s | %d | %.1f%% |\n", md(r.Name), l.key, md(k), c, 100*float64(c)/float64(total))
			}
		}
	}
	if header {
		b.WriteString("\n")
		writeFigures(b, g, figs, "reasons", "")
	}
}

// writeScenarios lists each run's labels and scenario parameters.
func writeScenarios(b *strings.Builder, plan []groupPlan) error {
	b.WriteString("## Scenarios\n\n| run | labels | scenario |\n|---|---|---|\n")
	for gi := range plan {
		for _, l := range plan[gi].levels {
			for _, r := range l.runs {
				scen := []byte("{}")
				if len(r.Scenario) > 0 {
					var err error
					if scen, err = json.Marshal(r.Scenario); err != nil {
						return fmt.Errorf("results: report: scenario of run %q: %w", r.Name, err)
					}
				}
				fmt.Fprintf(b, "| %s | %s | `%s` |\n", md(r.Name), md(strings.Join(r.Labels, ", ")), md(string(scen)))
			}
		}
	}
	return nil
}
