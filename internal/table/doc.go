// Package table holds Map, the open-addressing hash table that the router's prefix indexes
// and the simulated engine's prefix cache key by 64-bit hashes. It exists beside Go's map
// for those hot paths: the keys are already well-mixed hashes, so it does not hash them
// again; a lookup usually reads one cache line; values live in the slots, so a caller can
// keep a pointer to one until the next insertion or deletion, or address an entry by its
// position. It is deterministic (no per-process hash seed), does no I/O and is not safe for
// concurrent mutation.
package table
