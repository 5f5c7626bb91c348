package prefix

import (
	"fmt"
	"time"

	"kvroute/internal/table"
)

// DefaultBlockStoreCapacity is AIBrix's default prefix table size, in blocks
// (AIBRIX_PREFIX_CACHE_BLOCK_NUMBER).
const DefaultBlockStoreCapacity = 200_000

// DefaultBlockStoreTTL is AIBrix's default idle time after which a block is
// swept from the prefix table (AIBRIX_PREFIX_CACHE_EVICTION_DURATION_MINS).
const DefaultBlockStoreTTL = 20 * time.Minute

// none marks the absence of a slot in the intrusive lists.
const none int32 = -1

// BlockStore is AIBrix's prefix table: one global LRU of block hashes, each
// remembering the set of endpoints the router has sent that block to.
//
// Add (AIBrix Put) moves a block to the most-recently-used end and evicts
// from the other end while the table holds more than its capacity; Match
// (AIBrix Get) does not refresh recency. Len never exceeds the capacity.
//
// A BlockStore is not safe for concurrent mutation. Match does not modify
// the store, so concurrent Match calls are safe when no mutation runs beside
// them (a sync.RWMutex fits).
type BlockStore struct {
	capacity int
	byHash   table.Map[int32] // block hash -> slot in entries
	entries  []blockEntry
	free     int32 // first free slot, chained through next
	head     int32 // most recently added
	tail     int32 // least recently added
	epoch    time.Time
	started  bool
}

// blockEntry is one block of the LRU, stored in a slab and linked by index.
type blockEntry struct {
	hash    uint64
	last    int64 // nanoseconds after the store's epoch of the latest Add
	prev    int32 // towards head (more recent)
	next    int32 // towards tail (less recent), or the next free slot
	holders epSet // endpoints holding the block
}

// NewBlockStore returns an empty store that holds at most capacityBlocks
// block hashes.
func NewBlockStore(capacityBlocks int) (*BlockStore, error) {
	if capacityBlocks < 1 {
		return nil, fmt.Errorf("prefix: block store capacity must be positive, got %d blocks", capacityBlocks)
	}
	return &BlockStore{
		capacity: capacityBlocks,
		free:     none,
		head:     none,
		tail:     none,
	}, nil
}

// Len returns the number of block hashes held, at most Cap.
func (s *BlockStore) Len() int { return s.byHash.Len() }

// Cap returns the capacity in blocks.
func (s *BlockStore) Cap() int { return s.capacity }

// Add records that endpoint now holds every block in hashes, as AIBrix does
// after routing a request: each hash in turn becomes the most recently used
// entry with last-access time now, and the least recently used entries are
// evicted while the store is over capacity. A negative endpoint is ignored.
func (s *BlockStore) Add(hashes []uint64, endpoint int32, now time.Time) {
	if endpoint < 0 {
		return
	}
	t := s.stamp(now)
	guess := none
	for _, h := range hashes {
		guess = s.put(h, endpoint, t, guess)
	}
}

// Match computes, for every candidate endpoint, how many leading blocks of
// hashes it holds, with AIBrix's MatchPrefix semantics: the surviving set
// starts as all candidates, block i keeps only the survivors that hold it
// (each gets out[ep] = i+1), and the walk stops when no endpoint survives or
// a block is unknown.
//
// Match first clears out. candidate[ep] selects endpoints; a nil candidate
// selects all. Endpoints at or beyond len(out) are neither candidates nor
// reported. Match neither allocates nor refreshes recency; it costs one
// bitset word per 64 endpoints per block walked.
//
// A prompt added before as a whole lies in the LRU in order, each block just more recent than
// the one before it, so Match tries that neighbour before the table (see put).
func (s *BlockStore) Match(hashes []uint64, candidate []bool, out []int) {
	prev := none
	leadingRun(hashes, candidate, out, func(h uint64) *epSet {
		i := none
		if prev != none {
			if g := s.entries[prev].prev; g != none && s.holds(g, h) {
				i = g
			}
		}
		if i == none {
			var ok bool
			if i, ok = s.byHash.Get(h); !ok {
				return nil
			}
		}
		prev = i
		return &s.entries[i].holders
	})
}

// holds reports whether slot i, a live entry, holds block h: a live entry of h is h's (the
// table maps a hash to one slot). The guesses it checks are LRU neighbours, which are live.
func (s *BlockStore) holds(i int32, h uint64) bool { return s.entries[i].hash == h }

