package prefix

import "math/bits"

// epSet is a set of endpoints as a bitset. Endpoints 0..63, which covers
// most fleets, live inline; higher ones spill into more, whose word w holds
// endpoints 64(w+1) to 64(w+1)+63.
type epSet struct {
	lo   uint64
	more []uint64
}

// maxStackWords bounds the bitset words Match keeps on the stack: 16 words
// cover 1,024 endpoints. Larger fleets take a slower path.
const maxStackWords = 16

// word returns word w of the set (endpoints 64w to 64w+63).
func (s *epSet) word(w int) uint64 {
	if w == 0 {
		return s.lo
	}
	if w-1 < len(s.more) {
		return s.more[w-1]
	}
	return 0
}

// add inserts ep (>= 0) and reports whether it was absent.
func (s *epSet) add(ep int32) bool {
	w, bit := int(ep>>6), uint64(1)<<(ep&63)
	p := &s.lo
	if w > 0 {
		for len(s.more) < w {
			s.more = append(s.more, 0)
		}
		p = &s.more[w-1]
	}
	if *p&bit != 0 {
		return false
	}
	*p |= bit
	return true
}

// remove deletes ep and reports whether it was present.
func (s *epSet) remove(ep int32) bool {
	if !s.has(ep) {
		return false
	}
	bit := uint64(1) << (ep & 63)
	if w := int(ep >> 6); w == 0 {
		s.lo &^= bit
	} else {
		s.more[w-1] &^= bit
	}
	return true
}

// has reports whether ep is in the set.
func (s *epSet) has(ep int32) bool {
	return ep >= 0 && s.word(int(ep>>6))&(uint64(1)<<(ep&63)) != 0
}

// empty reports whether the set has no endpoint.
func (s *epSet) empty() bool {
	if s.lo != 0 {
		return false
	}
	for _, w := range s.more {
		if w != 0 {
			return false
		}
	}
	return true
}

// reset empties the set, keeping its allocation.
func (s *epSet) reset() {
	s.lo = 0
	s.more = s.more[:0]
}

// words returns how many words the set spans.
func (s *epSet) words() int { return 1 + len(s.more) }

// setEach stores v in out for every endpoint of word w that is in mask.
func setEach(out []int, w int, mask uint64, v int) {
	for mask != 0 {
		out[w*64+bits.TrailingZeros64(mask)] = v
		mask &= mask - 1
	}
}

// addEach adds v to out for every endpoint of word w that is in mask.
func addEach(out []int, w int, mask uint64, v int) {
	for mask != 0 {
		out[w*64+bits.TrailingZeros64(mask)] += v
		mask &= mask - 1
	}
}

// wordsFor returns how many bitset words cover endpoints 0..n-1.
func wordsFor(n int) int { return (n + 63) / 64 }

// lowMask returns the bits of word w that stand for endpoints below n.
func lowMask(w, n int) uint64 {
	switch rest := n - 64*w; {
	case rest <= 0:
		return 0
	case rest < 64:
		return uint64(1)<<rest - 1
	default:
		return ^uint64(0)
	}
}
