package report

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"kvroute/results"
)

// summaryColumns is summary.csv's header; the order is fixed.
var summaryColumns = []string{
	"name", "policy", "group", "request_rate", "labels",
	"requests", "completed", "failed", "duration_s", "throughput_rps", "arrival_window_s", "window_throughput_rps",
	"input_tokens_per_s", "output_tokens_per_s",
	"ttft_ms_mean", "ttft_ms_p50", "ttft_ms_p90", "ttft_ms_p99",
	"tpot_ms_mean", "tpot_ms_p50", "tpot_ms_p90", "tpot_ms_p99",
	"itl_ms_mean", "itl_ms_p50", "itl_ms_p90", "itl_ms_p99",
	"e2e_ms_mean", "e2e_ms_p50", "e2e_ms_p90", "e2e_ms_p99",
	"hit_rate", "jain_fairness", "preemptions", "retries", "prefix_split_rate",
	"slo_ttft_ms", "slo_tpot_ms", "slo_e2e_ms", "goodput_requests", "goodput_fraction", "goodput_rps",
	"reasons", "scenario",
}

// summaryCIColumns follow summaryColumns: the run's replication number, then for each of
// cellMetrics the mean and 95% interval over the replications of the run's policy at its
// group and load (the same on every replication's row).
func summaryCIColumns() []string {
	cols := []string{"replication", "replications"}
	for _, m := range cellMetrics {
		cols = append(cols, m.key+"_rep_mean", m.key+"_ci_lo", m.key+"_ci_hi")
	}
	return cols
}

// WriteSummaryCSV writes one row per run under a fixed header: the flattened metrics, then
// the decision-branch counts and the scenario as compact JSON objects. Goodput cells are
// empty when the run had no SLO.
func WriteSummaryCSV(w io.Writer, runs []results.Run) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(append(slices.Clone(summaryColumns), summaryCIColumns()...)); err != nil {
		return fmt.Errorf("results: summary.csv: %w", err)
	}
	cells := cellByRun(planRuns(runs))
	for i := range runs {
		row, err := summaryRow(&runs[i])
		if err != nil {
			return err
		}
		row = append(row, ciCells(&runs[i], cells[&runs[i]])...)
		if err := cw.Write(row); err != nil {
			return fmt.Errorf("results: summary.csv: %w", err)
		}
	}
	cw.Flush()
	return cw.Error()
}

func summaryRow(r *results.Run) ([]string, error) {
	m := &r.Metrics
	row := []string{r.Name, r.Policy, r.Group, ff(r.RequestRate), strings.Join(r.Labels, ";"),
		strconv.Itoa(m.Requests), strconv.Itoa(m.Completed), strconv.Itoa(m.Failed),
		ff(m.DurationS), ff(m.ThroughputRPS), ff(m.ArrivalWindowS), ff(m.WindowThroughputRPS), ff(m.InputTokensPerS), ff(m.OutputTokensPerS)}
	for _, d := range []results.Dist{m.TTFT, m.TPOT, m.ITL, m.E2E} {
		row = append(row, ff(d.Mean), ff(d.P50), ff(d.P90), ff(d.P99))
	}
	row = append(row, ff(m.HitRate), ff(m.JainFairness), strconv.Itoa(m.Preemptions), strconv.Itoa(m.Retries), ff(m.PrefixSplitRate))
	if g := m.Goodput; g != nil {
		row = append(row, ff(g.SLO.TTFTMs), ff(g.SLO.TPOTMs), ff(g.SLO.E2EMs), strconv.Itoa(g.Good), ff(g.Fraction), ff(g.RPS))
	} else {
		row = append(row, "", "", "", "", "", "")
	}
	reasons, err := json.Marshal(m.Reasons)
	if err != nil {
		return nil, fmt.Errorf("results: summary.csv: run %q reasons: %w", r.Name, err)
	}
	if m.Reasons == nil {
		reasons = []byte("{}")
	}
	scen := []byte("{}")
	if r.Scenario != nil {
		if scen, err = json.Marshal(r.Scenario); err != nil {
			return nil, fmt.Errorf("results: summary.csv: run %q scenario: %w", r.Name, err)
		}
	}
	return append(row, string(reasons), string(scen)), nil
}

// cellByRun maps every run of the plan to its cell.
func cellByRun(plan []groupPlan) map[*results.Run]*cell {
	out := map[*results.Run]*cell{}
	for gi := range plan {
		for _, l := range plan[gi].levels {
			for _, c := range l.cells {
				for _, r := range c.runs {
					out[r] = c
				}
			}
		}
	}
	return out
}

// ciCells are a run's summaryCIColumns; an interval's cells are empty when its policy lacks
// the metric.
func ciCells(r *results.Run, c *cell) []string {
	row := []string{strconv.Itoa(r.Replication), strconv.Itoa(len(c.runs))}
	for _, m := range cellMetrics {
		iv, ok := c.interval(m)
		if !ok {
			row = append(row, "", "", "")
			continue
		}
		row = append(row, ff(iv.Mean), ff(iv.Lo), ff(iv.Hi))
	}
	return row
}

// ff formats a float in its shortest exact form.
func ff(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