// holdersOf returns block h's holders, or nil for an unknown block.
func (s *BlockStore) holdersOf(h uint64) *epSet {
	if i, ok := s.byHash.Get(h); ok {
		return &s.entries[i].holders
	}
	return nil
}

// EvictExpired removes the blocks whose latest Add is more than ttl before
// now, as AIBrix's periodic sweep does, and returns how many it removed.
//
// The sweep walks from the least recently added end and stops at the first
// block that is still fresh, so it costs O(removed). It is exact when the
// times given to Add never decrease; a block added with an earlier time than
// a newer neighbour waits until the sweep reaches it. A negative ttl counts
// as zero.
func (s *BlockStore) EvictExpired(now time.Time, ttl time.Duration) int {
	if !s.started {
		return 0
	}
	rel := int64(now.Sub(s.epoch))
	cutoff := rel - int64(max(ttl, 0))
	if cutoff > rel {
		return 0 // now-ttl underflows: nothing can be older than it
	}
	removed := 0
	for s.tail != none && s.entries[s.tail].last < cutoff {
		s.remove(s.tail)
		removed++
	}
	return removed
}

// RemoveEndpoint forgets endpoint everywhere; blocks left with no holder are
// removed. It costs O(Len).
func (s *BlockStore) RemoveEndpoint(endpoint int32) {
	for i := s.head; i != none; {
		e := &s.entries[i]
		next := e.next
		if e.holders.remove(endpoint) && e.holders.empty() {
			s.remove(i)
		}
		i = next
	}
}

// stamp converts now to nanoseconds after the store's epoch, the time of the
// first Add; time.Time.Sub saturates, so any time is representable.
func (s *BlockStore) stamp(now time.Time) int64 {
	if !s.started {
		s.epoch, s.started = now, true
	}
	return int64(now.Sub(s.epoch))
}

// put is Add for one hash; guess is a slot that may hold h (none: no guess). It returns a
// guess at the next block's slot: the entry just more recent than h's before h moved, where
// the next block of a prompt added before as a whole lies.
func (s *BlockStore) put(h uint64, ep int32, t int64, guess int32) int32 {
	i, ok := guess, guess != none && s.holds(guess, h)
	if !ok {
		i, ok = s.byHash.Get(h)
	}
	if ok {
		e := &s.entries[i]
		next := e.prev
		e.last = t
		e.holders.add(ep)
		s.unlink(i)
		s.pushFront(i)
		return next
	}
	i = s.alloc()
	e := &s.entries[i]
	e.hash, e.last = h, t
	e.holders.reset()
	e.holders.add(ep)
	s.byHash.Set(h, i)
	s.pushFront(i)
	for s.byHash.Len() > s.capacity {
		s.remove(s.tail)
	}
	return none
}

// alloc returns a free slot, reusing freed ones (and their allocations).
func (s *BlockStore) alloc() int32 {
	if s.free != none {
		i := s.free
		s.free = s.entries[i].next
		return i
	}
	s.entries = append(s.entries, blockEntry{})
	return int32(len(s.entries) - 1)
}

// remove deletes slot i from the table and the LRU and frees it.
func (s *BlockStore) remove(i int32) {
	s.unlink(i)
	e := &s.entries[i]
	s.byHash.Delete(e.hash)
	e.holders.reset()
	e.next = s.free
	s.free = i
}

// pushFront links slot i in as the most recently used.
func (s *BlockStore) pushFront(i int32) {
	e := &s.entries[i]
	e.prev, e.next = none, s.head
	if s.head != none {
		s.entries[s.head].prev = i
	} else {
		s.tail = i
	}
	s.head = i
}

// unlink takes slot i out of the LRU.
func (s *BlockStore) unlink(i int32) {
	e := &s.entries[i]
	if e.prev != none {
		s.entries[e.prev].next = e.next
	} else {
		s.head = e.next
	}
	if e.next != none {
		s.entries[e.next].prev = e.prev
	} else {
		s.tail = e.prev
	}
	e.prev, e.next = none, none
}

// allowedAt reports whether endpoint ep is selected by mask; a nil mask
// selects every endpoint.
func allowedAt(mask []bool, ep int32) bool {
	return mask == nil || (int(ep) < len(mask) && mask[ep])
}
