package results_test

import (
	"fmt"
	"time"

	"kvroute/results"
)

func ExampleCollector() {
	c := results.NewCollector(results.CollectorOpts{
		Name: "demo/prefix-hash", Policy: "prefix-hash", RequestRate: 2,
		SLO: results.SLO{TTFTMs: 250},
	})
	ms := time.Millisecond
	for _, r := range []results.Record{
		{ID: "1", Tenant: "a", Reason: "prefix", Status: results.StatusCompleted,
			Arrival: 0, FirstToken: 120 * ms, Finish: 1120 * ms, PromptTokens: 512, CachedTokens: 256, OutputTokens: 51},
		{ID: "2", Tenant: "b", Reason: "least-load", Status: results.StatusCompleted,
			Arrival: 500 * ms, FirstToken: 800 * ms, Finish: 2000 * ms, PromptTokens: 512, OutputTokens: 61},
	} {
		c.Add(&r)
	}
	run := c.Run()
	m := run.Metrics
	fmt.Printf("completed %d of %d in %.1f s\n", m.Completed, m.Requests, m.DurationS)
	fmt.Printf("TTFT mean %.0f ms, TPOT mean %.0f ms, hit rate %.2f\n", m.TTFT.Mean, m.TPOT.Mean, m.HitRate)
	fmt.Printf("goodput %d of %d (%.1f req/s), decisions %v\n", m.Goodput.Good, m.Requests, m.Goodput.RPS, m.Reasons)
	// Output:
	// completed 2 of 2 in 2.0 s
	// TTFT mean 210 ms, TPOT mean 20 ms, hit rate 0.25
	// goodput 1 of 2 (0.5 req/s), decisions map[least-load:1 prefix:1]
}
