package engine

import "container/list"

// arcTier is the tier under vLLM's ARC eviction policy (eviction_policy arc; ARCCachePolicy,
// vllm-project/vllm@02957b5a vllm/v1/kv_offload/cpu/policies/arc.py, with the manager's
// prepare_store in vllm/v1/kv_offload/cpu/manager.py@0358cbba). Blocks seen once live in T1,
// blocks touched again once ready in T2, each in least-recently-used order; B1 and B2
// remember the hashes recently evicted from each (ghosts, at most capacity each). A touch of
// a ghost moves the target size of T1: up for a B1 ghost (recency pays), down for a B2 ghost
// (frequency pays). Eviction takes the oldest free block of T1 while T1 is at least its
// target, else of T2.
type arcTier struct {
	blockMap         // held blocks, in t1 or t2
	target   float64 // T1's target size in blocks, 0..capacity
	t1, t2   *list.List
	b1, b2   *list.List
	ghosts   map[uint64]*list.Element // ghost hashes (*arcGhost), in b1 or b2
	stamp    uint64                   // the current store's mark on the blocks it protects
}

var _ cpuTier = (*arcTier)(nil)

// arcGhost is a hash evicted from T1 (b1) or T2.
type arcGhost struct {
	hash uint64
	inB1 bool
}

func newARCTier(capacity int) *arcTier {
	return &arcTier{blockMap: newBlockMap(capacity), t1: list.New(), t2: list.New(), b1: list.New(), b2: list.New(),
		ghosts: make(map[uint64]*list.Element)}
}

// touch walks hashes last to first (ARCCachePolicy.touch, arc.py:75-101): a ready T1 block
// moves to T2's most recent end, a T1 block still being stored to T1's, a T2 block to T2's;
// a B1 ghost raises the target by max(1, |B2|/|B1|) (at most capacity), a B2 ghost lowers
// it by max(1, |B1|/|B2|) (at least 0), and the ghost becomes its list's most recent.
func (t *arcTier) touch(hashes []uint64) {
	for i := len(hashes) - 1; i >= 0; i-- {
		h := hashes[i]
		if e, ok := t.blocks[h]; ok {
			t.touchBlock(h, e)
			continue
		}
		e, ok := t.ghosts[h]
		if !ok {
			continue
		}
		b1, b2 := float64(t.b1.Len()), float64(t.b2.Len())
		if e.Value.(*arcGhost).inB1 {
			t.target = min(t.target+max(1, b2/b1), float64(t.capacity))
			t.b1.MoveToBack(e)
		} else {
			t.target = max(t.target-max(1, b1/b2), 0)
			t.b2.MoveToBack(e)
		}
	}
}

func (t *arcTier) touchBlock(h uint64, e *list.Element) {
	b := e.Value.(*cpuBlock)
	switch {
	case b.inT2:
		t.t2.MoveToBack(e)
	case b.ref < 0:
		t.t1.MoveToBack(e)
	default:
		t.t1.Remove(e)
		b.inT2 = true
		t.blocks[h] = t.t2.PushBack(b)
	}
}

// prepareStore follows CPUOffloadingManager.prepare_store: the blocks of hashes the tier
// already holds are protected from this store's eviction, the others are stored in T1 (and
// leave the ghost lists), and room is made by evictARC; when it cannot be, nothing changes.
func (t *arcTier) prepareStore(hashes []uint64, toStore, evicted []uint64) ([]uint64, []uint64, bool) {
	toStore, evicted = toStore[:0], evicted[:0]
	t.stamp++
	for _, h := range hashes {
		if b := t.block(h); b != nil {
			b.protect = t.stamp
		} else {
			toStore = append(toStore, h)
		}
	}
	if len(toStore) == 0 {
		return toStore, evicted, true
	}
	evicted, ok := t.evict(len(toStore)-(t.capacity-len(t.blocks)), evicted)
	if !ok {
		return toStore[:0], evicted[:0], false
	}
	for _, h := range toStore {
		if g, ok := t.ghosts[h]; ok {
			t.dropGhost(h, g)
		}
		t.blocks[h] = t.t1.PushBack(&cpuBlock{hash: h, ref: -1})
	}
	return toStore, evicted, true
}

// evict picks n free, unprotected blocks in ARC order and, only if it finds them all,
// removes them into their ghost lists and trims each ghost list to capacity
// (ARCCachePolicy.evict_until, arc.py:120-190): while T1's remaining size is at least
// int(target) the next candidate is T1's oldest not yet passed over, otherwise (or when T1
// has none left) T2's; both scans only move forward.
func (t *arcTier) evict(n int, out []uint64) ([]uint64, bool) {
	if n <= 0 {
		return out, true
	}
	virtualT1 := t.t1.Len()
	e1, e2 := t.t1.Front(), t.t2.Front()
	for len(out) < n {
		var c *list.Element
		if virtualT1 >= int(t.target) {
			if c, e1 = t.nextFree(e1); c != nil {
				virtualT1--
			}
		}
		if c == nil {
			if c, e2 = t.nextFree(e2); c == nil {
				return out[:0], false
			}
		}
		out = append(out, c.Value.(*cpuBlock).hash)
	}
	for _, h := range out {
		e := t.blocks[h]
		b := e.Value.(*cpuBlock)
		delete(t.blocks, h)
		ghosts := t.b1
		if b.inT2 {
			t.t2.Remove(e)
			ghosts = t.b2
		} else {
			t.t1.Remove(e)
		}
		t.ghosts[h] = ghosts.PushBack(&arcGhost{hash: h, inB1: !b.inT2})
	}
	for _, g := range []*list.List{t.b1, t.b2} {
		for g.Len() > t.capacity {
			f := g.Front()
			t.dropGhost(f.Value.(*arcGhost).hash, f)
		}
	}
	return out, true
}

// nextFree returns the first element from e on that holds a free, unprotected block, and the
// element after it (where the scan goes on), or nil when there is none.
func (t *arcTier) nextFree(e *list.Element) (found, next *list.Element) {
	for ; e != nil; e = e.Next() {
		if b := e.Value.(*cpuBlock); b.ref == 0 && b.protect != t.stamp {
			return e, e.Next()
		}
	}
	return nil, nil
}

func (t *arcTier) dropGhost(h uint64, e *list.Element) {
	g := e.Value.(*arcGhost)
	if g.inB1 {
		t.b1.Remove(e)
	} else {
		t.b2.Remove(e)
	}
	delete(t.ghosts, h)
}

func (t *arcTier) clear() {
	for _, l := range []*list.List{t.t1, t.t2, t.b1, t.b2} {
		l.Init()
	}
	clear(t.blocks)
	clear(t.ghosts)
	t.target = 0
}
