package engine

// blockPool is vLLM's KV block pool: ref counts, the free queue (head evicted first) and the
// table from block hash to cached block. Block ids are 0..n-1. Each block's fields sit
// together, so touching a block costs one cache line.
//
// vLLM keeps the free queue as a doubly-linked list, for taking a block out of its middle
// when a request hits it. Here it is a ring of block ids in the order they were freed; taking
// a block out of the middle just leaves its entry behind, stale: an entry is current when
// its block is free and records the entry's position. Popping skips stale entries. The order
// of the current entries is exactly the list's, and the blocks to be popped next are known
// without following links, so their cache misses overlap (touchFree).
type blockPool struct {
	blocks     []block
	ring       []int32 // the free queue; position q is ring[q&(len(ring)-1)]
	head, tail uint32  // the queue's entries are at positions head..tail-1
	cached     hashTable
	stale      []staleEntry // evicted blocks whose table entries are still to be removed
	numFree    int
	sink       uint64 // keeps the reads of the touch methods
	// dupHits and unhashedToHead are Semantics.DuplicateHits and Semantics.UnhashedToHead.
	dupHits, unhashedToHead bool
	// events, when set, hears each block hash the cache starts (stored) or stops holding:
	// what vLLM publishes as BlockStored and BlockRemoved KV events.
	events func(stored bool, hash uint64)
}

// staleEntry is the table entry of an evicted block: hash → block.
type staleEntry struct {
	hash  uint64
	block int32
}

// staleBatch is how many stale table entries the pool lets pile up before removing them
// together.
const staleBatch = 256

// block is one KV block's state.
type block struct {
	hash   uint64 // valid when hashed
	ref    int32
	qpos   uint32 // position of the block's current free-queue entry, when ref is 0
	dup    int32  // the next block cached under the same hash, plus one; 0: none
	hashed bool
	second bool // cached under a hash that an earlier block holds too (dupHits)
	parked bool // stands for a cached block no request can ever hit (Replica.park)
}

func newBlockPool(n int, sem Semantics) *blockPool {
	size := 64
	for size < 2*n {
		size *= 2
	}
	p := &blockPool{blocks: make([]block, n), ring: make([]int32, size),
		dupHits: sem.DuplicateHits, unhashedToHead: sem.UnhashedToHead}
	for b := range int32(n) {
		p.pushTail(b)
	}
	// Every block cached plus a batch of stale entries: the table never grows, which would
	// copy it through every power of two on the way.
	p.cached.reserve(n + staleBatch + 1)
	return p
}

func (p *blockPool) size() int { return len(p.blocks) }

// refCount returns block b's reference count.
func (p *blockPool) refCount(b int32) int32 { return p.blocks[b].ref }

// pushTail appends free block b to the free queue.
func (p *blockPool) pushTail(b int32) {
	if int(p.tail-p.head) == len(p.ring) {
		p.compactFree()
	}
	p.ring[p.tail&uint32(len(p.ring)-1)] = b
	p.blocks[b].qpos = p.tail
	p.tail++
	p.numFree++
}

// pushHead puts free block b at the head of the free queue, to be taken first.
func (p *blockPool) pushHead(b int32) {
	if int(p.tail-p.head) == len(p.ring) {
		p.compactFree()
	}
	p.head--
	p.ring[p.head&uint32(len(p.ring)-1)] = b
	p.blocks[b].qpos = p.head
	p.numFree++
}

// current reports whether the free-queue entry at position q is current.
func (p *blockPool) current(q uint32) bool {
	bl := &p.blocks[p.ring[q&uint32(len(p.ring)-1)]]
	return bl.ref == 0 && bl.qpos == q
}

// compactFree drops the stale entries of the full free queue, keeping the order. The ring
// holds twice as many entries as blocks, so at least half of them are stale.
func (p *blockPool) compactFree() {
	mask := uint32(len(p.ring) - 1)
	q := p.head
	for r := p.head; r != p.tail; r++ {
		if p.current(r) {
			b := p.ring[r&mask]
			p.ring[q&mask] = b
			p.blocks[b].qpos = q
			q++
		}
	}
	p.tail = q
}

// lookup returns the cached block holding hash h.
func (p *blockPool) lookup(h uint64) (int32, bool) {
	b, ok := p.cached.get(h)
	if !ok || !p.holds(b, h) {
		return 0, false
	}
	return b, true
}

// holds reports whether block b is the cached block of hash h: the table's entry for h is
// stale once b has been evicted (and perhaps cached again under another hash).
func (p *blockPool) holds(b int32, h uint64) bool {
	bl := &p.blocks[b]
	return bl.hashed && bl.hash == h
}

// touch takes a reference on a cached block, taking it off the free queue if it was free
// (its entry goes stale).
func (p *blockPool) touch(b int32) {
	if p.blocks[b].ref == 0 {
		p.numFree--
	}
	p.blocks[b].ref++
}

