package report

import (
	"encoding/json"
	"fmt"
	"io"

	"kvroute/results"
)

// summaryFile is summary.json as written: the runs, then each policy's intervals.
type summaryFile struct {
	Runs []results.Run `json:"runs"`
	// Policies holds each policy's metrics over its replications, per group and load level:
	// derived from Runs, written for readers and ignored by results.ReadSummary.
	Policies []PolicySummary `json:"policies,omitempty"`
}

// WriteSummaryJSON writes runs as summary.json: {"runs": [{"name", "policy", "scenario",
// "metrics", ...}], "policies": [{"group", "request_rate", "policy", "runs", "metrics":
// {"ttft_ms_p99": {"mean", "ci_lo", "ci_hi", "n"}, ...}}]}, indented, with map keys sorted.
func WriteSummaryJSON(w io.Writer, runs []results.Run) error {
	out := summaryFile{Runs: make([]results.Run, len(runs)), Policies: policySummaries(planRuns(runs))}
	for i, r := range runs {
		if r.Scenario == nil {
			r.Scenario = map[string]any{}
		}
		out.Runs[i] = r
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return fmt.Errorf("results: encoding summary: %w", err)
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
