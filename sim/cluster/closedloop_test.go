package cluster

import (
	"testing"
	"time"

	"kvroute/workloads"
)

// TestClosedLoopHoldsConcurrency runs shared-prefix closed-loop clients through the fleet:
// once every client has started, exactly concurrency requests are in flight until the last
// request is sent, and each client's next request arrives the instant its previous one ends,
// whatever the policy.
func TestClosedLoopHoldsConcurrency(t *testing.T) {
	cfg := Config{Replicas: fleet(3, 3000), Model: model, MetricsInterval: DefaultMetricsInterval}
	for _, tc := range []struct {
		policy      string
		concurrency int
	}{{"round-robin", 5}, {"prefix-score", 12}} {
		t.Run(tc.policy, func(t *testing.T) {
			w := sharedPrefix(6, 200, 1)
			w.Workload.Concurrency = tc.concurrency
			w.Arrival = workloads.ArrivalConfig{Process: workloads.ProcessImmediate}
			recs := simulate(t, cfg, tc.policy, w, 3).records
			if len(recs) != 200 {
				t.Fatalf("%d records, want 200", len(recs))
			}
			ends := map[string][]time.Duration{} // each session's requests' ends, by turn
			var last time.Duration
			for _, r := range recs {
				last = max(last, r.Arrival)
				s := ends[r.Session]
				for len(s) <= r.Turn {
					s = append(s, 0)
				}
				s[r.Turn] = r.Finish
				ends[r.Session] = s
			}
			if len(ends) != tc.concurrency {
				t.Fatalf("%d clients, want %d", len(ends), tc.concurrency)
			}
			for _, r := range recs {
				if r.Turn > 0 && r.Arrival != ends[r.Session][r.Turn-1] {
					t.Fatalf("%s arrives at %v; its client's previous request ended at %v", r.ID, r.Arrival, ends[r.Session][r.Turn-1])
				}
				n := 0
				for _, o := range recs {
					if o.Arrival <= r.Arrival && r.Arrival < o.Finish {
						n++
					}
				}
				if r.Arrival < last && n != tc.concurrency {
					t.Fatalf("%d requests in flight at %v (when %s arrives), want %d", n, r.Arrival, r.ID, tc.concurrency)
				}
			}
		})
	}
}
