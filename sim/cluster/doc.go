// Package cluster simulates a fleet of vLLM replicas with the router in the loop: requests from
// a workloads.Stream are routed by the same router.Policy values the production proxy runs,
// delivered to sim/engine replicas, and recorded as results.Record values.
//
// The router's view is modelled as production sees it: scraped fields (running, waiting, KV
// usage) refresh only every MetricsInterval, while the router's own in-flight counters are
// exact. Each request goes through one of Routers.Count router replicas (each with its own policy
// state) and through router.Lifecycle, the same code the live proxy drives: the decision,
// the first token and the end with the real usage reach the policy when they would live,
// after the configured network delay; KV events reach the policies that read them after the
// event delay. Replicas can fail and recover at given times: routers eject a failed replica
// at the first request it refuses or after three failed scrapes, and requests it aborted
// before their first token are retried elsewhere (up to MaxRetries), others recorded failed.
//
// Guarantees: the same configuration, stream and seed give byte-identical records; every
// request of the stream ends in exactly one record, and a run fails if one is lost.
package cluster
