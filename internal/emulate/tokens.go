package emulate

import (
	"strings"

	"kvroute/internal/openai"
	"kvroute/workloads"
)

// chunkBytes is the number of prompt bytes per token: about what a BPE tokenizer averages on
// English text, and what workloads.ChunkTokenizer uses, so both count the same tokens.
const chunkBytes = 4

// tokenize returns text's token ids. Text in the workloads' synthetic vocabulary (what
// cmd/loadgen sends for generated workloads: workloads.Words) gives back the very ids the
// workload drew, so a live prompt has the token count, and the blocks, the simulator gives
// it. Any other text is cut into 4-byte chunks, each hashed (FNV-1a, 31 bits) to an id, so the
// same text always gives the same ids and a shared text prefix gives a shared id prefix. An
// empty text is one token, as a real tokenizer's BOS token would be.
func tokenize(text string) []int32 {
	if text == "" {
		return []int32{0}
	}
	return appendText(make([]int32, 0, (len(text)+chunkBytes-1)/chunkBytes), text)
}

// appendText appends text's ids: its synthetic-vocabulary ids when it is such text,
// otherwise its 4-byte chunks.
func appendText(ids []int32, text string) []int32 {
	if w, err := workloads.ParseWords(text); err == nil && len(w) > 0 {
		return append(ids, w...)
	}
	return appendChunks(ids, text)
}

// appendChunks appends the ids of text's 4-byte chunks to ids: none for an empty text.
func appendChunks(ids []int32, text string) []int32 {
	for i := 0; i < len(text); i += chunkBytes {
		h := uint32(2166136261)
		for j := i; j < min(i+chunkBytes, len(text)); j++ {
			h = (h ^ uint32(text[j])) * 16777619
		}
		ids = append(ids, int32(h&0x7fffffff))
	}
	return ids
}

// tokenizeChat tokenizes chat messages as the simulator's workloads count a conversation:
// each message's content on its own (appendText; none for an empty content), concatenated,
// with no template tokens and no roles. A prompt therefore has exactly the token ids, and
// the count, the simulator gives the same request, and the prompt of a conversation's next
// turn (these messages, the answer as an assistant message, a new message) starts with this
// prompt followed by exactly the answer's tokens, as vLLM's would.
func tokenizeChat(msgs []openai.Message) []int32 {
	n := 0
	for _, m := range msgs {
		n += (len(m.Content) + chunkBytes - 1) / chunkBytes
	}
	ids := make([]int32, 0, n)
	for _, m := range msgs {
		ids = appendText(ids, m.Content)
	}
	return ids
}

// words is the vocabulary of generated text.
var words = [...]string{
	"the", "model", "routes", "a", "request", "to", "replica", "with", "warm", "cache",
	"and", "tokens", "flow", "back", "in", "order", "while", "queue", "grows", "slowly",
	"prefix", "blocks", "hit", "often", "so", "latency", "stays", "low", "for", "every",
	"tenant", "batch", "step", "decode", "prefill", "memory", "fills", "then", "evicts", "old",
	"answer", "is", "short", "but", "clear", "each", "word", "counts", "as", "one",
	"token", "here", "time", "moves", "on", "we", "measure", "throughput", "fairly", "under",
	"load", "now",
}

// promptSeed hashes a prompt's token ids (FNV-1a, 64 bits) into the seed of its answer.
func promptSeed(ids []int32) uint64 {
	h := uint64(14695981039346656037)
	for _, id := range ids {
		for s := 0; s < 32; s += 8 {
			h = (h ^ uint64(byte(id>>s))) * 1099511628211
		}
	}
	return h
}

// word returns the text of generated token i (from 0) of the answer seeded by seed: a word
// chosen by a splitmix64 hash, with a leading space after the first.
func word(seed uint64, i int) string {
	z := seed + uint64(i+1)*0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	z ^= z >> 31
	w := words[z%uint64(len(words))]
	if i == 0 {
		return w
	}
	return " " + w
}

// answer returns the text of generated tokens [from, to) of the answer seeded by seed.
func answer(seed uint64, from, to int) string {
	var b strings.Builder
	for i := from; i < to; i++ {
		b.WriteString(word(seed, i))
	}
	return b.String()
}

// chatAnswer returns the token ids of a chat answer of n tokens seeded by seed, drawn from
// the synthetic vocabulary: their text is workloads.Words(ids), so a client that sends the
// text back in the next turn sends those very ids again (appendText), and the answer's
// blocks, which the engine caches, are hit.
func chatAnswer(seed uint64, n int) []int32 {
	ids := make([]int32, n)
	for i := range ids {
		z := seed + uint64(i+1)*0x9e3779b97f4a7c15 // splitmix64, as word
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
		z = (z ^ (z >> 27)) * 0x94d049bb133111eb
		ids[i] = int32((z ^ z>>31) % workloads.VocabSize)
	}
	return ids
}
