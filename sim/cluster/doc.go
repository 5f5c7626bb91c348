// Package cluster simulates a fleet of vLLM replicas with the router in the loop: requests from
// a workloads.Stream are routed by the same router.Policy values the production proxy runs,
// delivered to sim/engine replicas, and recorded as results.Record values.
//
// The router's view is modelled as production sees it: scraped fields (running, waiting, KV
// usage) refresh only every MetricsInterval, while the router's own in-flight counters are
// exact. Observer callbacks fire when they would live: Routed at the decision, Finished with
// the real usage when the response ends. Replicas can fail and recover at given times;
// requests in flight on a failed replica are retried elsewhere or recorded as failed.
package cluster
