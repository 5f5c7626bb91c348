package engine

import "kvroute/sim/engine/internal/hugepage"

// blockPool is vLLM's KV block pool: ref counts, the free queue (head evicted first) and the
// table from block hash to cached block. Block ids are 0..n-1. A block's state is what
// popping, releasing and hitting it read, 16 bytes, four to a cache line; the chains of
// duplicate blocks, which only dupHits reads, sit apart (dupNext, dupPrev).
//
// vLLM keeps the free queue as a doubly-linked list, for taking a block out of its middle
// when a request hits it. Here it is a ring of block ids in the order they were freed; taking
// a block out of the middle leaves its entry behind, stale, and counts it in the block's
// stale count. A block's stale entries all precede its current one: only a hit takes a block
// out of the middle, and a block that was hit keeps its hash, so that it returns to the tail.
// Popping an entry whose block counts stale entries drops it and the count, reading one byte
// per block, not the block's state. The order of the current entries is exactly the list's,
// and the blocks to be popped next are known without following links, so their cache misses
// overlap (touchFree).
//
// The table holds exactly the cached hashes: a block records its entry's slot, so evicting it
// removes the entry at once, and a lookup needs no check against the blocks.
type blockPool struct {
	blocks     []block
	ring       []int32 // the free queue; position q is ring[q&(len(ring)-1)]
	stale      []uint8 // each block's count of stale entries in ring
	head, tail uint32  // the queue's entries are at positions head..tail-1
	cached     prefixTable
	// dupNext holds, for each block cached under a hash, the next block cached under it plus
	// one (0: none), and dupPrev, for each duplicate (slotSecond), the block before it on
	// its hash's chain; dupHits only.
	dupNext, dupPrev []int32
	numFree          int
	sink             uint64 // keeps the reads of the touch methods
	// dupHits and unhashedToHead are Semantics.DuplicateHits and Semantics.UnhashedToHead.
	dupHits, unhashedToHead bool
	// events, when set, hears each block hash the cache starts (stored) or stops holding:
	// what vLLM publishes as BlockStored and BlockRemoved KV events.
	events func(stored bool, hash uint64)
}

// block is one KV block's state, but for its place on a chain of duplicates.
type block struct {
	ref int32
	// slot says how the block is cached: its hash's table position plus one, with
	// slotChained set when duplicates follow it (the table's block for the hash),
	// slotSecond, or, when it has no hash, 0 or slotParked.
	slot uint32
	hash uint64 // the hash the block is cached under, when it is
}

const (
	// slotSecond: cached under a hash that an earlier block holds too (dupHits), not the
	// table's block for it.
	slotSecond = ^uint32(0)
	// slotParked: no hash, but stands for a cached block no request can ever hit
	// (Replica.park).
	slotParked = ^uint32(0) - 1
	// slotChained, in the slot of the table's block for a hash, says that duplicates follow
	// it (dupHits): evicting it is not a plain table deletion.
	slotChained = uint32(1) << 31
)

// maxBlocks bounds a pool's blocks so that every table position (at most 8 per block in
// lines and 4 in the overflow table) stays below slotChained.
const maxBlocks = 1 << 27

// slotPos returns the table position in slot s, the slot of the table's block for a hash.
func slotPos(s uint32) uint32 { return s&^slotChained - 1 }

func newBlockPool(n int, sem Semantics) *blockPool {
	p := &blockPool{}
	p.reset(n, sem)
	return p
}

// reset makes p an empty pool of n free blocks, keeping its events hook.
func (p *blockPool) reset(n int, sem Semantics) {
	size := 64
	for size < 2*n {
		size *= 2
	}
	*p = blockPool{blocks: make([]block, n), stale: make([]uint8, n), ring: make([]int32, size), events: p.events,
		dupHits: sem.DuplicateHits, unhashedToHead: sem.UnhashedToHead}
	if p.dupHits {
		p.dupNext, p.dupPrev = make([]int32, n), make([]int32, n)
	}
	for b := range int32(n) {
		p.pushTail(b)
	}
	// The table holds at most one entry per block: it never grows.
	p.cached.reserve(n+1, p.blocks)
	// The pool's tables are read at random, about 2 MiB per replica of 27.5k blocks: on huge
	// pages, a whole fleet's stay within the TLB's reach (docs/simulator.md, "Speed").
	_ = hugepage.Advise(p.blocks)
	_ = hugepage.Advise(p.ring)
	_ = hugepage.Advise(p.cached.lines)
	p.cached.onMove = func(block1 int32, pos uint32) {
		bl := &p.blocks[block1-1]
		bl.slot = pos + 1 | bl.slot&slotChained
	}
}

