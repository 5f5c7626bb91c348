package prefix

import (
	"fmt"
	"math/bits"

	"kvroute/internal/table"
)

// DefaultIndexCapacity is GIE's default per-endpoint LRU size, in blocks
// (lruCapacityPerServer): an H100-80GB serving Llama-3-8B keeps about
// 500,000 tokens of KV, that is 31,250 blocks of 16 tokens.
const DefaultIndexCapacity = 31_250

// Index is GIE's approximate prefix index: a map from block hash to the set
// of endpoints the router sent that block to, plus one LRU per endpoint
// bounded by that endpoint's capacity in blocks. When an endpoint's LRU
// evicts a block, the endpoint leaves that block's set, and a block with an
// empty set is forgotten, so an endpoint is in a block's set exactly when the
// block is in the endpoint's LRU.
//
// An Index is not safe for concurrent mutation. Match does not modify the
// index, so concurrent Match calls are safe when no mutation runs beside
// them.
type Index struct {
	defaultCap int
	entries    table.Map[entry] // the blocks, by hash
	ov         []overflow       // endpoint sets beyond one endpoint below 64
	freeOv     []int32
	endpoints  []endpointLRU
	sink       uint64 // keeps the reads of entries.Touch
}

// endpointLRU is one endpoint's LRU as a queue of uses, oldest first: each use of a block
// appends the block's hash, records the use's position in the block's entry and marks the
// block's previous use dead, so the live uses are the blocks held, in LRU order. Eviction
// takes the first live use; compaction drops dead uses when they are most of the queue,
// renumbering the live ones. A use costs an append, a write to the entry the lookup has just
// read and a bit set (a store, which does not stall), rather than unlinking and relinking
// list nodes scattered in memory. The queue is a ring indexed by position modulo its length;
// positions are uint32 and wrap, which is safe because a queue never holds 2³² uses.
type endpointLRU struct {
	ring       []uint64 // block hashes; the use at position p is ring[p&(len(ring)-1)]
	dead       []uint64 // bit p&(len(ring)-1): the use at p is superseded
	head, tail uint32   // the queued uses are at positions head..tail-1
	n          int      // blocks held
	cap        int      // capacity in blocks
}

// NewIndex returns an empty index whose endpoints each hold at most
// capacityPerEndpoint blocks unless SetCapacity says otherwise.
func NewIndex(capacityPerEndpoint int) (*Index, error) {
	if capacityPerEndpoint < 1 {
		return nil, fmt.Errorf("prefix: index capacity must be positive, got %d blocks", capacityPerEndpoint)
	}
	return &Index{defaultCap: capacityPerEndpoint}, nil
}

// SetCapacity sets how many blocks endpoint ep may hold (GIE's autoTune uses
// vLLM's num_gpu_blocks), evicting its least recently used blocks if it now
// holds more.
func (x *Index) SetCapacity(ep int32, blocks int) error {
	if ep < 0 {
		return fmt.Errorf("prefix: endpoint must be non-negative, got %d", ep)
	}
	if blocks < 1 {
		return fmt.Errorf("prefix: endpoint %d capacity must be positive, got %d blocks", ep, blocks)
	}
	l := x.endpoint(ep)
	l.cap = blocks
	for l.n > l.cap {
		x.evict(l, ep)
	}
	return nil
}

// Len returns how many blocks endpoint ep holds.
func (x *Index) Len(ep int32) int {
	if ep < 0 || int(ep) >= len(x.endpoints) {
		return 0
	}
	return x.endpoints[ep].n
}

// Hashes returns how many distinct block hashes the index holds.
func (x *Index) Hashes() int { return x.entries.Len() }

// Add records that endpoint ep now holds every block in hashes, as GIE does
// after routing a request: each block becomes the most recently used of ep's
// LRU, which evicts its least recently used block when full. A negative ep
// is ignored.
func (x *Index) Add(hashes []uint64, ep int32) {
	if ep < 0 {
		return
	}
	l := x.endpoint(ep)
	x.sink += x.entries.Touch(hashes)
	if l.n+len(hashes) > l.cap {
		x.sink += x.touchOldest(l, len(hashes))
	}
	for _, h := range hashes {
		x.add(l, h, ep)
	}
}

