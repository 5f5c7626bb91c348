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
	scheduled   int // tokens scheduled in the current step
	reg         int // leading blocks whose hashes were offered to the cache
	hashable    int // full blocks whose tokens are known; -1 until the first unknown token
}

// numTokens is the prompt plus the tokens generated so far.
func (s *seq) numTokens() int { return len(s.req.Prompt) + s.generated }

// token returns token i of the sequence (prompt, then generated), and whether it is known.
func (s *seq) token(i int) (int32, bool) {
	if i < len(s.req.Prompt) {
		return s.req.Prompt[i], true
	}
	j := i - len(s.req.Prompt)
	if j < len(s.req.Answer) {
		return s.req.Answer[j], true
	}
	return 0, false
}

// hashUpTo extends the block hashes to cover the first n full blocks when their tokens are
// known (prompt tokens always; generated ones only with an Answer). It returns how many
// full-block hashes are available.
func (s *seq) hashUpTo(n, blockSize int, scratch *[]int32) int {
	if s.hashable >= 0 && n > s.hashable {
		n = s.hashable
	}
	for len(s.hashes) < n {
		j := len(s.hashes)
		buf := (*scratch)[:0]
		for i := j * blockSize; i < (j+1)*blockSize; i++ {
			t, ok := s.token(i)
			if !ok {
				*scratch = buf
				s.hashable = len(s.hashes) // generated tokens without an Answer are never known
				return len(s.hashes)
			}
			buf = append(buf, t)
		}
		*scratch = buf
		parent := s.req.Salt
		if j > 0 {
			parent = s.hashes[j-1]
		}
		s.hashes = append(s.hashes, BlockHash(parent, buf))
	}
	return n
}
