// Package results holds kvroute's per-request records and their aggregation into per-run
// metrics (the summary.json schema docs/results.md describes), shared by simulated and live
// runs, and reads results directories back. It links no plotting, HTML or table library (and no gonum), so the
// simulator and the load generator, which only produce records, stay small; everything
// written from a set of runs lives in results/report, and the statistics over replications
// in results/stats.
//
// A run's Collector takes each terminal Record (and, from a simulator, each decode step's
// inter-token latency) and builds a Run: Metrics as `vllm bench serve` defines them, goodput
// under an optional SLO, and the series behind the plots. Latency distributions are kept in
// log-bucketed histograms (0.5% relative error) and per-tenant service in a bounded number of
// time buckets, so memory does not grow with the number of requests.
//
// A run whose arrivals came in load stages (a QPS ladder) also carries Run.Stages, one
// summary per stage of the requests that arrived in it (a StageCollector folds them), and
// Run.StageMean, their unweighted mean without warm-up stages, as llm-d reports a ladder;
// summary.json holds both ("stages", "stage_mean").
//
// Runs of one group, configured point and policy that differ only in Run.Replication are one
// policy's samples over workload seeds (RepName names them); runs of one replication saw the
// same requests.
//
// The file names of a results directory are constants here. RequestsCSV streams
// requests.csv as requests complete, WriteSeriesJSON writes series.json, and ReadSummary
// loads summary.json (and series.json beside it) back, so simulated and live runs can be
// compared. VLLMMetrics is the schema of vllm-metrics.json, the scraped vLLM servers'
// histograms that the load generator writes and a calibration reads. docs/results.md
// explains how to read a report.
package results
