package engine

import "kvroute/sim"

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
	// PromptTokens is the prompt length; CachedTokens the prefix-cache hit the first time the
	// request was scheduled (vLLM's usage.prompt_tokens_details.cached_tokens).
	PromptTokens, CachedTokens int
	// OutputTokens is the number of tokens generated.
	OutputTokens int
	// Preemptions counts how often the request was preempted (by recompute).
	Preemptions int
}

// seq is the replica's state for one request.
type seq struct {
	req         *Request
	arrival     sim.Time
	firstToken  sim.Time
	blocks      []int32  // block table
	hashes      []uint64 // hashes of the full blocks known so far (prompt, then answer)
	computed    int      // tokens whose KV is computed
	generated   int      // output tokens emitted
	cachedOnce  bool     // CachedTokens has been recorded
	cached      int
	preemptions int
	scheduled   int   // tokens scheduled in the current step
	reg         int   // leading blocks whose hashes were offered to the cache
	hashable    int   // full blocks whose tokens are known; -1 until the first unknown token
	promptLen   int   // len(req.Prompt)
	outputLen   int   // req.OutputTokens
	knownLen    int   // len(req.Prompt) + len(req.Answer): the tokens known in advance
	lazy        bool  // a lazy decoder (lazy.go): computed and generated are as of step t0
	aborted     bool  // Abort was called while it ran: it ends with the step in flight
	t0          int64 // the replica's tick when a lazy decoder's counts were last brought up to date
}

// knownBlocks returns how many full blocks of the sequence have only known tokens.
func (s *seq) knownBlocks(blockSize int) int {
	return s.knownLen / blockSize
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
		known := s.knownBlocks(r.bs)
		s.hashes = make([]uint64, 0, known)
		r.hashBlocks(s, min(known, (s.promptLen+s.outputLen)/r.bs))
	}
	return r.hashBlocks(s, n)
}

// hashBlocks extends s's hashes up to its first n full blocks, or up to its first block with
// an unknown token, and returns how many are available.
func (r *Replica) hashBlocks(s *seq, n int) int {
	bs := r.bs
	prompt, answer := s.req.Prompt, s.req.Answer
	for j := len(s.hashes); j < n; j++ {
		lo, hi := j*bs, (j+1)*bs
		var block []int32
		switch {
		case hi <= len(prompt):
			block = prompt[lo:hi]
		case hi <= len(prompt)+len(answer):
			buf := append(r.scratch[:0], prompt[min(lo, len(prompt)):]...)
			block = append(buf, answer[max(lo-len(prompt), 0):hi-len(prompt)]...)
			r.scratch = block
		default:
			s.hashable = j // generated tokens without an Answer are never known
			return j
		}
		if j == 0 {
			s.hashes = append(s.hashes, BlockHash(s.req.Salt, block))
			r.memo.reuse(s, bs)
			j = len(s.hashes) - 1
			continue
		}
		s.hashes = append(s.hashes, BlockHash(s.hashes[j-1], block))
	}
	return n
}

// blockOf returns full block j's tokens (in r.kvTokens, valid until the next call) and its
// parent's hash, for a BlockStored event.
func (r *Replica) blockOf(s *seq, j int) ([]int32, uint64, bool) {
	lo, hi := j*r.bs, (j+1)*r.bs
	prompt := s.req.Prompt
	r.kvTokens = append(r.kvTokens[:0], prompt[min(lo, len(prompt)):min(hi, len(prompt))]...)
	if hi > len(prompt) {
		r.kvTokens = append(r.kvTokens, s.req.Answer[max(lo-len(prompt), 0):hi-len(prompt)]...)
	}
	if j == 0 {
		return r.kvTokens, 0, false
	}
	return r.kvTokens, s.hashes[j-1], true
}
