package engine

import (
	"container/list"
	"fmt"
)

// The eviction policies of the CPU tier (vLLM's kv_connector_extra_config eviction_policy,
// read in vllm-project/vllm@0072b0b7 vllm/v1/kv_offload/cpu/spec.py:54, default lru).
const (
	EvictionLRU = "lru"
	EvictionARC = "arc"
)

// cpuTier is the bookkeeping of a replica's CPU KV tier, vLLM's offloading manager with its
// eviction policy: which hashes the tier holds, each not ready (its store is in flight),
// free, or pinned by the loads reading it. Only ready blocks are hits; only free ones are
// evicted. It holds no data.
type cpuTier interface {
	// len returns the blocks the tier holds, ready or not; size its capacity in blocks.
	len() int
	size() int
	// lookup returns how many of hashes, from the first, are held and ready: the count
	// stops at the first block missing or still being stored (lookup).
	lookup(hashes []uint64) int
	// loading reports whether a load reads any of hashes.
	loading(hashes []uint64) bool
	// touch marks the held blocks among hashes as used, walking them last to first (touch).
	touch(hashes []uint64)
	// pin takes a reference on each of hashes, ready blocks a load is about to read
	// (prepare_load); unpin drops it (complete_load).
	pin(hashes []uint64)
	unpin(hashes []uint64)
	// prepareStore reserves blocks for those of hashes the tier does not hold, evicting free
	// blocks to make room (prepare_store). It returns the hashes to store (in order) and
	// those evicted, or ok false, changing nothing, when too few blocks can be evicted: the
	// store is then skipped. toStore and evicted are scratch slices it may reuse.
	prepareStore(hashes []uint64, toStore, evicted []uint64) ([]uint64, []uint64, bool)
	// completeStore makes the blocks of hashes that are still being stored ready and returns
	// them, the hashes a BlockStored event announces (complete_store).
	completeStore(hashes, stored []uint64) []uint64
	// clear empties the tier (the replica failed).
	clear()
}

// CheckEviction reports whether name is an eviction policy of the CPU tier: lru, arc, or ""
// (lru). The error names the sweep file's key, kv_offloading_eviction_policy, so that a caller
// can prefix its section.
func CheckEviction(name string) error {
	switch name {
	case EvictionLRU, EvictionARC, "":
		return nil
	}
	return fmt.Errorf("kv_offloading_eviction_policy %q: want %s or %s", name, EvictionLRU, EvictionARC)
}

// newCPUTier returns an empty tier of capacity blocks that evicts by policy (lru or arc).
func newCPUTier(policy string, capacity int) (cpuTier, error) {
	if err := CheckEviction(policy); err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	if policy == EvictionARC {
		return newARCTier(capacity), nil
	}
	return newLRUTier(capacity), nil
}

// blockMap is the blocks a tier holds, by hash, each the value (*cpuBlock) of an element of
// one of the tier's lists, and the tier's capacity in blocks. Its methods are the rules every
// eviction policy shares: what is a hit, what a load reads, pinning and completing stores.
type blockMap struct {
	capacity int // blocks
	blocks   map[uint64]*list.Element
}

// cpuBlock is one held block: its hash, its reference count (-1: not ready, 0: free, > 0:
// pinned by loads) and, under ARC, whether it is in T2 and the store that protects it from
// eviction (arcTier.prepareStore's stamp); LRU leaves both zero.
type cpuBlock struct {
	hash    uint64
	ref     int32
	inT2    bool
	protect uint64
}

func newBlockMap(capacity int) blockMap {
	return blockMap{capacity: capacity, blocks: make(map[uint64]*list.Element)}
}

// len returns the blocks the tier holds, ready or not.
func (m *blockMap) len() int { return len(m.blocks) }

// size returns the tier's capacity in blocks.
func (m *blockMap) size() int { return m.capacity }

// block returns the held block of hash h, or nil.
func (m *blockMap) block(h uint64) *cpuBlock {
	if e, ok := m.blocks[h]; ok {
		return e.Value.(*cpuBlock)
	}
	return nil
}

// lookup returns how many of hashes, from the first, are held and ready: the count stops at
// the first block missing or still being stored (lookup).
func (m *blockMap) lookup(hashes []uint64) int {
	for i, h := range hashes {
		if b := m.block(h); b == nil || b.ref < 0 {
			return i
		}
	}
	return len(hashes)
}

// loading reports whether a load reads any of hashes.
func (m *blockMap) loading(hashes []uint64) bool {
	for _, h := range hashes {
		if b := m.block(h); b != nil && b.ref > 0 {
			return true
		}
	}
	return false
}

// pin takes a reference on each of hashes, ready blocks a load is about to read
// (prepare_load); unpin drops it (complete_load).
func (m *blockMap) pin(hashes []uint64) { m.addRef(hashes, 1) }

func (m *blockMap) unpin(hashes []uint64) { m.addRef(hashes, -1) }

func (m *blockMap) addRef(hashes []uint64, d int32) {
	for _, h := range hashes {
		if b := m.block(h); b != nil {
			b.ref += d
		}
	}
}

// completeStore makes the blocks of hashes that are still being stored ready and returns
// them, the hashes a BlockStored event announces (complete_store).
func (m *blockMap) completeStore(hashes, stored []uint64) []uint64 {
	stored = stored[:0]
	for _, h := range hashes {
		if b := m.block(h); b != nil && b.ref < 0 {
			b.ref = 0
			stored = append(stored, h)
		}
	}
	return stored
}

// lruTier is the tier as vLLM's LRUOffloadingManager keeps it
// (vllm-project/vllm@3a04cf8f vllm/v1/kv_offload/lru_manager.py): offloaded blocks by hash
// in least-recently-used order.
type lruTier struct {
	blockMap
	order *list.List
}

var _ cpuTier = (*lruTier)(nil)

func newLRUTier(capacity int) *lruTier {
	return &lruTier{blockMap: newBlockMap(capacity), order: list.New()}
}

// touch makes the held blocks among hashes the most recently used, the first of them most
// recently of all (touch walks them last to first).
func (t *lruTier) touch(hashes []uint64) {
	for i := len(hashes) - 1; i >= 0; i-- {
		if e, ok := t.blocks[hashes[i]]; ok {
			t.order.MoveToBack(e)
		}
	}
}

// prepareStore reserves blocks for those of hashes the tier does not hold, evicting the least
// recently used free blocks to make room (prepare_store). It returns the hashes to store (in
// order) and those evicted, or ok false, changing nothing, when too few blocks are free to
// evict: the store is then skipped.
func (t *lruTier) prepareStore(hashes []uint64, toStore, evicted []uint64) ([]uint64, []uint64, bool) {
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

// clear empties the tier (the replica failed).
func (t *lruTier) clear() {
	t.order.Init()
	clear(t.blocks)
}