// Match counts matched blocks per endpoint exactly as GIE's
// matchLongestPrefix does: for each hash in order it takes the block's set of
// endpoints, stops at the first block nobody holds, and adds one to out[ep]
// for every endpoint in the set. An endpoint's count is therefore the number
// of blocks it holds before the walk stopped, which for the common case is
// its number of leading blocks.
//
// Match first clears out; endpoints at or beyond len(out) are not reported
// (but still keep the walk going). Match neither allocates nor refreshes
// recency. It keeps the counts as bit-sliced counters over the endpoint
// bitsets, so a block costs a few word operations per 64 endpoints however
// many endpoints hold it.
func (x *Index) Match(hashes []uint64, out []int) {
	clear(out)
	words := wordsFor(len(out))
	planes := bits.Len(uint(len(hashes))) // bits needed for any count
	if words > maxStackWords || planes > maxPlanes {
		x.matchEach(hashes, out)
		return
	}
	// counts[p][w] holds bit p of the counts of endpoints 64w..64w+63.
	var counts [maxPlanes][maxStackWords]uint64
	for _, h := range hashes {
		e := x.entries.Find(h)
		if e == nil {
			break
		}
		for w := range x.spans(e, words) {
			// Add one to every counter in the word: a ripple-carry adder
			// across the planes, usually one or two steps.
			for p, carry := 0, x.word(e, w); carry != 0; p++ {
				c := &counts[p][w]
				*c, carry = *c^carry, *c&carry
			}
		}
	}
	for p := range planes {
		for w := range words {
			addEach(out, w, counts[p][w]&lowMask(w, len(out)), 1<<p)
		}
	}
}

// maxPlanes is the number of bit-sliced counter planes Match keeps on the
// stack; walks of 2^maxPlanes blocks or more take the slower path.
const maxPlanes = 12

// matchEach is Match one endpoint at a time, for fleets or walks too large
// for the stack counters.
func (x *Index) matchEach(hashes []uint64, out []int) {
	for _, h := range hashes {
		e := x.entries.Find(h)
		if e == nil {
			return
		}
		for w := range wordsFor(len(out)) {
			addEach(out, w, x.word(e, w)&lowMask(w, len(out)), 1)
		}
	}
}

// Holds reports whether endpoint ep holds block h.
func (x *Index) Holds(h uint64, ep int32) bool {
	e := x.entries.Find(h)
	return e != nil && ep >= 0 && x.has(e, ep)
}

// Capacity returns how many blocks endpoint ep may hold.
func (x *Index) Capacity(ep int32) int {
	if ep < 0 || int(ep) >= len(x.endpoints) {
		return x.defaultCap
	}
	return x.endpoints[ep].cap
}

// RemoveEndpoint forgets endpoint ep and every block it holds; its capacity
// returns to the default. It costs O(Len(ep)) plus the uses queued since the
// last compaction.
func (x *Index) RemoveEndpoint(ep int32) {
	if ep < 0 || int(ep) >= len(x.endpoints) {
		return
	}
	l := &x.endpoints[ep]
	for l.n > 0 {
		x.evict(l, ep)
	}
	l.head = l.tail // every use is consumed or dead
	l.cap = x.defaultCap
}

// endpoint returns ep's LRU, creating it (and any lower ones) with the
// default capacity.
func (x *Index) endpoint(ep int32) *endpointLRU {
	for int(ep) >= len(x.endpoints) {
		x.endpoints = append(x.endpoints, endpointLRU{cap: x.defaultCap, head: startPos, tail: startPos})
	}
	return &x.endpoints[ep]
}

// add is Add for one hash.
func (x *Index) add(l *endpointLRU, h uint64, ep int32) {
	if e := x.entries.Find(h); e != nil && x.has(e, ep) {
		p := x.pos(e, x.rank(e, ep))
		l.kill(*p)
		*p = x.use(l, ep, h) // compaction moves no entry, and skips the dead use: p stays valid
		return
	}
	if l.n >= l.cap {
		// ep does not hold h, so this never forgets h.
		x.evict(l, ep)
	}
	p := x.use(l, ep, h)
	x.join(x.entries.At(x.entries.Insert(h)), ep, p)
	l.n++
}

