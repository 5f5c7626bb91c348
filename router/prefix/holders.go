package prefix

import (
	"slices"

	"kvroute/internal/table"
)

// Holder is one entry of a block in a Holders index: an endpoint and a tag that tells apart
// entries the same endpoint can have for one block. llm-d's index keys its per-block LRU by
// PodEntry, whose Speculative flag makes a pod's speculative and confirmed entries two
// entries (llm-d/llm-d-router v0.10.0 pkg/kvcache/kvblock/index.go 174–185).
type Holder struct {
	Endpoint int32
	Tag      uint8
}

// Holders is a KV-event index: for each block hash, the entries of the endpoints whose
// engines report caching the block, least recently stored first. With a per-block bound it
// is llm-d-kv-cache's in-memory index, one LRU of at most perKey entries per block key
// (llm-d/llm-d-router v0.10.0 pkg/kvcache/kvblock/in_memory.go 36, 157–226); unbounded, it
// is the block-to-workers view Dynamo's KV router keeps.
//
// Blocks live in a slab addressed through an open-addressing table, each with its entries
// and the set of endpoints that have any, so LeadingRun costs one probe and a few bitset
// words per block. Each slot also remembers the slot of the block that followed it when last
// stored or walked (an engine stores a prompt's blocks in order): LeadingRun tries that slot
// first and, when it holds the next hash, skips the table probe, the walk's cache miss. A
// Holders is not safe for concurrent use, LeadingRun included (it updates those hints).
type Holders struct {
	perKey int
	byHash table.Map[int32] // block hash -> slot
	slots  []holderSlot
	free   int32   // first free slot, chained through next
	last   []int32 // per endpoint, 1 + the slot it last stored a block in (0: none)
}

type holderSlot struct { // what a walk reads (hash, succ, set.lo) comes first, in one cache line
	hash    uint64
	succ    int32 // a guess at the slot of the block that follows this one
	next    int32
	set     epSet    // endpoints with at least one entry; empty for a free slot
	entries []Holder // least recently stored first; empty for a free slot
	active  bool     // an ActiveBlocks sharing the slab holds the block active: kept without entries
}

// NewHolders returns an empty index keeping at most perKey entries per block, the least
// recently stored out first; perKey <= 0 keeps them all.
func NewHolders(perKey int) *Holders {
	return &Holders{perKey: max(perKey, 0), free: none}
}

// Len returns the number of blocks with at least one entry (or held active by an ActiveBlocks
// sharing the index).
func (x *Holders) Len() int { return x.byHash.Len() }

// Store records e as block h's most recently stored entry (moving it there if present);
// beyond perKey entries the least recent is dropped. A negative endpoint is ignored.
func (x *Holders) Store(h uint64, e Holder) {
	if e.Endpoint < 0 {
		return
	}
	i, ok := x.byHash.Get(h)
	if !ok {
		i = x.alloc(h)
	}
	x.follows(e.Endpoint, i)
	s := &x.slots[i]
	if k := slices.Index(s.entries, e); k >= 0 {
		s.entries = append(s.entries[:k], s.entries[k+1:]...)
	}
	s.entries = append(s.entries, e)
	s.set.add(e.Endpoint)
	if x.perKey > 0 && len(s.entries) > x.perKey {
		out := s.entries[0]
		s.entries = append(s.entries[:0], s.entries[1:]...)
		x.unmark(s, out.Endpoint)
	}
}

// Held reports whether block h has at least one entry.
func (x *Holders) Held(h uint64) bool {
	i, ok := x.byHash.Get(h)
	return ok && len(x.slots[i].entries) > 0
}

// Remove drops entry e of block h, if there.
func (x *Holders) Remove(h uint64, e Holder) {
	i, ok := x.byHash.Get(h)
	if !ok {
		return
	}
	s := &x.slots[i]
	k := slices.Index(s.entries, e)
	if k < 0 {
		return
	}
	s.entries = append(s.entries[:k], s.entries[k+1:]...)
	x.unmark(s, e.Endpoint)
	if len(s.entries) == 0 && !s.active {
		x.release(i)
	}
}

// RemoveEndpoint drops every entry of endpoint ep. It visits every block.
func (x *Holders) RemoveEndpoint(ep int32) {
	for i := range x.slots {
		s := &x.slots[i]
		if !s.set.has(ep) {
			continue
		}
		s.entries = slices.DeleteFunc(s.entries, func(e Holder) bool { return e.Endpoint == ep })
		s.set.remove(ep)
		if len(s.entries) == 0 && !s.active {
			x.release(int32(i))
		}
	}
}

