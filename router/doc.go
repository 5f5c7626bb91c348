// Package router holds kvroute's routing policies and the contracts they share.
//
// A Policy picks one endpoint of a Snapshot for a Request. The same policy values run inside the
// discrete-event simulator (virtual time, one goroutine) and inside the production proxy (wall
// time, many goroutines), so the package never reads the wall clock, never uses the global
// random source, never logs and never touches the network: time arrives in Snapshot.Now and
// randomness through the seeded *rand.Rand handed to each constructor.
//
// Policies that keep state (prefix indexes, fairness counters, hash rings) also implement
// Observer; the caller reports each routed request, each finished request with its usage, and
// each endpoint that leaves the pool.
//
// Lifecycle is the one place that drives a policy around a request: decide (Pick, charge the
// endpoint, Routed), first token, finish (idempotent), retry before the first byte, eject
// and re-admit an endpoint. The simulator (sim/cluster) and the proxy (internal/gateway) both
// drive it, so a policy sees the same calls in virtual and in real time
// (docs/lifecycle.md).
//
// Every policy is built by name from a Registry value (see Builtin), with a typed configuration
// whose defaults are those of the system it reproduces, decoded strictly from raw parameters
// (DecodeParams); docs/reference/policies.md lists every parameter. The sources are cited in
// each file. A policy's Pick returns an index into the snapshot or ErrNoEndpoint, never
// mutates the snapshot, and for a given seed and sequence of calls decides the same way.
package router
