package engine

import "unsafe"

// HashMemo remembers the block hashes of recently completed requests, so that a request whose
// prompt starts with an earlier request's tokens (the next turn of a conversation re-sends the
// whole history) takes those hashes instead of hashing the history again. A hash is reused
// only for a block whose tokens are compared equal, so the hashes are exactly those hashing
// would give, and a memo changes nothing but speed. It is direct-mapped by the first block's
// hash and holds a constant number of requests, whatever the length of the run.
//
// Replicas on one kernel may share a memo (Config.Memo), so that a conversation's next turn
// finds its history's hashes whichever replica it lands on; a memo is not safe for
// concurrent use.
type HashMemo struct {
	slots []memoEntry
	// spare holds hash arrays no one reads any more (their entries were overwritten, or
	// their requests never entered the memo), for the next requests to fill (takeHashes).
	spare [][]uint64
}

// maxSpare bounds HashMemo.spare.
const maxSpare = 64

// memoSlots is the number of requests a replica's own memo holds; a power of two.
const memoSlots = 256

// NewHashMemo returns a memo holding about n requests (n is rounded up to a power of two).
func NewHashMemo(n int) *HashMemo {
	size := memoSlots
	for size < n {
		size *= 2
	}
	return &HashMemo{slots: make([]memoEntry, size)}
}

type memoEntry struct {
	first  uint64 // hashes[0]
	salt   uint64
	bs     int // the block size the hashes are of
	prompt []int32
	answer []int32  // the generated tokens known
	hashes []uint64 // hashes of the full blocks of prompt, then answer
}

// remember records completed request s. The memo keeps s.hashes (and stops reading the
// hashes of the entry it replaces: they become spare). It reports whether it kept them.
func (m *HashMemo) remember(s *seq, blockSize int) bool {
	if len(s.hashes) == 0 {
		return false
	}
	ans := s.req.Answer[:min(len(s.req.Answer), max(s.generated, 0))]
	e := &m.slots[s.hashes[0]&uint64(len(m.slots)-1)]
	m.release(e.hashes)
	*e = memoEntry{
		first: s.hashes[0], salt: s.req.Salt, bs: blockSize, prompt: s.req.Prompt, answer: ans, hashes: s.hashes,
	}
	return true
}

// release hands back a hash array that no one reads any more.
func (m *HashMemo) release(h []uint64) {
	if cap(h) > 0 && len(m.spare) < maxSpare {
		m.spare = append(m.spare, h[:0])
	}
}

// takeHashes returns an empty hash array with room for n hashes, a spare one when one is
// large enough.
func (m *HashMemo) takeHashes(n int) []uint64 {
	for i := len(m.spare) - 1; i >= 0; i-- {
		if h := m.spare[i]; cap(h) >= n {
			k := len(m.spare) - 1
			m.spare[i], m.spare[k] = m.spare[k], nil
			m.spare = m.spare[:k]
			return h
		}
	}
	return make([]uint64, 0, n)
}

// reuse appends to s.hashes, which holds only the first block's hash, the hashes a remembered
// request shares with s's prompt.
func (m *HashMemo) reuse(s *seq, blockSize int) {
	e := &m.slots[s.hashes[0]&uint64(len(m.slots)-1)]
	if e.first != s.hashes[0] || e.salt != s.req.Salt || e.bs != blockSize || len(e.hashes) < 2 {
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
