// Package resultstest holds synthetic records and runs for testing the packages that read,
// summarise and report results: five runs (two policies at two loads in one group, and an
// ungrouped run) with failures, preemptions, decision reasons and SLOs, seeded so the same
// call gives the same runs.
package resultstest