func (p *blockPool) size() int { return len(p.blocks) }

// hashOf returns the hash of cached block b.
func (p *blockPool) hashOf(b int32) uint64 { return p.blocks[b].hash }

// refCount returns block b's reference count.
func (p *blockPool) refCount(b int32) int32 { return p.blocks[b].ref }

// hashed reports whether block b is cached (under its hash, or as a duplicate).
func (p *blockPool) hashed(b int32) bool {
	s := p.blocks[b].slot
	return s != 0 && s != slotParked
}

// pushTail appends free block b to the free queue.
func (p *blockPool) pushTail(b int32) {
	if int(p.tail-p.head) == len(p.ring) {
		p.compactFree()
	}
	p.ring[p.tail&uint32(len(p.ring)-1)] = b
	p.tail++
	p.numFree++
}

// compactFree drops the stale entries of the free queue, keeping the order; every block's
// stale count is then 0. A full ring holds twice as many entries as blocks, so at least half
// of them are stale.
func (p *blockPool) compactFree() {
	mask := uint32(len(p.ring) - 1)
	q := p.head
	for r := p.head; r != p.tail; r++ {
		b := p.ring[r&mask]
		if p.stale[b] != 0 {
			p.stale[b]--
			continue
		}
		p.ring[q&mask] = b
		q++
	}
	p.tail = q
}

// lookup returns the cached block holding k's hash.
func (p *blockPool) lookup(k blockKey) (int32, bool) { return p.cached.get(k) }

// touch takes a reference on a cached block, taking it off the free queue if it was free
// (its entry goes stale).
func (p *blockPool) touch(b int32) {
	bl := &p.blocks[b]
	if bl.ref == 0 {
		p.numFree--
		if p.stale[b] == ^uint8(0) {
			p.compactFree() // the count would wrap
		}
		p.stale[b]++
	}
	bl.ref++
}

// popRun appends k blocks taken from the head of the free queue (the least recently freed
// first) to dst, evicting their cached hashes: the common eviction (the table's block for a
// hash in a table line, no one hearing KV events) is done in the loop. The caller has
// checked numFree.
func (p *blockPool) popRun(dst []int32, k int) []int32 {
	p.numFree -= k
	mask := uint32(len(p.ring) - 1)
	t := &p.cached
	direct := p.events == nil
	for ; k > 0; k-- {
		b := p.ring[p.head&mask]
		p.head++
		for p.stale[b] != 0 {
			p.stale[b]--
			b = p.ring[p.head&mask]
			p.head++
		}
		bl := &p.blocks[b]
		if pos := bl.slot - 1; direct && pos < uint32(len(t.lines)) { // not chained either
			t.deleteInLine(pos)
			bl.slot = 0
		} else {
			p.evict(b)
		}
		bl.ref = 1
		dst = append(dst, b)
	}
	return dst
}

// touchFree reads the blocks of the next k free-queue entries and the table slots of their
// hashes, overlapping the cache misses, so that the pops that follow (and the evictions)
// find them cached.
func (p *blockPool) touchFree(k int) {
	var sink uint64
	mask := uint32(len(p.ring) - 1)
	for q := p.head; q != p.tail && k > 0; q, k = q+1, k-1 {
		s := p.blocks[p.ring[q&mask]].slot
		sink += uint64(s)
		if s != 0 && s < slotParked { // the table's block for its hash
			sink += p.cached.touchPos(slotPos(s))
		}
	}
	p.sink += sink
}

// evict forgets b's hash, removing its table entry.
func (p *blockPool) evict(b int32) {
	bl := &p.blocks[b]
	switch bl.slot {
	case 0:
		return
	case slotParked:
		bl.slot = 0
		return
	}
	if bl.slot&slotChained != 0 { // chained, or slotSecond
		p.unlinkDup(b)
		return
	}
	pos := bl.slot - 1
	if p.events != nil {
		p.events(false, p.cached.key(pos))
	}
	bl.slot = 0
	p.cached.deleteAt(pos)
}

