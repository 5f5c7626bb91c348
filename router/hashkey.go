package router

import "kvroute/router/prefix"

// hashKey hashes a whole routing key with xxhash64 (through router/prefix), fast enough for
// keys of tens of kilobytes on the routing path, without allocating.
func hashKey(s string) uint64 {
	var out [1]uint64
	h := prefix.ChainHashString(out[:0], 0, s, len(s)+1, 1, true)
	if len(h) == 0 {
		return 0 // the empty key
	}
	return h[0]
}
