package engine

import (
	"kvroute/blockhash"
	"kvroute/sim"
)

// Request is one generation request submitted to a replica.
type Request struct {
	// ID identifies the request in results.
	ID string
	// Prompt holds the prompt's token ids.
	Prompt []int32
	// OutputTokens is how many tokens to generate (ignore_eos), at least 1.
	OutputTokens int
	// Answer, when not nil, holds the token ids the replica generates (at least OutputTokens
	// of them are used), so the blocks a conversation's next turn re-sends are cached. When
	// nil, generated tokens are unique and their blocks are never hit.
	Answer []int32
	// Salt seeds the first block's hash: model and LoRA adapter, so different adapters never
	// share cache.
	Salt uint64
	// PD is the request's part in a disaggregated fleet (pd.go); PDNone runs it whole.
	PD PDRole
	// Tag is carried unchanged to the hooks, for the caller's bookkeeping.
	Tag any
}

// Status is how a request ended.
type Status uint8

// The terminal states of a request.
const (
	Completed Status = iota + 1
	// Rejected: the request can never fit in the replica's KV cache.
	Rejected
	// Aborted: the replica failed while the request was queued or running.
	Aborted
)

// String names the status.
func (s Status) String() string {
	switch s {
	case Completed:
		return "completed"
	case Rejected:
		return "rejected"
	case Aborted:
		return "aborted"
	}
	return "unknown"
}

// Result describes a request that ended.
type Result struct {
	Request *Request
	Status  Status
	// Arrival, FirstToken and Finish are when the replica received the request, emitted its
	// first token (0 if it never did) and ended it.
	Arrival, FirstToken, Finish sim.Time
	// Scheduled is when the request was first scheduled (vLLM's scheduled_ts: the end of its
	// queue time, the start of its prefill); Arrival when it never was.
	Scheduled sim.Time
	// PromptTokens is the prompt length; CachedTokens the prefix-cache hit the first time the
	// request was scheduled (vLLM's usage.prompt_tokens_details.cached_tokens), the GPU's
	// and the CPU tier's together, and CPUCachedTokens the part loaded from the CPU tier.
	PromptTokens, CachedTokens, CPUCachedTokens int
	// RemoteTokens is, for a decode leg (PDDecode), the prompt tokens whose KV it read from
	// the prefill replica (counted in CachedTokens too, as vLLM counts them); 0 otherwise.
	RemoteTokens int
	// OutputTokens is the number of tokens generated.
	OutputTokens int
	// Preemptions counts how often the request was preempted (by recompute).
	Preemptions int
}

// seq is the replica's state for one request. The fields read every step a request is
// handled on its own come first, in the object's first two cache lines (192 bytes, a size
// class whose objects start on a cache line).
type seq struct {
	computed  int   // tokens whose KV is computed
	generated int   // output tokens emitted
	scheduled int   // tokens scheduled in the current step
	reg       int   // leading blocks whose hashes were offered to the cache
	promptLen int   // len(req.Prompt)
	outputLen int   // req.OutputTokens
	knownLen  int   // len(req.Prompt) + len(req.Answer): the tokens known in advance
	t0        int64 // the replica's tick when a lazy decoder's counts were last brought up to date

	blocks     []int32  // block table
	hashes     []uint64 // hashes of the full blocks known so far (prompt, then answer)
	hashable   int      // full blocks whose tokens are known; -1 until the first unknown token
	lazy       bool     // a lazy decoder (lazy.go): computed and generated are as of step t0
	aborted    bool     // Abort was called while it ran: it ends with the step in flight
	private    bool     // its blocks past the Answer are not cached yet (catchUp)
	cachedOnce bool     // CachedTokens has been recorded

	req         *Request
	arrival     sim.Time
	firstToken  sim.Time
	scheduledAt sim.Time // when cachedOnce was set: first scheduled
	cached      int
	preemptions int
	nonce       uint64 // seeds the generated tokens beyond the Answer (Semantics.HashOutput)
	offNext     int32  // the next offloaded block to store in the CPU tier (offload.go)
	cpuHit      int32  // tokens loaded from the CPU tier the first time it was scheduled
	load        uint8  // loadNone, loadInFlight or loadDone
	noLoad      bool   // a load timed out: it recomputes instead
	pd          uint8  // a decode leg's read: 0 (not one), pdUnread, pdReading or pdRead (pd.go)
	_           [1]byte
	remote      int32 // tokens a decode leg read from its prefill replica
}

// catchUp caches the full blocks of s that hold generated tokens past its Answer, which
// Semantics.HashOutput caches as they fill, just before s releases its blocks.
//
// No other request can hit those blocks (their tokens stand for s's own output), and while s
// holds them no one can evict them, so when no one hears KV events, caching them as they fill
// and caching them when s lets them go leave the cache in the same state from then on: the
// blocks reach the free queue hashed, and s finds them again if it was preempted. Deferring
// spares a decoding request a step handled on its own each time a block fills.
func (r *Replica) catchUp(s *seq) {
	if !s.private {
		return
	}
	s.private, s.hashable = false, -1
	s.knownLen = max(s.knownLen, s.promptLen+s.outputLen)
	r.register(s, r.fullBlocks(s.computed))
}

// park stands in for catchUp when s leaves for good: the blocks catchUp would cache can
// never be hit, by s or any other request, and no one hears their KV events, so all that
// caching them changes is where they join the free queue; parking keeps that.
func (r *Replica) park(s *seq) {
	if !s.private {
		return
	}
	s.private = false
	full := min(r.fullBlocks(s.computed), len(s.blocks))
	for j := s.reg; j < full; j++ {
		r.pool.park(s.blocks[j])
	}
}

