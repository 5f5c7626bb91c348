package prefix

import (
	"fmt"
	"math/bits"
	"slices"
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
	byHash     table // block hash -> slot in entries
	entries    []hashEntry
	freeEntry  []int32 // free slots in entries
	nodes      []lruNode
	freeNode   int32 // first free slot in nodes, chained through next
	endpoints  []endpointLRU
}

// hashEntry is the set of endpoints holding one block.
type hashEntry struct {
	hash  uint64
	set   epSet   // the endpoints
	nodes []int32 // each endpoint's LRU node, in ascending endpoint order
}

// lruNode is one (block, endpoint) pair in the endpoint's LRU list.
type lruNode struct {
	entry int32 // slot in entries
	ep    int32
	prev  int32 // towards the most recently used
	next  int32 // towards the least recently used, or the next free slot
}

// endpointLRU is the head and tail of one endpoint's LRU list.
type endpointLRU struct {
	head, tail int32
	n          int // blocks held
	cap        int // capacity in blocks
}

// NewIndex returns an empty index whose endpoints each hold at most
// capacityPerEndpoint blocks unless SetCapacity says otherwise.
func NewIndex(capacityPerEndpoint int) (*Index, error) {
	if capacityPerEndpoint < 1 {
		return nil, fmt.Errorf("prefix: index capacity must be positive, got %d blocks", capacityPerEndpoint)
	}
	return &Index{
		defaultCap: capacityPerEndpoint,
		freeNode:   none,
	}, nil
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
		x.evict(l)
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
func (x *Index) Hashes() int { return x.byHash.len() }

// Add records that endpoint ep now holds every block in hashes, as GIE does
// after routing a request: each block becomes the most recently used of ep's
// LRU, which evicts its least recently used block when full. A negative ep
// is ignored.
func (x *Index) Add(hashes []uint64, ep int32) {
	if ep < 0 {
		return
	}
	l := x.endpoint(ep)
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
		i, ok := x.byHash.get(h)
		if !ok {
			break
		}
		set := &x.entries[i].set
		for w := range words {
			// Add one to every counter in the word: a ripple-carry adder
			// across the planes, usually one or two steps.
			for p, carry := 0, set.word(w); carry != 0; p++ {
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
		i, ok := x.byHash.get(h)
		if !ok {
			return
		}
		set := &x.entries[i].set
		for w := range min(set.words(), wordsFor(len(out))) {
			addEach(out, w, set.word(w)&lowMask(w, len(out)), 1)
		}
	}
}

// RemoveEndpoint forgets endpoint ep and every block it holds; its capacity
// returns to the default. It costs O(Len(ep)).
func (x *Index) RemoveEndpoint(ep int32) {
	if ep < 0 || int(ep) >= len(x.endpoints) {
		return
	}
	l := &x.endpoints[ep]
	for l.n > 0 {
		x.evict(l)
	}
	l.cap = x.defaultCap
}

// endpoint returns ep's LRU, creating it (and any lower ones) with the
// default capacity.
func (x *Index) endpoint(ep int32) *endpointLRU {
	for int(ep) >= len(x.endpoints) {
		x.endpoints = append(x.endpoints, endpointLRU{head: none, tail: none, cap: x.defaultCap})
	}
	return &x.endpoints[ep]
}

// add is Add for one hash.
func (x *Index) add(l *endpointLRU, h uint64, ep int32) {
	ei, ok := x.byHash.get(h)
	if ok && x.entries[ei].set.has(ep) {
		e := &x.entries[ei]
		n := e.nodes[e.set.rank(ep)]
		x.unlink(l, n)
		x.pushFront(l, n)
		return
	}
	if l.n >= l.cap {
		// ep is not in h's set, so this never frees entry ei.
		x.evict(l)
	}
	if !ok {
		ei = x.newEntry(h)
	}
	n := x.newNode(ei, ep)
	e := &x.entries[ei]
	e.set.add(ep)
	e.nodes = slices.Insert(e.nodes, e.set.rank(ep), n)
	x.pushFront(l, n)
}

// evict drops the least recently used block of l.
func (x *Index) evict(l *endpointLRU) {
	n := l.tail
	x.unlink(l, n)
	node := x.nodes[n]
	e := &x.entries[node.entry]
	r := e.set.rank(node.ep)
	e.nodes = slices.Delete(e.nodes, r, r+1)
	e.set.remove(node.ep)
	if len(e.nodes) == 0 {
		x.byHash.del(e.hash)
		x.freeEntry = append(x.freeEntry, node.entry)
	}
	x.nodes[n] = lruNode{entry: none, ep: none, prev: none, next: x.freeNode}
	x.freeNode = n
}

// newEntry returns a slot for an empty set of hash h, registered in byHash.
func (x *Index) newEntry(h uint64) int32 {
	var i int32
	if k := len(x.freeEntry); k > 0 {
		i = x.freeEntry[k-1]
		x.freeEntry = x.freeEntry[:k-1]
	} else {
		x.entries = append(x.entries, hashEntry{})
		i = int32(len(x.entries) - 1)
	}
	e := &x.entries[i]
	e.hash = h
	e.set.reset()
	e.nodes = e.nodes[:0]
	x.byHash.set(h, i)
	return i
}

// newNode returns an unlinked node for (entry, ep).
func (x *Index) newNode(entry, ep int32) int32 {
	var n int32
	if x.freeNode != none {
		n = x.freeNode
		x.freeNode = x.nodes[n].next
	} else {
		x.nodes = append(x.nodes, lruNode{})
		n = int32(len(x.nodes) - 1)
	}
	x.nodes[n] = lruNode{entry: entry, ep: ep, prev: none, next: none}
	return n
}

// pushFront links node n in as l's most recently used block.
func (x *Index) pushFront(l *endpointLRU, n int32) {
	node := &x.nodes[n]
	node.prev, node.next = none, l.head
	if l.head != none {
		x.nodes[l.head].prev = n
	} else {
		l.tail = n
	}
	l.head = n
	l.n++
}

// unlink takes node n out of l.
func (x *Index) unlink(l *endpointLRU, n int32) {
	node := &x.nodes[n]
	if node.prev != none {
		x.nodes[node.prev].next = node.next
	} else {
		l.head = node.next
	}
	if node.next != none {
		x.nodes[node.next].prev = node.prev
	} else {
		l.tail = node.prev
	}
	node.prev, node.next = none, none
	l.n--
}
