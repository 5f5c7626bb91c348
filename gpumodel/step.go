package gpumodel

// Chunk is one prefill chunk scheduled in a step.
type Chunk struct {
	// Tokens is the number of new prompt tokens computed in this step.
	Tokens int `json:"tokens" yaml:"tokens"`
	// Context is the number of tokens already in the KV cache that the chunk
	// attends to: prefix-cache hits plus earlier chunks of the same prompt.
	Context int `json:"context" yaml:"context"`
}

// Step describes the work of one scheduler step as aggregate sums, so that
// pricing it costs O(1) however many requests it holds. Build one with
// AddPrefill and AddDecode, or keep the sums incrementally. All fields are
// non-negative; a negative field is priced as zero.
type Step struct {
	// PrefillChunks is the number of prefill chunks.
	PrefillChunks int
	// PrefillTokens is Σ Chunk.Tokens, the new prompt tokens computed.
	PrefillTokens int64
	// PrefillContext is Σ Chunk.Context, the cached tokens the chunks read.
	PrefillContext int64
	// PrefillPairs is Σ PrefillPairs(Tokens, Context): the causal
	// query–key pairs prefill attention computes.
	PrefillPairs int64
	// DecodeSeqs is the number of sequences decoding one token each.
	DecodeSeqs int
	// DecodeContext is Σ over decoding sequences of the tokens already in
	// their KV cache (prompt plus generated so far).
	DecodeContext int64
}

// PrefillPairs returns the causal query–key pairs of a chunk of tokens new
// tokens after context cached ones: each new token i (from 1) attends to
// context + i keys, so the sum is tokens × context + tokens × (tokens + 1) / 2.
func PrefillPairs(tokens, context int) int64 {
	if tokens <= 0 {
		return 0
	}
	n, c := int64(tokens), int64(max(context, 0))
	return n*c + n*(n+1)/2
}

// AddPrefill adds a chunk of tokens new prompt tokens attending to context
// cached tokens. A chunk with no tokens is ignored.
func (s *Step) AddPrefill(tokens, context int) {
	if tokens <= 0 {
		return
	}
	s.PrefillChunks++
	s.PrefillTokens += int64(tokens)
	s.PrefillContext += int64(max(context, 0))
	s.PrefillPairs += PrefillPairs(tokens, context)
}

// AddDecode adds one sequence decoding a token after context cached tokens.
func (s *Step) AddDecode(context int) {
	s.DecodeSeqs++
	s.DecodeContext += int64(max(context, 0))
}

// NewStep returns the Step holding the given prefill chunks and one decoding
// sequence per entry of decodeContexts (each that sequence's context length).
func NewStep(chunks []Chunk, decodeContexts []int) Step {
	var s Step
	for _, c := range chunks {
		s.AddPrefill(c.Tokens, c.Context)
	}
	for _, c := range decodeContexts {
		s.AddDecode(c)
	}
	return s
}

// Tokens returns the tokens the step computes: prefill tokens plus one per
// decoding sequence.
func (s Step) Tokens() int64 {
	return max(s.PrefillTokens, 0) + int64(max(s.DecodeSeqs, 0))
}

// Requests returns the prefill chunks plus decoding sequences in the step.
func (s Step) Requests() int {
	return max(s.PrefillChunks, 0) + max(s.DecodeSeqs, 0)
}