// numTokens is the prompt plus the tokens generated so far.
func (s *seq) numTokens() int { return s.promptLen + s.generated }

// hashUpTo extends s's block hashes to cover its first n full blocks when their tokens are
// known (prompt tokens always; generated ones only with an Answer). It returns how many
// full-block hashes are available.
//
// The first call hashes every block s can ever fill with known tokens, taking what it can
// from the memo: reading the prompt and the answer once, in order, costs far less than
// reading an answer block from cold memory each time decoding fills one.
func (r *Replica) hashUpTo(s *seq, n int) int {
	if s.hashable >= 0 && n > s.hashable {
		n = s.hashable
	}
	if len(s.hashes) >= n {
		return n
	}
	if s.hashes == nil {
		known := r.fullBlocks(s.knownLen)
		s.hashes = r.memo.takeHashes(known)
		r.hashBlocks(s, min(known, r.fullBlocks(s.promptLen+s.outputLen)))
	}
	return r.hashBlocks(s, n)
}

// hashBlocks extends s's hashes up to its first n full blocks, or up to its first block with
// an unknown token, and returns how many are available.
func (r *Replica) hashBlocks(s *seq, n int) int {
	for j := len(s.hashes); j < n; j++ {
		if run := r.knownRun(s, j, n); len(run) > 0 {
			s.hashes = blockhash.AppendChain(s.hashes, s.hashes[j-1], run, r.bs)
			j = len(s.hashes) - 1
			continue
		}
		block, ok := r.blockTokens(s, j, &r.scratch)
		if !ok {
			s.hashable = j // generated tokens without an Answer are never known
			return j
		}
		if j == 0 {
			s.hashes = append(s.hashes, BlockHash(s.req.Salt, block))
			r.memo.reuse(s, r.bs)
			j = len(s.hashes) - 1
			continue
		}
		s.hashes = append(s.hashes, BlockHash(s.hashes[j-1], block))
	}
	return n
}

// knownRun returns the tokens of s's full blocks j onwards, short of block n, that lie wholly
// in the prompt or wholly in the Answer, for hashing in one chain; none for block 0, whose
// hash the memo may extend.
func (r *Replica) knownRun(s *seq, j, n int) []int32 {
	if j == 0 {
		return nil
	}
	prompt, answer := s.req.Prompt, s.req.Answer
	if lp := len(prompt); (j+1)*r.bs <= lp {
		return prompt[j*r.bs : min(n, r.fullBlocks(lp))*r.bs]
	} else if j*r.bs >= lp && (j+1)*r.bs <= lp+len(answer) {
		return answer[j*r.bs-lp : min(n, r.fullBlocks(lp+len(answer)))*r.bs-lp]
	}
	return nil
}

// blockTokens returns full block j's tokens: the prompt's, the Answer's, and past the Answer
// the generated tokens the release hashes (OutputToken), built in *buf when the block is not
// a slice of the prompt or of the Answer. It is false when a token of the block is not known.
func (r *Replica) blockTokens(s *seq, j int, buf *[]int32) ([]int32, bool) {
	lo, hi := j*r.bs, (j+1)*r.bs
	prompt, answer := s.req.Prompt, s.req.Answer
	switch {
	case hi <= len(prompt):
		return prompt[lo:hi], true
	case lo >= len(prompt) && hi <= len(prompt)+len(answer):
		return answer[lo-len(prompt) : hi-len(prompt)], true
	case hi <= len(prompt)+len(answer):
	case r.sem.HashOutput && !s.private && hi <= s.promptLen+s.outputLen:
	default:
		return nil, false
	}
	b := append((*buf)[:0], prompt[min(lo, len(prompt)):]...)
	b = append(b, answer[min(max(lo-len(prompt), 0), len(answer)):min(hi-len(prompt), len(answer))]...)
	for i := lo + len(b); i < hi; i++ {
		b = append(b, OutputToken(s.nonce, i))
	}
	*buf = b
	return b, true
}

// blockOf returns full block j's tokens (in r.kvTokens, valid until the next call) and its
// parent's hash, for a BlockStored event.
func (r *Replica) blockOf(s *seq, j int) ([]int32, uint64, bool) {
	tokens, _ := r.blockTokens(s, j, &r.kvTokens) // a cached block's tokens are known
	if j == 0 {
		return tokens, 0, false
	}
	return tokens, s.hashes[j-1], true
}

// maxSpareSeqs bounds Replica.spare.
const maxSpareSeqs = 64

// newSeq returns a request state for Submit to fill: a spare one when there is one, whose
// block table's array holds blocks blocks when one does, so that the array is reused too.
func (r *Replica) newSeq(blocks int) *seq {
	k := len(r.spare) - 1
	if k < 0 {
		return new(seq)
	}
	i := k
	for i > 0 && cap(r.spare[i].blocks) < blocks {
		i--
	}
	s := r.spare[i]
	r.spare[i], r.spare[k] = r.spare[k], nil
	r.spare = r.spare[:k]
	return s
}

// recycle keeps ended request s, which holds no blocks and which nothing refers to once its
// Done hook has returned, for newSeq. Its hashes go back to the memo unless the memo kept them.
func (r *Replica) recycle(s *seq, memoKept bool) {
	if !memoKept {
		r.memo.release(s.hashes)
	}
	s.hashes, s.req = nil, nil
	if len(r.spare) < maxSpareSeqs {
		r.spare = append(r.spare, s)
	}
}
