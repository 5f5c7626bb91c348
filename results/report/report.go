package report

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"kvroute/results"
)

// Report sections, in order; a results directory's report.md and report.html hold those
// that apply (Warnings only when something was flagged, Fairness only with tenants, Stages
// only with staged arrivals).
const (
	SectionAnswer    = "## Answer"
	SectionWarnings  = "## Warnings"
	SectionVerdict   = "## Verdict"
	SectionFairness  = "## Fairness"
	SectionPlots     = "## Plots"
	SectionPolicies  = "## Policies"
	SectionDecisions = "## Routing decisions"
	SectionRuns      = "## Runs"
	SectionScenarios = "## Scenarios"
	SectionMethod    = "## Definitions"
)

// reportIntro states the definitions every number in the report follows.
const reportIntro = "Latencies are in milliseconds, as `vllm bench serve` defines them: TTFT = first token − arrival, " +
	"TPOT = (E2E − TTFT) / (output tokens − 1), ITL = the gap between successive tokens, E2E = finish − arrival. " +
	"Throughput is measured over the arrival window (first arrival to last arrival): the requests completed within it " +
	"per second of it, so the drain after the last arrival does not dilute it (with every request arriving at once, the " +
	"window is the whole run); output tokens/s of the arrival window count the tokens generated within it, each " +
	"request's spread evenly from its first token to its finish. The hit rate is token-weighted (cached prompt tokens / prompt tokens); Jain's index is over " +
	"per-tenant service (prompt + 2 × output tokens).\n\n" +
	"Runs are compared at the configured point they share: their group (the sweep's point without its arrival rate) " +
	"and their configured arrival rate (*rate*). The rate counts what the workload's arrivals start: new conversations " +
	"per second for multi-turn chat (each turn of a conversation is a request), requests per second otherwise; *—* marks " +
	"a group whose arrivals set their own pace (a trace's timestamps, load stages, tenants with rates of their own), " +
	"compared as one point.\n\n" +
	"With replications, a latency is summarised by its geometric mean over replications with the 95% Student-t " +
	"interval of the mean of its logarithm, back-transformed (so it never reaches below zero); other metrics by their " +
	"mean with its 95% Student-t interval [low, high]. Every policy of a replication saw the same requests, so " +
	"policies are compared by paired differences (latencies as ratios, on the log scale): a policy is worse than the " +
	"best when the paired t-test says so after Holm's correction for the number of policies compared (family-wise " +
	"α = 0.05); otherwise it is tied with the best.\n\n"

// buildReport renders report.md from the runs, their plan and the rendered figures.
func buildReport(runs []results.Run, plan []groupPlan, figs []figure) ([]byte, error) {
	var b strings.Builder
	b.WriteString("# kvroute results\n\n")
	fmt.Fprintf(&b, "%s in %s.\n\n", plural(len(runs), "run"), plural(len(plan), "scenario group"))
	writeAnswer(&b, plan)
	writeFlags(&b, plan)
	writeVerdict(&b, plan, verdictMetrics(runs))
	writeFairness(&b, plan)
	writeTierSection(&b, plan)
	writePDSection(&b, plan)
	writePlots(&b, plan, figs)
	writePolicies(&b, plan)
	writeStagesSection(&b, runs)
	writeReasons(&b, plan)
	writeRunsTable(&b, plan, hasGoodput(runs))
	if err := writeScenarios(&b, plan); err != nil {
		return nil, err
	}
	b.WriteString(SectionMethod + "\n\n" + reportIntro)
	return []byte(b.String()), nil
}

func hasGoodput(runs []results.Run) bool {
	for i := range runs {
		if runs[i].Metrics.Goodput != nil {
			return true
		}
	}
	return false
}

// writePlots embeds every figure, group by group.
func writePlots(b *strings.Builder, plan []groupPlan, figs []figure) {
	b.WriteString(SectionPlots + "\n\n")
	if len(figs) == 0 {
		b.WriteString("No plots: no run completed a request.\n\n")
	}
	for _, f := range figs {
		caption := strings.NewReplacer("[", "\\[", "]", "\\]", "\n", " ").Replace(f.caption)
		fmt.Fprintf(b, "![%s](%s)\n\n*%s*\n\n", caption, f.path, caption)
	}
}

