// Package stats holds the statistics behind kvroute's verdicts, over plain samples: a mean
// with its 95% Student-t interval (MeanCI), paired differences and ratios (PairedDiff,
// PairedRatio), the paired t-test (PairedT; ratios as log differences) and Holm's
// step-down correction for comparing several policies (Holm). It knows nothing of runs or
// records; results/report groups runs into the samples it compares.
package stats
