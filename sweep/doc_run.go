// Package sweeprun runs the simulations of a sweep file (package internal/sweep parses it):
// Parse checks that every point can be simulated (fleet, engine arguments and vLLM release,
// router, policies) against a GPU and model catalog; Plan lists the runs (points ×
// replications × policies) in a fixed order; Job.Execute simulates one run through
// sim/cluster and returns its results.Run; ResolvedConfig is the resolved configuration
// (config.yaml). cmd/simulate adds flags, parallelism, progress bars and the results
// directory; tests and library users call this package directly.
package sweeprun
