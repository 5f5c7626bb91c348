// Package report writes what kvroute derives from a set of runs: the results directory
// (WriteDir), terminal tables (WriteTable, WriteStageTable) and the comparison of simulated
// with live runs (Compare). It is the one package that links the plotting (gonum/plot), HTML
// (goldmark) and table (tablewriter) libraries; records, metrics and reading a directory back
// are package results, and the statistics package results/stats.
//
// Runs are compared at the configured point they share: their group (the sweep point without
// its arrival rate) and their configured rate; runs whose rate was measured (trace, stages,
// tenants with their own rates: Run.RateMeasured) are one point of their group. Runs of one
// point and policy that differ only in Run.Replication are one policy's samples over workload
// seeds. Each latency is reported as a geometric mean with the back-transformed 95% Student-t
// interval of its logarithm, every other metric as a mean with its 95% interval, and policies
// are compared by paired t-tests over replications (latencies as log ratios), corrected for
// the number of policies compared (Holm). The verdict names a winner only when every other
// policy is significantly worse, and otherwise lists the tied policies. A group with tenants
// is answered on fairness too: Jain's index over per-tenant service and the well-behaved
// tenants' TTFT while one floods.
//
// WriteDir writes summary.json (runs, and each policy's intervals), series.json,
// summary.csv, report.md and report.html (the answer first, then a table of warnings, the
// verdict, fairness, small-multiples figures under plots/ and tables, a Stages table and
// figure for load ladders; the HTML embeds the figures) and config.yaml. The same runs give byte-identical files, PNGs
// included. docs/results.md explains how to read a report.
package report
