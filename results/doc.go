// Package results holds kvroute's per-request records and their aggregation into the metrics
// of DESIGN.md's result schema, shared by simulated and live runs. Latency distributions are
// kept in log-bucketed histograms (0.5% relative error), so memory does not grow with the
// number of requests.
package results