// policyColumns are the metrics of the Policies table.
var policyColumns = []string{"ttft_ms_p99", "ttft_ms_p50", "tpot_ms_p99", "window_throughput_rps", "hit_rate", "jain_fairness", "preemptions"}

// writePolicies writes one row per group, level and policy: each metric's mean (geometric
// for latencies) and 95% interval over the replications.
func writePolicies(b *strings.Builder, plan []groupPlan) {
	b.WriteString(SectionPolicies + "\n\nLatencies: geometric mean over replications [95% interval]; the others: mean " +
		"[95% interval]. Throughput: completed requests per second of the arrival window.\n\n| group | rate | policy | replications |")
	columns := policyColumns
	if !anyTenants(plan) { // Jain's index over one tenant is 1 by definition
		columns = slices.DeleteFunc(slices.Clone(columns), func(k string) bool { return k == "jain_fairness" })
	}
	for _, k := range columns {
		b.WriteString(" " + metric(k).title + " |")
	}
	b.WriteString("\n|---|---:|---|---:|" + strings.Repeat("---:|", len(columns)) + "\n")
	for gi := range plan {
		for _, l := range plan[gi].levels {
			for _, c := range l.cells {
				fmt.Fprintf(b, "| %s | %s | %s | %d |", md(plan[gi].name), l.key, md(c.variant), len(c.runs))
				for _, k := range columns {
					m := metric(k)
					cell := "—"
					if iv, ok := c.interval(m); ok {
						cell = ivText(iv, m.unit)
					}
					b.WriteString(" " + md(cell) + " |")
				}
				b.WriteString("\n")
			}
		}
	}
	b.WriteString("\n")
}

// anyTenants reports whether some run of the plan served two tenants or more.
func anyTenants(plan []groupPlan) bool {
	for gi := range plan {
		for _, l := range plan[gi].levels {
			if flood, others := tenantsOf(l); flood != "" || len(others) > 0 {
				return true
			}
		}
	}
	return false
}

// writeRunsTable writes the key metrics, one row per run, grouped as the plan is.
func writeRunsTable(b *strings.Builder, plan []groupPlan, goodput bool) {
	b.WriteString(SectionRuns + "\n\n*req/s*: completed requests per second of the arrival window; *out tok/s*: output " +
		"tokens per second of the whole run (first arrival to last finish).\n\n| run | policy | group | rate | completed | failed | req/s | out tok/s | " +
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
					m.WindowThroughputRPS, m.OutputTokensPerS, m.TTFT.P50, m.TTFT.P99, m.TPOT.P50, m.TPOT.P99,
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

// writeReasons writes each policy's decision-branch counts, summed over its replications.
func writeReasons(b *strings.Builder, plan []groupPlan) {
	header := false
	for gi := range plan {
		for _, l := range plan[gi].levels {
			for _, c := range l.cells {
				sum := map[string]int{}
				total := 0
				for _, r := range c.runs {
					for k, v := range r.Metrics.Reasons {
						sum[k] += v
						total += v
					}
				}
				if total == 0 {
					continue
				}
				if !header {
					b.WriteString(SectionDecisions + "\n\nWhich branch of each policy decided, summed over replications.\n\n" +
						"| group | rate | policy | branch | decisions | share |\n|---|---:|---|---|---:|---:|\n")
					header = true
				}
				for _, k := range sortedKeys(sum) {
					fmt.Fprintf(b, "| %s | %s | %s | %s | %d | %.1f%% |\n", md(plan[gi].name), l.key, md(c.variant), md(k),
						sum[k], 100*float64(sum[k])/float64(total))
				}
			}
		}
	}
	if header {
		b.WriteString("\n")
	}
}

// writeScenarios lists each run's labels and scenario parameters.
func writeScenarios(b *strings.Builder, plan []groupPlan) error {
	b.WriteString(SectionScenarios + "\n\n| run | labels | scenario |\n|---|---|---|\n")
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
	b.WriteString("\n")
	return nil
}
