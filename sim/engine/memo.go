package engine

import "unsafe"

// hashMemo remembers the block hashes of recently completed requests, so that a request whose
// prompt starts with an earlier request's tokens (the next turn of a conversation re-sends the
// whole history) takes those hashes instead of hashing the history again. A hash is reused
// only for a block whose tokens are compared equal, so the hashes are exactly those hashing
// would give. The memo is direct-mapped by the first block's hash and holds memoSlots
// requests: a constant, whatever the length of the run.
type hashMemo struct {
	slots []memoEntry
}

// memoSlots is the number of requests a replica's memo holds; a power of two.
const memoSlots = 256

type memoEntry struct {
	first  uint64 // hashes[0]
	salt   uint64
	prompt []int32
	answer []int32  // the generated tokens known
	hashes []uint64 // hashes of the full blocks of prompt, then answer
}

// remember records completed request s.
func (m *hashMemo) remember(s *seq) {
	if len(s.hashes) == 0 {
		return
	}
	if m.slots == nil {
		m.slots = make([]memoEntry, memoSlots)
	}
	ans := s.req.Answer[:min(len(s.req.Answer), max(s.generated, 0))]
	m.slots[s.hashes[0]&(memoSlots-1)] = memoEntry{
		first: s.hashes[0], salt: s.req.Salt, prompt: s.req.Prompt, answer: ans, hashes: s.hashes,
	}
}

// reuse appends to s.hashes, which holds only the first block's hash, the hashes a remembered
// request shares with s's prompt.
func (m *hashMemo) reuse(s *seq, blockSize int) {
	if m.slots == nil {
		return
	}
	e := &m.slots[s.hashes[0]&(memoSlots-1)]
	if e.first != s.hashes[0] || e.salt != s.req.Salt || len(e.hashes) < 2 {
		return
	}
	p := s.req.Prompt
	n := commonPrefix(p, e.prompt)
	if n == len(e.prompt) {
		n += commonPrefix(p[n:], e.answer)
	}
	k := min(n/blockSize, len(e.hashes))
	if k > 1 {
		s.hashes = append(s.hashes, e.hashes[1:k]...)
	}
}

// commonPrefix returns the length of the longest common prefix of a and b. It compares by
// halves with memory equality, many tokens at a time, and at once when a and b share memory.
func commonPrefix(a, b []int32) int {
	n := min(len(a), len(b))
	if n == 0 {
		return 0
	}
	as := unsafe.String((*byte)(unsafe.Pointer(&a[0])), 4*n)
	bs := unsafe.String((*byte)(unsafe.Pointer(&b[0])), 4*n)
	if as == bs {
		return n
	}
	lo, hi := 0, n // a[:lo] == b[:lo] and a[:hi] != b[:hi]
	for hi-lo > 16 {
		mid := lo + (hi-lo)/2
		if as[4*lo:4*mid] == bs[4*lo:4*mid] {
			lo = mid
		} else {
			hi = mid
		}
	}
	for lo < hi && a[lo] == b[lo] {
		lo++
	}
	return lo
}
