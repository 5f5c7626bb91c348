package engine

import "container/list"

// cpuTier is the bookkeeping of a replica's CPU KV tier, as vLLM's LRUOffloadingManager keeps
// it (vllm-project/vllm@3a04cf8f vllm/v1/kv_offload/lru_manager.py): offloaded blocks by
// hash in least-recently-used order, each not ready (-1: its store is in flight), free (0)
// or pinned by the loads reading it (> 0). Only ready blocks are hits; only free ones are
// evicted. It holds no data, only which hashes the tier has.
type cpuTier struct {
	capacity int // blocks
	order    *list.List
	blocks   map[uint64]*list.Element
}

// cpuBlock is one offloaded block: its hash and its reference count (-1: not ready).
type cpuBlock struct {
	hash uint64
	ref  int32
}

func newCPUTier(capacity int) *cpuTier {
	return &cpuTier{capacity: capacity, order: list.New(), blocks: make(map[uint64]*list.Element)}
}

// len returns the blocks the tier holds, ready or not.
func (t *cpuTier) len() int { return t.order.Len() }

// lookup returns how many of hashes, from the first, are held and ready: the count stops at
// the first block missing or still being stored (LRUOffloadingManager.lookup).
func (t *cpuTier) lookup(hashes []uint64) int {
	for i, h := range hashes {
		e, ok := t.blocks[h]
		if !ok || e.Value.(*cpuBlock).ref < 0 {
			return i
		}
	}
	return len(hashes)
}

// loading reports whether a load reads any of hashes.
func (t *cpuTier) loading(hashes []uint64) bool {
	for _, h := range hashes {
		if e, ok := t.blocks[h]; ok && e.Value.(*cpuBlock).ref > 0 {
			return true
		}
	}
	return false
}

// touch makes the held blocks among hashes the most recently used, the first of them most
// recently of all (touch walks them last to first).
func (t *cpuTier) touch(hashes []uint64) {
	for i := len(hashes) - 1; i >= 0; i-- {
		if e, ok := t.blocks[hashes[i]]; ok {
			t.order.MoveToBack(e)
		}
	}
}

// pin takes a reference on each of hashes, ready blocks a load is about to read
// (prepare_load); unpin drops it (complete_load).
func (t *cpuTier) pin(hashes []uint64) { t.addRef(hashes, 1) }

func (t *cpuTier) unpin(hashes []uint64) { t.addRef(hashes, -1) }

func (t *cpuTier) addRef(hashes []uint64, d int32) {
	for _, h := range hashes {
		if e, ok := t.blocks[h]; ok {
			e.Value.(*cpuBlock).ref += d
		}
	}
}

// prepareStore reserves blocks for those of hashes the tier does not hold, evicting the least
// recently used free blocks to make room (prepare_store). It returns the hashes to store (in
// order) and those evicted, or ok false, changing nothing, when too few blocks are free to
// evict: the store is then skipped.
func (t *cpuTier) prepareStore(hashes []uint64, toStore, evicted []uint64) ([]uint64, []uint64, bool) {
	toStore, evicted = toStore[:0], evicted[:0]
	for _, h := range hashes {
		if _, ok := t.blocks[h]; !ok {
			toStore = append(toStore, h)
		}
	}
	evict := len(toStore) - (t.capacity - t.order.Len())
	for e := t.order.Front(); e != nil && evict > 0; e = e.Next() {
		if b := e.Value.(*cpuBlock); b.ref == 0 {
			evicted = append(evicted, b.hash)
			evict--
		}
	}
	if evict > 0 {
		return toStore[:0], evicted[:0], false
	}
	for _, h := range evicted {
		t.order.Remove(t.blocks[h])
		delete(t.blocks, h)
	}
	for _, h := range toStore {
		t.blocks[h] = t.order.PushBack(&cpuBlock{hash: h, ref: -1})
	}
	return toStore, evicted, true
}

// completeStore makes the blocks of hashes that are still being stored ready and returns
// them, the hashes a BlockStored event announces (complete_store).
func (t *cpuTier) completeStore(hashes, stored []uint64) []uint64 {
	stored = stored[:0]
	for _, h := range hashes {
		if e, ok := t.blocks[h]; ok {
			if b := e.Value.(*cpuBlock); b.ref < 0 {
				b.ref = 0
				stored = append(stored, h)
			}
		}
	}
	return stored
}

// clear empties the tier (the replica failed).
func (t *cpuTier) clear() {
	t.order.Init()
	clear(t.blocks)
}
