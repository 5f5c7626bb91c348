// Package results holds kvroute's per-request records and their aggregation into the metrics
// of DESIGN.md's result schema, shared by simulated and live runs, and writes and reads
// results directories.
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
// summary.json holds both ("stages", "stage_mean"), report.md a Stages table, and
// WriteStageTable prints it.
//
// Runs of one group, load level and policy that differ only in Run.Replication are one
// policy's samples over workload seeds; runs of one replication saw the same requests. Each
// metric is reported as a mean with its 95% Student-t interval (MeanCI), and policies are
// compared by paired t-tests over replications (PairedT; latencies as log ratios), corrected
// for the number of policies compared (Holm). The verdict names a winner only when every
// other policy is significantly worse, and otherwise lists the tied policies.
//
// WriteDir writes summary.json (runs, and each policy's intervals), series.json,
// summary.csv, report.md and report.html (the answer first, then warnings, the verdict,
// small-multiples figures under plots/ and tables; the HTML embeds the figures) and
// config.yaml; RequestsCSV streams requests.csv as requests complete; WriteTable prints a
// terminal table; ReadSummary loads a directory back, so simulated and live runs can be
// compared. The same runs give byte-identical files, PNGs included. docs/results.md explains
// how to read a report.
package results
