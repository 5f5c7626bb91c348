package prefix

import "slices"

// ActiveBlocks counts the distinct KV blocks each endpoint's active requests hold: a request
// adds its prompt's blocks on its endpoint and releases them when it ends, and a block that
// several requests on one endpoint share counts once there. It is the block accounting of
// Dynamo's KV router (ai-dynamo/dynamo lib/kv-router/src/sequences/prompt_registry.rs,
// potential_decode_blocks), which kv-router reads for each worker's decode blocks.
//
// Its blocks live in the slab and table of a Holders index, which kv-router shares with its
// KV-event view (NewActiveBlocksIn): a prompt's blocks are usually both cached and active, so
// they are looked up, and added and removed from the table, once for both, and a block that
// stops being active while an engine still caches it stays indexed. Add returns a handle per
// block (its slot, kept while the request holds it), so Release costs no lookup, and takes
// the slots Shared found for the same hashes. The first endpoint holding a block keeps its
// count in the slot itself. Each slot remembers the slot of the block that followed it when
// last added or walked, which Shared tries before the table (see Holders). An ActiveBlocks is
// not safe for concurrent use, Shared included, nor beside a use of its Holders.
type ActiveBlocks struct {
	x        *Holders     // the slab and table the blocks live in
	act      []activeSlot // per slot of x
	n        int          // blocks held active
	distinct []int        // per endpoint
	spare    [][]blockRef // released blocks' lists of further holders, for reuse
}

type activeSlot struct { // what the walks read (succ, ref0, set.lo) comes first
	succ int32      // a guess at the slot of the block that follows this one
	ref0 blockRef   // one holding endpoint and its requests holding the block; n == 0: none
	set  epSet      // endpoints holding the block active
	more []blockRef // the other holding endpoints
}

type blockRef struct{ ep, n int32 }

// ref returns ep's count in s, which must hold ep.
func (s *activeSlot) ref(ep int32) *blockRef {
	if s.ref0.ep == ep {
		return &s.ref0
	}
	for k := range s.more {
		if s.more[k].ep == ep {
			return &s.more[k]
		}
	}
	panic("prefix: ActiveBlocks: endpoint does not hold the block")
}

// drop removes ep's count r (now zero) from s.
func (s *activeSlot) drop(r *blockRef) {
	last := len(s.more) - 1
	switch {
	case r != &s.ref0:
		*r = s.more[last]
		s.more = s.more[:last]
	case last >= 0:
		s.ref0 = s.more[last]
		s.more = s.more[:last]
	default:
		s.ref0 = blockRef{}
	}
}

// NewActiveBlocks returns an empty account with an index of its own.
func NewActiveBlocks() *ActiveBlocks { return NewActiveBlocksIn(NewHolders(0)) }

// NewActiveBlocksIn returns an empty account whose blocks live in x's slab and table.
func NewActiveBlocksIn(x *Holders) *ActiveBlocks { return &ActiveBlocks{x: x} }

// sync extends the per-slot state to the slots x has allocated.
func (a *ActiveBlocks) sync() {
	if n := len(a.x.slots); len(a.act) < n {
		a.act = slices.Grow(a.act, n-len(a.act))[:n] // never shrunk: the new elements are zero
	}
}

// Distinct returns how many distinct blocks endpoint ep's active requests hold.
func (a *ActiveBlocks) Distinct(ep int32) int {
	if ep < 0 || int(ep) >= len(a.distinct) {
		return 0
	}
	return a.distinct[ep]
}

// Len returns the number of distinct blocks held on any endpoint.
func (a *ActiveBlocks) Len() int { return a.n }

// Add records that a request on endpoint ep (>= 0) holds hashes, and appends to handles one
// handle per hash, for Release. A hash repeated in hashes is held once per occurrence.
// found[j], when given, is the slot Shared found for hashes[j]; Add checks that it still
// holds that block before using it, and looks the block up otherwise.
func (a *ActiveBlocks) Add(hashes []uint64, ep int32, found, handles []int32) []int32 {
	for len(a.distinct) <= int(ep) {
		a.distinct = append(a.distinct, 0)
	}
	a.sync()
	prev := none
	for j, h := range hashes {
		i := none
		if j < len(found) && a.live(found[j], h) {
			i = found[j]
		}
		if i == none && prev != none { // the block that followed this one when last added, or stored
			if g := a.act[prev].succ; a.x.indexed(g, h) {
				i = g
			} else if g := a.x.slots[prev].succ; a.x.indexed(g, h) {
				i = g
			}
		}
		if i == none {
			i = a.x.slotFor(h)
			a.sync()
		}
		if prev != none {
			a.act[prev].succ = i
		}
		prev = i
		s := &a.act[i]
		switch {
		case !s.set.add(ep):
			s.ref(ep).n++
		case s.ref0.n == 0: // the block becomes active
			s.ref0 = blockRef{ep, 1}
			a.distinct[ep]++
			a.x.slots[i].active = true
			a.n++
		default:
			if cap(s.more) == 0 && len(a.spare) > 0 { // a freed slot's list, rather than a new one
				s.more, a.spare = a.spare[len(a.spare)-1], a.spare[:len(a.spare)-1]
			}
			s.more = append(s.more, blockRef{ep, 1})
			a.distinct[ep]++
		}
		handles = append(handles, i)
	}
	return handles
}

// Release releases what Add recorded for a request on ep with these handles.
func (a *ActiveBlocks) Release(handles []int32, ep int32) {
	for _, i := range handles {
		s := &a.act[i]
		r := s.ref(ep)
		if r.n--; r.n > 0 {
			continue
		}
		s.drop(r)
		s.set.remove(ep)
		a.distinct[ep]--
		if s.ref0.n == 0 {
			a.inactive(i)
		}
	}
}

// Shared sets out[ep] to how many of hashes endpoint ep holds active, walking hashes in order
// and stopping at the first block no endpoint holds (a request holds its whole chain, so no
// later block of the chain can be held). Endpoints at or beyond len(out) are not reported.
// It appends to found the slot of each block walked, for Add.
func (a *ActiveBlocks) Shared(hashes []uint64, out []int, found []int32) []int32 {
	clear(out)
	a.sync()
	words := wordsFor(len(out))
	prev := none
	for _, h := range hashes {
		i := none
		if prev != none && a.live(a.act[prev].succ, h) {
			i = a.act[prev].succ
		} else {
			var ok bool
			if i, ok = a.x.byHash.Get(h); !ok || a.act[i].ref0.n == 0 {
				return found
			}
			if prev != none {
				a.act[prev].succ = i
			}
		}
		prev = i
		found = append(found, i)
		s := &a.act[i]
		for w := range min(words, s.set.words()) {
			addEach(out, w, s.set.word(w)&lowMask(w, len(out)), 1)
		}
	}
	return found
}

// live reports whether slot i holds block h active: a live slot of h is h's (the table maps
// a hash to one slot), while a freed slot keeps the hash it had.
func (a *ActiveBlocks) live(i int32, h uint64) bool {
	return a.x.slots[i].hash == h && a.act[i].ref0.n > 0
}

// inactive ends slot i's active state, which no request holds any more, freeing the slot
// unless the index has entries for it.
func (a *ActiveBlocks) inactive(i int32) {
	s := &a.act[i]
	s.set.reset()
	if cap(s.more) > 0 { // kept for any block's second holder, not only this slot's next block
		a.spare = append(a.spare, s.more[:0])
		s.more = nil
	}
	a.n--
	hs := &a.x.slots[i]
	if hs.active = false; len(hs.entries) == 0 {
		a.x.release(i)
	}
}