// A full queue is compacted when it holds at least compactFactor uses per block held plus
// compactSlack, and grown otherwise; minRing is the smallest ring. They are variables so
// that tests can make compaction, growth and wrap-around frequent.
var compactFactor, compactSlack, minRing = 8, 1024, 1024

// startPos is the position of an endpoint's first use; tests set it near 2³² to check that
// positions wrap around safely.
var startPos uint32

// use queues a use of block h by ep and returns its position.
func (x *Index) use(l *endpointLRU, ep int32, h uint64) uint32 {
	if int(l.tail-l.head) == len(l.ring) {
		if int(l.tail-l.head) >= compactFactor*l.n+compactSlack {
			x.compact(l, ep)
		} else {
			l.grow()
		}
	}
	p := l.tail
	i := p & uint32(len(l.ring)-1)
	l.ring[i] = h
	l.dead[i>>6] &^= 1 << (i & 63)
	l.tail++
	return p
}

// kill marks the use at position p dead.
func (l *endpointLRU) kill(p uint32) {
	i := p & uint32(len(l.ring)-1)
	l.dead[i>>6] |= 1 << (i & 63)
}

// isDead reports whether the use at position p is dead.
func (l *endpointLRU) isDead(p uint32) bool {
	i := p & uint32(len(l.ring)-1)
	return l.dead[i>>6]&(1<<(i&63)) != 0
}

// at returns the block hash of the use at position p.
func (l *endpointLRU) at(p uint32) uint64 { return l.ring[p&uint32(len(l.ring)-1)] }

// grow doubles the ring (or allocates it), keeping every use at its position.
func (l *endpointLRU) grow() {
	old, oldDead := l.ring, l.dead
	size := max(2*len(old), minRing)
	l.ring, l.dead = make([]uint64, size), make([]uint64, (size+63)/64)
	for p := l.head; p != l.tail; p++ {
		i, j := p&uint32(len(old)-1), p&uint32(size-1)
		l.ring[j] = old[i]
		if oldDead[i>>6]&(1<<(i&63)) != 0 {
			l.dead[j>>6] |= 1 << (j & 63)
		}
	}
}

// compact drops the dead uses from l's queue, moving the live ones forward in order and
// renumbering them.
func (x *Index) compact(l *endpointLRU, ep int32) {
	q := l.head
	for p := l.head; p != l.tail; p++ {
		if l.isDead(p) {
			continue
		}
		h := l.at(p)
		e := x.entries.Find(h)
		*x.pos(e, x.rank(e, ep)) = q
		i := q & uint32(len(l.ring)-1)
		l.ring[i] = h
		l.dead[i>>6] &^= 1 << (i & 63)
		q++
	}
	l.tail = q
}

// touchOldest reads the entries of up to k of l's oldest live uses, the next ones eviction
// takes, overlapping their cache misses (see table.Map.Touch).
func (x *Index) touchOldest(l *endpointLRU, k int) uint64 {
	var sink uint64
	for p := l.head; p != l.tail && k > 0; p++ {
		if !l.isDead(p) {
			sink += x.entries.TouchKey(l.at(p))
			k--
		}
	}
	return sink
}

// evict drops the least recently used block of l, which is ep's.
func (x *Index) evict(l *endpointLRU, ep int32) {
	for l.isDead(l.head) {
		l.head++
	}
	h := l.at(l.head)
	l.head++
	l.n--
	if x.leave(x.entries.Find(h), ep) {
		x.entries.Delete(h)
	}
}

// lru returns the blocks endpoint ep holds, most recently used first.
func (x *Index) lru(ep int32) []uint64 {
	if ep < 0 || int(ep) >= len(x.endpoints) {
		return nil
	}
	l := &x.endpoints[ep]
	var out []uint64
	for p := l.tail; p != l.head; {
		p--
		if !l.isDead(p) {
			out = append(out, l.at(p))
		}
	}
	return out
}
