package workloads

// Tokenizer turns text into token ids. The cmd layer injects the project's real tokenizer
// (tiktoken) with WithTokenizer; workloads cannot import it.
type Tokenizer interface {
	// Encode returns the token ids of text. It must be deterministic.
	Encode(text string) []int32
}

// ChunkTokenizer is a deterministic stand-in for a BPE tokenizer: it cuts text into chunks of
// ChunkBytes bytes (the last one shorter) and maps each chunk to a 31-bit FNV-1a hash. With
// 4-byte chunks it counts about as many tokens as a BPE tokenizer does for English text, and
// texts with a common prefix share the ids of the whole chunks inside it.
type ChunkTokenizer struct {
	// ChunkBytes is the number of bytes per token; 0 or less means 4.
	ChunkBytes int
}

// DefaultTokenizer returns the tokenizer a stream uses unless WithTokenizer replaces it:
// a ChunkTokenizer with 4-byte chunks.
func DefaultTokenizer() Tokenizer { return ChunkTokenizer{ChunkBytes: 4} }

// Encode returns the ids of text's chunks.
func (t ChunkTokenizer) Encode(text string) []int32 {
	n := t.ChunkBytes
	if n <= 0 {
		n = 4
	}
	ids := make([]int32, 0, (len(text)+n-1)/n)
	for i := 0; i < len(text); i += n {
		h := uint32(2166136261) // FNV-1a offset basis
		for _, b := range []byte(text[i:min(i+n, len(text))]) {
			h = (h ^ uint32(b)) * 16777619
		}
		ids = append(ids, int32(h&0x7fffffff))
	}
	return ids
}