// LeadingRun sets out[ep] to the number of leading blocks of hashes that endpoint ep has an
// entry for without a gap (the prefix its engine can reuse). Endpoints at or beyond len(out)
// are not reported. The walk stops at the first block no endpoint still in the run holds.
func (x *Holders) LeadingRun(hashes []uint64, out []int) {
	prev := none
	leadingRun(hashes, nil, out, func(h uint64) *epSet {
		i := x.next(prev, h)
		if i == none {
			return nil
		}
		prev = i
		return &x.slots[i].set
	})
}

// next returns the slot of block h, which follows the block in slot prev (none: h is the
// first block walked), or none for an unknown block. It tries prev's successor guess before
// the table, and corrects the guess.
func (x *Holders) next(prev int32, h uint64) int32 {
	if prev != none {
		if g := x.slots[prev].succ; x.slots[g].hash == h && !x.slots[g].set.empty() { // a live slot of h is h's
			return g
		}
	}
	i, ok := x.byHash.Get(h)
	if !ok {
		return none
	}
	if prev != none {
		x.slots[prev].succ = i
	}
	return i
}

// follows records that endpoint ep stored a block in slot i, after the one it stored before:
// the guess at that block's successor.
func (x *Holders) follows(ep, i int32) {
	for len(x.last) <= int(ep) {
		x.last = append(x.last, 0)
	}
	if p := x.last[ep] - 1; p >= 0 && p != i && int(p) < len(x.slots) {
		x.slots[p].succ = i
	}
	x.last[ep] = i + 1
}

// unmark takes ep out of s's endpoint set unless another of its entries remains.
func (x *Holders) unmark(s *holderSlot, ep int32) {
	for _, e := range s.entries {
		if e.Endpoint == ep {
			return
		}
	}
	s.set.remove(ep)
}

// alloc returns a slot for a new block h, reusing freed slots and their allocations.
func (x *Holders) alloc(h uint64) int32 {
	var i int32
	if x.free != none {
		i = x.free
		x.free = x.slots[i].next
	} else {
		x.slots = append(x.slots, holderSlot{})
		i = int32(len(x.slots) - 1)
	}
	x.slots[i].hash = h
	x.byHash.Set(h, i)
	return i
}

// indexed reports whether slot i is block h's: in use (with entries, or active) and holding h.
func (x *Holders) indexed(i int32, h uint64) bool {
	s := &x.slots[i]
	return s.hash == h && (len(s.entries) > 0 || s.active)
}

// slotFor returns block h's slot, allocating one without entries when h is new.
func (x *Holders) slotFor(h uint64) int32 {
	if i, ok := x.byHash.Get(h); ok {
		return i
	}
	return x.alloc(h)
}

// release frees slot i, whose block has no entry left and is not held active.
func (x *Holders) release(i int32) {
	s := &x.slots[i]
	x.byHash.Delete(s.hash)
	s.set.reset()
	s.entries = s.entries[:0]
	s.next = x.free
	x.free = i
}

// WeightedRun sets out[ep], for each endpoint below len(out), to the sum over the first
// run[ep] blocks of hashes (its leading run, as LeadingRun reports it) of the largest
// weight(tag) among ep's entries for the block: a block held in several tiers counts at its
// best tier's weight.
func (x *Holders) WeightedRun(hashes []uint64, run []int, weight func(tag uint8) float64, out []float64) {
	clear(out)
	longest := 0
	for ep := range min(len(run), len(out)) {
		longest = max(longest, run[ep])
	}
	for i, h := range hashes[:min(longest, len(hashes))] {
		s, ok := x.byHash.Get(h)
		if !ok {
			return
		}
		entries := x.slots[s].entries
		for k, e := range entries {
			ep := int(e.Endpoint)
			if ep >= len(out) || ep >= len(run) || run[ep] <= i || slices.ContainsFunc(entries[:k], func(o Holder) bool { return o.Endpoint == e.Endpoint }) {
				continue // not in the run here, or counted at its first entry
			}
			best := weight(e.Tag)
			for _, o := range entries[k+1:] {
				if o.Endpoint == e.Endpoint {
					best = max(best, weight(o.Tag))
				}
			}
			out[ep] += best
		}
	}
}

// Holds reports whether endpoint ep has an entry for block h.
func (x *Holders) Holds(h uint64, ep int32) bool {
	i, ok := x.byHash.Get(h)
	return ok && x.slots[i].set.has(ep)
}
