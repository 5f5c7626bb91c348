// Package sweep reads kvroute's sweep files, shared by cmd/simulate and cmd/loadgen so that both
// commands expand, name and seed the runs of one file identically: the load generator sends
// exactly the requests the simulator simulated, under the same run names.
//
// A sweep file is one base scenario in which any list of scalars under fleet, workload, arrival
// or router (and requests, duration, seed) is a sweep axis; its points are the cartesian product
// of the axes, in file order with the last axis fastest. Decoding is strict: unknown fields,
// wrong types and bad values name the file, the line and the field.
package sweep
