package prefix

import "github.com/cespare/xxhash/v2"

// KeyHash returns the XXH64 (seed 0) of key: the hash consistent-hashing policies place keys
// and ring points with (KubeAI's chwblHash, substratusai/kubeai internal/loadbalancer/
// balance_chwbl.go). It lives here, beside the block hashes, so router keeps one hash library.
func KeyHash(key []byte) uint64 { return xxhash.Sum64(key) }

// KeyHashString is KeyHash of a string, without copying it.
func KeyHashString(key string) uint64 { return xxhash.Sum64String(key) }

// KeyDigest hashes a key written in parts, as KeyHash hashes it whole.
type KeyDigest = xxhash.Digest
