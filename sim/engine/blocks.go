package engine

// blockPool is vLLM's KV block pool: ref counts, a doubly-linked free queue (head evicted
// first) and the map from block hash to cached block. Block ids are 0..n-1; the list uses
// sentinel index n.
type blockPool struct {
	ref        []int32
	hash       []uint64
	hashed     []bool
	prev, next []int32
	cached     map[uint64]int32
	numFree    int
}

func newBlockPool(n int) *blockPool {
	p := &blockPool{
		ref: make([]int32, n), hash: make([]uint64, n), hashed: make([]bool, n),
		prev: make([]int32, n+1), next: make([]int32, n+1), cached: make(map[uint64]int32),
	}
	s := int32(n) // sentinel
	p.prev[s], p.next[s] = s, s
	for b := range int32(n) {
		p.pushTail(b)
	}
	return p
}

func (p *blockPool) size() int { return len(p.ref) }

func (p *blockPool) sentinel() int32 { return int32(len(p.ref)) }

func (p *blockPool) pushTail(b int32) {
	s := p.sentinel()
	last := p.prev[s]
	p.next[last], p.prev[b] = b, last
	p.next[b], p.prev[s] = s, b
	p.numFree++
}

func (p *blockPool) unlink(b int32) {
	p.next[p.prev[b]] = p.next[b]
	p.prev[p.next[b]] = p.prev[b]
	p.prev[b], p.next[b] = -1, -1
	p.numFree--
}

// lookup returns the cached block holding hash h.
func (p *blockPool) lookup(h uint64) (int32, bool) {
	b, ok := p.cached[h]
	return b, ok
}

// touch takes a reference on a cached block, taking it off the free queue if it was free.
func (p *blockPool) touch(b int32) {
	if p.ref[b] == 0 {
		p.unlink(b)
	}
	p.ref[b]++
}

// popFree takes the head of the free queue (the least recently freed block), evicting its
// cached hash. The caller has checked numFree.
func (p *blockPool) popFree() int32 {
	b := p.next[p.sentinel()]
	p.unlink(b)
	p.evict(b)
	p.ref[b] = 1
	return b
}

// evict forgets b's hash.
func (p *blockPool) evict(b int32) {
	if p.hashed[b] {
		if c, ok := p.cached[p.hash[b]]; ok && c == b {
			delete(p.cached, p.hash[b])
		}
		p.hashed[b] = false
	}
}

// cache records that full block b holds the tokens hashing to h. A block whose hash another
// block already holds stays an uncached duplicate, as V1's append-only block tables allow.
func (p *blockPool) cache(b int32, h uint64) {
	if _, dup := p.cached[h]; dup {
		return
	}
	p.cached[h] = b
	p.hash[b], p.hashed[b] = h, true
}

// release drops one reference on each block, last block first, so that a request's tail
// blocks reach the free queue (and eviction) before its head blocks.
func (p *blockPool) release(blocks []int32) {
	for i := len(blocks) - 1; i >= 0; i-- {
		b := blocks[i]
		if p.ref[b]--; p.ref[b] == 0 {
			p.pushTail(b)
		} else if p.ref[b] < 0 {
			panic("engine: negative block ref count") // a broken invariant, not bad input
		}
	}
}

// clearAll empties the cache and the pool (a restarted replica).
func (p *blockPool) clearAll() {
	*p = *newBlockPool(p.size())
}

// used returns the blocks with a reference.
func (p *blockPool) used() int { return p.size() - p.numFree }
