// Package sweep reads kvroute's sweep files, shared by cmd/simulate and cmd/loadgen so that both
// commands expand, name and seed the runs of one file identically: the load generator sends
// exactly the requests the simulator simulated, under the same run names.
//
// A sweep file is one base scenario in which any list of scalars under fleet, workload, arrival
// or router (and requests, duration, seed) is a sweep axis; its points are the cartesian product
// of the axes, in file order with the last axis fastest. Decoding is strict: unknown fields,
// wrong types and bad values name the file, the line and the field.
//
// It is also the one decoder of the vocabulary the commands share (docs/vocabulary.md): a
// policy spec (PolicySpec, ParsePolicySpec), read by sweep files and by cmd/route's config and
// -policy flag; a fleet section and its per-replica part (FleetConfig, ReplicaConfig, resolved
// into engine configurations by ReplicaConfig.Engine), read by sweep files, cmd/emulate -fleet
// and cmd/route's hardware section; and the derivation of a policy's seed from a master seed
// (RouterSeed).
//
// A plan's runs are independent: Shard deals them round-robin to n parts that run on
// separate machines (cmd/simulate -shard) and merge into the results one machine writes.
package sweep
