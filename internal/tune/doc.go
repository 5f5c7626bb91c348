// Package tune searches a routing policy's numeric parameters for the best objective on one
// sweep point, with the simulator in the loop, and says whether the tuned parameters beat
// the defaults on workload seeds the search never saw.
//
// Reading guide:
//   - space.go: a policy's parameters, found by reflection over its configuration's
//     defaults (router.Registry.Defaults), mapped to and from the unit cube;
//   - bounds.go: the one table of search bounds per policy and parameter, and the
//     parameters left at their defaults with the reason;
//   - search.go: the search, a seeded Latin hypercube and then a
//     compass search around the best candidate, every candidate on the same seeds;
//   - compare.go: tuned against defaults on fresh seeds (paired intervals from
//     results/stats), the verdict and the parameters' influence;
//   - sim.go: the objective of a sweep point's runs (p99 TTFT, or goodput under an SLO);
//   - output.go: the result as JSON and Markdown.
//
// Same point, policy, options and seed ⇒ the same result, byte for byte: runs may finish
// in any order, but every value is stored by its place in the round.
package tune
