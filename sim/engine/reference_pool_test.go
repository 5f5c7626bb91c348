package engine

import "slices"

// The reference engine's block pool (see reference_test.go).

// refPool is vLLM's KV block pool: ref counts, a doubly-linked free queue (head evicted
// first) and the map from block hash to cached block. Block ids are 0..n-1; the list uses
// sentinel index n.
type refPool struct {
	ref        []int32
	hash       []uint64
	hashed     []bool
	prev, next []int32
	cached     map[uint64][]int32 // the blocks holding a hash, in the order they were cached
	numFree    int
	sem        Semantics
}

func newRefPool(n int, sem Semantics) *refPool {
	p := &refPool{
		ref: make([]int32, n), hash: make([]uint64, n), hashed: make([]bool, n),
		prev: make([]int32, n+1), next: make([]int32, n+1), cached: make(map[uint64][]int32), sem: sem,
	}
	s := int32(n) // sentinel
	p.prev[s], p.next[s] = s, s
	for b := range int32(n) {
		p.pushTail(b)
	}
	return p
}

func (p *refPool) size() int { return len(p.ref) }

func (p *refPool) sentinel() int32 { return int32(len(p.ref)) }

func (p *refPool) pushTail(b int32) {
	s := p.sentinel()
	last := p.prev[s]
	p.next[last], p.prev[b] = b, last
	p.next[b], p.prev[s] = s, b
	p.numFree++
}

func (p *refPool) pushHead(b int32) {
	s := p.sentinel()
	first := p.next[s]
	p.prev[first], p.next[b] = b, first
	p.prev[b], p.next[s] = s, b
	p.numFree++
}

func (p *refPool) unlink(b int32) {
	p.next[p.prev[b]] = p.next[b]
	p.prev[p.next[b]] = p.prev[b]
	p.prev[b], p.next[b] = -1, -1
	p.numFree--
}

// lookup returns the cached block holding hash h.
func (p *refPool) lookup(h uint64) (int32, bool) {
	if bs := p.cached[h]; len(bs) > 0 {
		return bs[0], true
	}
	return 0, false
}

// touch takes a reference on a cached block, taking it off the free queue if it was free.
func (p *refPool) touch(b int32) {
	if p.ref[b] == 0 {
		p.unlink(b)
	}
	p.ref[b]++
}

// popFree takes the head of the free queue (the least recently freed block), evicting its
// cached hash. The caller has checked numFree.
func (p *refPool) popFree() int32 {
	b := p.next[p.sentinel()]
	p.unlink(b)
	p.evict(b)
	p.ref[b] = 1
	return b
}

// evict forgets b's hash.
func (p *refPool) evict(b int32) {
	if p.hashed[b] {
		bs := p.cached[p.hash[b]]
		if i := slices.Index(bs, b); i >= 0 {
			bs = slices.Delete(bs, i, i+1)
		}
		if len(bs) == 0 {
			delete(p.cached, p.hash[b])
		} else {
			p.cached[p.hash[b]] = bs
		}
		p.hashed[b] = false
	}
}

// cache records that full block b holds the tokens hashing to h. A block whose hash another
// block already holds stays an uncached duplicate, as V1's append-only block tables allow.
func (p *refPool) cache(b int32, h uint64) {
	if _, dup := p.cached[h]; dup && !p.sem.DuplicateHits {
		return
	}
	p.cached[h] = append(p.cached[h], b)
	p.hash[b], p.hashed[b] = h, true
}

// release drops one reference on each block, last block first, so that a request's tail
// blocks reach the free queue (and eviction) before its head blocks.
func (p *refPool) release(blocks []int32) {
	for i := len(blocks) - 1; i >= 0; i-- {
		b := blocks[i]
		if p.ref[b]--; p.ref[b] == 0 {
			if p.sem.UnhashedToHead && !p.hashed[b] {
				p.pushHead(b)
			} else {
				p.pushTail(b)
			}
		} else if p.ref[b] < 0 {
			panic("engine: negative block ref count") // a broken invariant, not bad input
		}
	}
}

// clearAll empties the cache and the pool (a restarted replica).
func (p *refPool) clearAll() {
	*p = *newRefPool(p.size(), p.sem)
}

// used returns the blocks with a reference.
func (p *refPool) used() int { return p.size() - p.numFree }
