package prefix

// ActiveBlocks counts the distinct KV blocks each endpoint's active requests hold: a request
// adds its prompt's blocks on its endpoint and releases them when it ends, and a block that
// several requests on one endpoint share counts once there. It is the block accounting of
// Dynamo's KV router (ai-dynamo/dynamo lib/kv-router/src/sequences/prompt_registry.rs,
// potential_decode_blocks), which kv-router reads for each worker's decode blocks.
//
// Blocks live in a slab addressed through an open-addressing table. Add returns a handle per
// block (its slot, which cannot be freed while the request holds it), so Release costs no
// lookup, and takes the slots Shared found for the same hashes, so the blocks a decision has
// just looked up are not looked up again. The first endpoint holding a block keeps its count
// in the slot itself. Each slot remembers the slot of the block that followed it when last
// added or walked, which Shared tries before the table (see Holders). An ActiveBlocks is not
// safe for concurrent use, Shared included.
type ActiveBlocks struct {
	byHash   table // block hash -> slot
	slots    []activeSlot
	free     int32        // first free slot, chained through next
	distinct []int        // per endpoint
	spare    [][]blockRef // freed slots' lists of further holders, for reuse
}

type activeSlot struct { // what the walks read (hash, succ, ref0, set.lo) comes first
	hash uint64
	succ int32 // a guess at the slot of the block that follows this one
	next int32
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

// NewActiveBlocks returns an empty account.
func NewActiveBlocks() *ActiveBlocks { return &ActiveBlocks{free: none} }

// Distinct returns how many distinct blocks endpoint ep's active requests hold.
func (a *ActiveBlocks) Distinct(ep int32) int {
	if ep < 0 || int(ep) >= len(a.distinct) {
		return 0
	}
	return a.distinct[ep]
}

// Len returns the number of distinct blocks held on any endpoint.
func (a *ActiveBlocks) Len() int { return a.byHash.len() }

// Add records that a request on endpoint ep (>= 0) holds hashes, and appends to handles one
// handle per hash, for Release. A hash repeated in hashes is held once per occurrence.
// found[j], when given, is the slot Shared found for hashes[j]; Add checks that it still
// holds that block before using it, and looks the block up otherwise.
func (a *ActiveBlocks) Add(hashes []uint64, ep int32, found, handles []int32) []int32 {
	for len(a.distinct) <= int(ep) {
		a.distinct = append(a.distinct, 0)
	}
	prev := none
	for j, h := range hashes {
		i := none
		if j < len(found) && a.live(found[j], h) {
			i = found[j]
		}
		if i == none {
			var ok bool
			if i, ok = a.byHash.get(h); !ok {
				i = a.alloc(h)
			}
		}
		if prev != none {
			a.slots[prev].succ = i
		}
		prev = i
		s := &a.slots[i]
		switch {
		case !s.set.add(ep):
			s.ref(ep).n++
		case s.ref0.n == 0:
			s.ref0 = blockRef{ep, 1}
			a.distinct[ep]++
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
		s := &a.slots[i]
		r := s.ref(ep)
		if r.n--; r.n > 0 {
			continue
		}
		s.drop(r)
		s.set.remove(ep)
		a.distinct[ep]--
		if s.ref0.n == 0 {
			a.release(i)
		}
	}
}

// Shared sets out[ep] to how many of hashes endpoint ep holds active, walking hashes in order
// and stopping at the first block no endpoint holds (a request holds its whole chain, so no
// later block of the chain can be held). Endpoints at or beyond len(out) are not reported.
// It appends to found the slot of each block walked, for Add.
func (a *ActiveBlocks) Shared(hashes []uint64, out []int, found []int32) []int32 {
	clear(out)
	words := wordsFor(len(out))
	prev := none
	for _, h := range hashes {
		i := none
		if prev != none && a.live(a.slots[prev].succ, h) {
			i = a.slots[prev].succ
		} else {
			var ok bool
			if i, ok = a.byHash.get(h); !ok {
				return found
			}
			if prev != none {
				a.slots[prev].succ = i
			}
		}
		prev = i
		found = append(found, i)
		s := &a.slots[i]
		for w := range min(words, s.set.words()) {
			addEach(out, w, s.set.word(w)&lowMask(w, len(out)), 1)
		}
	}
	return found
}

// live reports whether slot i holds block h: a live slot of h is h's (the table maps a hash
// to one slot), while a freed slot keeps the hash it had.
func (a *ActiveBlocks) live(i int32, h uint64) bool {
	s := &a.slots[i]
	return s.hash == h && s.ref0.n > 0
}

// alloc returns a slot for a new block h, reusing freed slots and their allocations.
func (a *ActiveBlocks) alloc(h uint64) int32 {
	var i int32
	if a.free != none {
		i = a.free
		a.free = a.slots[i].next
	} else {
		a.slots = append(a.slots, activeSlot{})
		i = int32(len(a.slots) - 1)
	}
	a.slots[i].hash = h
	a.byHash.set(h, i)
	return i
}

// release frees slot i, which no request holds any more.
func (a *ActiveBlocks) release(i int32) {
	s := &a.slots[i]
	a.byHash.del(s.hash)
	s.set.reset()
	if cap(s.more) > 0 { // kept for any block's second holder, not only this slot's next block
		a.spare = append(a.spare, s.more[:0])
		s.more = nil
	}
	s.next = a.free
	a.free = i
}