// unlinkDup forgets the hash of block b, one of several blocks cached under it
// (DuplicateHits): the hash stays cached in the others, so no event is published. When b is
// the table's block, the next duplicate takes its place.
func (p *blockPool) unlinkDup(b int32) {
	bl := &p.blocks[b]
	next := p.dupNext[b] - 1
	if bl.slot != slotSecond { // the table's block: next takes its place
		p.cached.setBlock(slotPos(bl.slot), next)
		p.blocks[next].slot = bl.slot
		if p.dupNext[next] == 0 {
			p.blocks[next].slot &^= slotChained
		}
	} else {
		prev := p.dupPrev[b]
		p.dupNext[prev] = next + 1
		if next >= 0 {
			p.dupPrev[next] = prev
		} else if pb := &p.blocks[prev]; pb.slot != slotSecond {
			pb.slot &^= slotChained // prev, the table's block, has no duplicates left
		}
	}
	p.dupNext[b], bl.slot = 0, 0
}

// cache records that full block b, which has no hash, holds the tokens hashing to k.hash. A
// block whose hash another block already holds (V1's append-only block tables allow duplicates)
// stays uncached, or with dupHits joins the others: lookups find the first of them, and the
// hash stays cached until the last is evicted. KV events are published per hash, not per
// duplicate.
func (p *blockPool) cache(b int32, k blockKey) {
	pos, ok := p.cached.putInEmpty(k, b)
	if !ok {
		c, at, found := p.cached.getOrPut(k, b)
		if found {
			if p.dupHits { // b joins the blocks cached under h, after the last of them
				p.blocks[c].slot |= slotChained // c is the table's block
				for p.dupNext[c] != 0 {
					c = p.dupNext[c] - 1
				}
				p.dupNext[c] = b + 1
				p.blocks[b].slot, p.blocks[b].hash, p.dupPrev[b] = slotSecond, k.hash, c
			}
			return
		}
		pos = at
	}
	p.blocks[b].slot, p.blocks[b].hash = pos+1, k.hash
	if p.events != nil {
		p.events(true, k.hash)
	}
}

// park marks block b, which its request filled with tokens no other request will send, as
// cached for the free queue's order only: it is never looked up, so it needs no hash.
func (p *blockPool) park(b int32) {
	if p.blocks[b].slot == 0 {
		p.blocks[b].slot = slotParked
	}
}

// touchBlocks reads each block's state, overlapping the cache misses (see prefixTable.touch).
func (p *blockPool) touchBlocks(blocks []int32) uint64 {
	var sink uint64
	for _, b := range blocks {
		sink += uint64(p.blocks[b].ref)
	}
	return sink
}

// release drops one reference on each block, last block first, so that a request's tail
// blocks reach the free queue (and eviction) before its head blocks. With unhashedToHead a
// block without a hash goes to the head instead, to be reused first.
func (p *blockPool) release(blocks []int32) {
	p.sink += p.touchBlocks(blocks)
	if int(p.tail-p.head)+len(blocks) > len(p.ring) {
		p.compactFree() // leaves at most len(p.blocks) entries: room for every block
	}
	mask := uint32(len(p.ring) - 1)
	for i := len(blocks) - 1; i >= 0; i-- {
		b := blocks[i]
		bl := &p.blocks[b]
		if bl.ref--; bl.ref > 0 {
			continue
		} else if bl.ref < 0 {
			panic("engine: negative block ref count") // a broken invariant, not bad input
		}
		p.numFree++
		if p.unhashedToHead && bl.slot == 0 { // no hash, not parked: to the head
			p.head--
			p.ring[p.head&mask] = b
			continue
		}
		p.ring[p.tail&mask] = b
		p.tail++
	}
}

// clearAll empties the cache and the pool (a restarted replica).
func (p *blockPool) clearAll() {
	p.reset(p.size(), Semantics{DuplicateHits: p.dupHits, UnhashedToHead: p.unhashedToHead})
}

// used returns the blocks with a reference.
func (p *blockPool) used() int { return p.size() - p.numFree }
