package report_test

import (
	"fmt"
	"os"
	"time"

	"kvroute/results"
	"kvroute/results/report"
)

// ExampleWriteTable prints one run, collected from its records, as the terminal table
// cmd/simulate and cmd/loadgen print.
func ExampleWriteTable() {
	c := results.NewCollector(results.CollectorOpts{Name: "demo/least-load", Policy: "least-load", RequestRate: 1})
	ms := time.Millisecond
	c.Add(&results.Record{ID: "1", Reason: "least-load", Status: results.StatusCompleted,
		FirstToken: 80 * ms, Finish: 1080 * ms, PromptTokens: 256, OutputTokens: 41})
	if err := report.WriteTable(os.Stdout, []results.Run{c.Run()}); err != nil {
		fmt.Println(err)
	}
	// Output:
	// ┌─────────────────┬────────────┬──────┬──────┬───────┬───────────┬──────────┬──────────┬──────────┬─────────┬─────────┬───────┬───────┬─────────┐
	// │       run       │   policy   │ rate │ done │ req/s │ out tok/s │ ttft p50 │ ttft p99 │ tpot p50 │ itl p99 │ e2e p99 │  hit  │ jain  │ preempt │
	// ├─────────────────┼────────────┼──────┼──────┼───────┼───────────┼──────────┼──────────┼──────────┼─────────┼─────────┼───────┼───────┼─────────┤
	// │ demo/least-load │ least-load │    1 │  1/1 │  0.93 │      38.0 │     80.0 │     80.0 │    25.00 │   25.00 │  1080.0 │ 0.000 │ 1.000 │       0 │
	// └─────────────────┴────────────┴──────┴──────┴───────┴───────────┴──────────┴──────────┴──────────┴─────────┴─────────┴───────┴───────┴─────────┘
}
