package prefix

import (
	"math/bits"
	"slices"
)

// entry is one block of an Index, stored in the index's hash table itself so that a lookup
// touches one slot: the endpoints holding the block and, for each, the position of its latest
// use in that endpoint's use queue. Endpoints 0..63 and the position of the lowest-ranked
// endpoint live inline; a block held by more endpoints, or by one beyond 63, spills into an
// overflow record. The zero entry is an empty set without one.
type entry struct {
	lo   uint64 // endpoints 0..63
	pos0 uint32 // queue position of the use by the endpoint of rank 0
	ov   int32  // 0: no overflow; 1 + i: overflow record Index.ov[i]
}

// overflow holds the rest of a block's endpoint set and positions.
type overflow struct {
	more []uint64 // word w holds endpoints 64(w+1)..64(w+1)+63
	pos  []uint32 // positions of the endpoints of rank 1, 2, …
}

// word returns word w of e's endpoint set.
func (x *Index) word(e *entry, w int) uint64 {
	if w == 0 {
		return e.lo
	}
	if e.ov > 0 {
		if more := x.ov[e.ov-1].more; w-1 < len(more) {
			return more[w-1]
		}
	}
	return 0
}

// spans returns how many of the first words words of e's endpoint set can be non-zero: one
// unless it has an overflow record.
func (x *Index) spans(e *entry, words int) int {
	if e.ov > 0 {
		return min(words, 1+len(x.ov[e.ov-1].more))
	}
	return min(words, 1)
}

// has reports whether ep holds e.
func (x *Index) has(e *entry, ep int32) bool {
	return x.word(e, int(ep>>6))&(uint64(1)<<(ep&63)) != 0
}

// rank returns how many of e's endpoints are below ep.
func (x *Index) rank(e *entry, ep int32) int {
	w := int(ep >> 6)
	r := bits.OnesCount64(x.word(e, w) & (uint64(1)<<(ep&63) - 1))
	if w > 0 {
		r += bits.OnesCount64(e.lo)
		for v := 1; v < w; v++ {
			r += bits.OnesCount64(x.word(e, v))
		}
	}
	return r
}

// pos returns where e's position for the endpoint of rank r is kept.
func (x *Index) pos(e *entry, r int) *uint32 {
	if r == 0 {
		return &e.pos0
	}
	return &x.ov[e.ov-1].pos[r-1]
}

// join adds ep, absent, to e's endpoints with position p.
func (x *Index) join(e *entry, ep int32, p uint32) {
	if e.lo == 0 && e.ov == 0 && ep < 64 {
		e.lo, e.pos0 = uint64(1)<<ep, p // the only endpoint
		return
	}
	if e.ov == 0 {
		e.ov = x.newOverflow()
	}
	o := &x.ov[e.ov-1]
	if w := int(ep >> 6); w == 0 {
		e.lo |= uint64(1) << ep
	} else {
		for len(o.more) < w {
			o.more = append(o.more, 0)
		}
		o.more[w-1] |= uint64(1) << (ep & 63)
	}
	switch r := x.rank(e, ep); {
	case x.size(e) == 1:
		e.pos0 = p
	case r == 0:
		o.pos = slices.Insert(o.pos, 0, e.pos0)
		e.pos0 = p
	default:
		o.pos = slices.Insert(o.pos, r-1, p)
	}
}

// leave removes ep, present, from e's endpoints and reports whether none is left.
func (x *Index) leave(e *entry, ep int32) bool {
	r := x.rank(e, ep)
	if w := int(ep >> 6); w == 0 {
		e.lo &^= uint64(1) << ep
	} else {
		x.ov[e.ov-1].more[w-1] &^= uint64(1) << (ep & 63)
	}
	if e.ov == 0 {
		return e.lo == 0
	}
	o := &x.ov[e.ov-1]
	if len(o.pos) == 0 { // ep was the only endpoint
		x.freeOverflow(e.ov)
		e.ov = 0
		return true
	}
	if r == 0 {
		e.pos0 = o.pos[0]
		r = 1
	}
	o.pos = slices.Delete(o.pos, r-1, r)
	return false
}

// size returns the number of e's endpoints.
func (x *Index) size(e *entry) int {
	n := bits.OnesCount64(e.lo)
	if e.ov > 0 {
		for _, w := range x.ov[e.ov-1].more {
			n += bits.OnesCount64(w)
		}
	}
	return n
}

// newOverflow returns the ov value of a new, empty overflow record.
func (x *Index) newOverflow() int32 {
	if k := len(x.freeOv); k > 0 {
		i := x.freeOv[k-1]
		x.freeOv = x.freeOv[:k-1]
		return i + 1
	}
	x.ov = append(x.ov, overflow{})
	return int32(len(x.ov))
}

func (x *Index) freeOverflow(ov int32) {
	o := &x.ov[ov-1]
	o.more, o.pos = o.more[:0], o.pos[:0]
	x.freeOv = append(x.freeOv, ov-1)
}
