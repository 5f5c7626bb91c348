package gateway

import (
	"sync"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// idEntryOverhead is what an entry of idCache costs beyond its ids, in bytes: the list
// element, the map slot, the slice header and the key, rounded up.
const idEntryOverhead = 128

// idCache is a least-recently-used cache of prompts' token ids, bounded both in entries and
// in bytes: an entry costs 4 bytes an id (of the slice's capacity) plus idEntryOverhead, and
// the oldest entries go until the total is within the byte bound. An entry larger than the
// bound is not kept. It is safe for concurrent use; callers must not modify the ids it holds
// or returns.
type idCache struct {
	mu       sync.Mutex
	lru      *simplelru.LRU[uint64, []int32]
	bytes    int64 // what the entries cost, as idEntryBytes counts; guarded by mu
	maxBytes int64
}

// newIDCache returns a cache of at most entries entries and maxBytes bytes; both must be > 0.
func newIDCache(entries int, maxBytes int64) (*idCache, error) {
	c := &idCache{maxBytes: maxBytes}
	lru, err := simplelru.NewLRU(entries, func(_ uint64, ids []int32) { c.bytes -= idEntryBytes(ids) })
	if err != nil {
		return nil, err
	}
	c.lru = lru
	return c, nil
}

func idEntryBytes(ids []int32) int64 { return 4*int64(cap(ids)) + idEntryOverhead }

// get returns the ids kept for key and marks them recently used.
func (c *idCache) get(key uint64) ([]int32, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Get(key)
}

// add keeps ids for key, evicting the least recently used entries to stay within both bounds.
func (c *idCache) add(key uint64, ids []int32) {
	size := idEntryBytes(ids)
	if size > c.maxBytes {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lru.Remove(key) // a replaced value leaves through the eviction callback, which counts it
	c.lru.Add(key, ids)
	c.bytes += size
	for c.bytes > c.maxBytes {
		c.lru.RemoveOldest()
	}
}

// size returns the entries held and what they cost in bytes.
func (c *idCache) size() (entries int, bytes int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len(), c.bytes
}
