// Package sim is kvroute's discrete-event kernel: a virtual clock in integer nanoseconds, an
// event queue ordered by (time, priority, sequence), and seeded random streams derived from one
// master seed. Time jumps from event to event; nothing ticks. The kernel is single-goroutine and
// deterministic: the same schedule of events always fires in the same order.
package sim