// popFree takes the head of the free queue (the least recently freed block), evicting its
// cached hash. The caller has checked numFree.
func (p *blockPool) popFree() int32 {
	for !p.current(p.head) {
		p.head++
	}
	b := p.ring[p.head&uint32(len(p.ring)-1)]
	p.head++
	p.numFree--
	p.evict(b)
	p.blocks[b].ref = 1
	return b
}

// touchFree reads the blocks of the next k free-queue entries, overlapping their cache
// misses, so that the pops that follow find them cached.
func (p *blockPool) touchFree(k int) {
	var sink uint64
	mask := uint32(len(p.ring) - 1)
	for q := p.head; q != p.tail && k > 0; q, k = q+1, k-1 {
		sink += uint64(p.blocks[p.ring[q&mask]].qpos)
	}
	p.sink += sink
}

// evict forgets b's hash. Its table entry stays, stale (lookups check entries against the
// blocks), and is removed with a batch of others: their cache misses on the table overlap,
// instead of one stalling every block taken from the free queue.
func (p *blockPool) evict(b int32) {
	bl := &p.blocks[b]
	if !bl.hashed {
		bl.parked = false
		return
	}
	if bl.dup != 0 || bl.second {
		p.unlinkDup(b)
		return
	}
	bl.hashed = false
	if p.events != nil {
		p.events(false, bl.hash)
	}
	p.stale = append(p.stale, staleEntry{bl.hash, b})
	if len(p.stale) >= staleBatch {
		p.removeStale()
	}
}

// unlinkDup forgets the hash of block b, one of several blocks cached under it
// (DuplicateHits): the hash stays cached in the others, so no event is published. When b is
// the table's block, the next duplicate takes its place.
func (p *blockPool) unlinkDup(b int32) {
	bl := &p.blocks[b]
	next := bl.dup - 1
	if !bl.second {
		i, _ := p.cached.find(bl.hash)
		p.cached.slots[i].block1 = next + 1
		p.blocks[next].second = false
	} else {
		c, _ := p.cached.get(bl.hash)
		for c != b && p.blocks[c].dup-1 != b {
			c = p.blocks[c].dup - 1
		}
		p.blocks[c].dup = bl.dup
	}
	bl.dup, bl.hashed, bl.second = 0, false, false
}

// removeStale removes the table entries of evicted blocks that are still stale: an entry may
// since have been taken over by another block, or its block cached again under its hash.
func (p *blockPool) removeStale() {
	var sink uint64
	for _, e := range p.stale {
		sink += p.cached.touchKey(e.hash)
	}
	p.sink += sink
	for _, e := range p.stale {
		if i, ok := p.cached.find(e.hash); ok && p.cached.slots[i].block1-1 == e.block && !p.holds(e.block, e.hash) {
			p.cached.deleteAt(i)
		}
	}
	p.stale = p.stale[:0]
}

// cache records that full block b holds the tokens hashing to h. A block whose hash another
// block already holds (V1's append-only block tables allow duplicates) stays uncached, or
// with dupHits joins the others: lookups find the first of them, and the hash stays cached
// until the last is evicted. KV events are published per hash, not per duplicate.
func (p *blockPool) cache(b int32, h uint64) {
	if c, ok := p.cached.get(h); ok && p.holds(c, h) {
		if p.dupHits { // b joins the blocks cached under h, after the last of them
			for p.blocks[c].dup != 0 {
				c = p.blocks[c].dup - 1
			}
			p.blocks[c].dup = b + 1
			p.blocks[b].hash, p.blocks[b].hashed, p.blocks[b].second = h, true, true
		}
		return
	}
	if p.cached.full() {
		p.removeStale()
		if p.cached.full() {
			p.cached.grow()
		}
	}
	p.cached.put(h, b)
	p.blocks[b].hash, p.blocks[b].hashed = h, true
	if p.events != nil {
		p.events(true, h)
	}
}

// park marks block b, which its request filled with tokens no other request will send, as
// cached for the free queue's order only: it is never looked up, so it needs no hash.
func (p *blockPool) park(b int32) { p.blocks[b].parked = true }

// touchBlocks reads each block's state, overlapping the cache misses (see hashTable.touch).
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
	for i := len(blocks) - 1; i >= 0; i-- {
		b := blocks[i]
		if p.blocks[b].ref--; p.blocks[b].ref == 0 {
			if p.unhashedToHead && !p.blocks[b].hashed && !p.blocks[b].parked {
				p.pushHead(b)
			} else {
				p.pushTail(b)
			}
		} else if p.blocks[b].ref < 0 {
			panic("engine: negative block ref count") // a broken invariant, not bad input
		}
	}
}

// clearAll empties the cache and the pool (a restarted replica).
func (p *blockPool) clearAll() {
	events := p.events
	*p = *newBlockPool(p.size(), Semantics{DuplicateHits: p.dupHits, UnhashedToHead: p.unhashedToHead})
	p.events = events
}

// used returns the blocks with a reference.
func (p *blockPool) used() int { return p.size() - p.numFree }
