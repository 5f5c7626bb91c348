package workloads

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"unsafe"
)

// VocabSize is the number of token ids of the synthetic vocabulary: ids 0..VocabSize-1.
//
// Each id maps to one pronounceable lowercase word followed by a space: ids 0..99 to a
// two-letter syllable ("ba ", "be ", …) and ids 100..10099 to two syllables ("baba ", …).
// Uniformly drawn ids average 4.98 characters per token, close to English text under a
// BPE tokenizer (about 4 characters per token). Because every word is distinct and ends in a
// space, token sequences and their text determine each other: equal token prefixes give equal
// text prefixes, and Words followed by ParseWords returns the ids unchanged.
const VocabSize = 10100

const (
	consonants = "bcdfghjklmnprstvwxyz" // 20
	vowels     = "aeiou"                // 5
	syllableN  = len(consonants) * len(vowels)
)

// AppendWords appends the synthetic-vocabulary text of ids to dst and returns the result.
// An id outside 0..VocabSize-1 is first reduced modulo VocabSize.
func AppendWords(dst []byte, ids []int32) []byte {
	if len(ids) < 3 {
		for _, id := range ids {
			dst = appendWord(dst, id)
		}
		return dst
	}
	// Each word is written as one 8-byte store from wordTable; all but the last two, so that
	// nothing is written past the text's end.
	n := len(dst)
	dst = slices.Grow(dst, 5*len(ids))
	buf := dst[:cap(dst)]
	for _, id := range ids[:len(ids)-2] {
		w := wordTable[vocabID(id)]
		binary.LittleEndian.PutUint64(buf[n:n+8], w)
		n += int(w >> 56)
	}
	dst = dst[:n]
	for _, id := range ids[len(ids)-2:] {
		dst = appendWord(dst, id)
	}
	return dst
}

// vocabID reduces id modulo VocabSize.
func vocabID(id int32) int {
	if uint32(id) < VocabSize {
		return int(id)
	}
	k := int(id) % VocabSize
	if k < 0 {
		k += VocabSize
	}
	return k
}

// appendWord appends the text of one id.
func appendWord(dst []byte, id int32) []byte {
	w := wordTable[vocabID(id)]
	for i := range int(w >> 56) {
		dst = append(dst, byte(w>>(8*i)))
	}
	return dst
}

// wordTable holds each id's text, up to 5 bytes little-endian, with its length in the top
// byte.
var wordTable = func() *[VocabSize]uint64 {
	var t [VocabSize]uint64
	var b []byte
	for k := range VocabSize {
		b = b[:0]
		if j := k; j >= syllableN {
			j -= syllableN
			b = appendSyllable(b, j/syllableN)
			b = appendSyllable(b, j%syllableN)
		} else {
			b = appendSyllable(b, j)
		}
		b = append(b, ' ')
		var w uint64
		for i, c := range b {
			w |= uint64(c) << (8 * i)
		}
		t[k] = w | uint64(len(b))<<56
	}
	return &t
}()

func appendSyllable(dst []byte, k int) []byte {
	return append(dst, consonants[k/len(vowels)], vowels[k%len(vowels)])
}

// Words returns the synthetic-vocabulary text of ids (see VocabSize).
func Words(ids []int32) string {
	b := AppendWords(make([]byte, 0, 5*len(ids)), ids)
	return unsafe.String(unsafe.SliceData(b), len(b)) // b is never written again
}

// ParseWords is the inverse of Words: it returns the ids whose text is text. Text that Words
// cannot produce (unknown words, missing trailing space) is an error.
func ParseWords(text string) ([]int32, error) {
	if text == "" {
		return nil, nil
	}
	body, ok := strings.CutSuffix(text, " ")
	if !ok {
		return nil, fmt.Errorf("workloads: synthetic text must end with a space")
	}
	words := strings.Split(body, " ")
	ids := make([]int32, 0, len(words))
	for i, w := range words {
		id, err := wordID(w)
		if err != nil {
			return nil, fmt.Errorf("workloads: synthetic text word %d %q: %w", i, w, err)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

func wordID(w string) (int32, error) {
	switch len(w) {
	case 2:
		k, err := syllableIndex(w)
		return int32(k), err
	case 4:
		hi, err := syllableIndex(w[:2])
		if err != nil {
			return 0, err
		}
		lo, err := syllableIndex(w[2:])
		return int32(syllableN + hi*syllableN + lo), err
	}
	return 0, fmt.Errorf("not a word of the synthetic vocabulary")
}

func syllableIndex(s string) (int, error) {
	c := strings.IndexByte(consonants, s[0])
	v := strings.IndexByte(vowels, s[1])
	if c < 0 || v < 0 {
		return 0, fmt.Errorf("not a word of the synthetic vocabulary")
	}
	return c*len(vowels) + v, nil
}

// appendKeyedTokens appends n ids drawn uniformly from the synthetic vocabulary by the
// SplitMix64 sequence of key: token i depends only on key and i, so the first k tokens of a
// key's sequence are the same whatever n is (a shorter block is a prefix of a longer one).
func appendKeyedTokens(dst []int32, key uint64, n int) []int32 {
	if n <= 0 {
		return dst
	}
	m := len(dst)
	dst = slices.Grow(dst, n)[:m+n]
	b := dst[m:]                       // drawn in place: no second pass over the tokens
	c := fillKeyedPairs(b[:n&^1], key) // key + pair·gamma: one mix64 gives a pair of tokens
	if n&1 == 1 {                      // the last token, of an odd n
		b[n-1] = int32(((mix64(c) & 0xffffffff) * VocabSize) >> 32)
	}
	return dst
}

// fillKeyedPairs fills b, of even length, with the pairs of tokens of the SplitMix64 sequence
// from state c (mix64 written out, with its additions folded into c) and returns the state
// after them.
func fillKeyedPairs(b []int32, c uint64) uint64 {
	// The constants come from a variable so that they stay in registers: as constants the
	// compiler loads each 64-bit immediate again on every pair.
	gamma, m1, m2 := mixConsts[0], mixConsts[1], mixConsts[2]
	for i := 0; i < len(b)-1; i += 2 {
		c += gamma
		x := (c ^ (c >> 30)) * m1
		x = (x ^ (x >> 27)) * m2
		x ^= x >> 31
		lo, hi := uint64(uint32(x))*VocabSize, (x>>32)*VocabSize
		b[i], b[i+1] = int32(lo>>32), int32(hi>>32)
	}
	return c
}

// mixConsts are mix64's constants as a variable, for fillKeyedPairs.
var mixConsts = [3]uint64{mixGamma, mixMul1, mixMul2}

// keyedSegment returns n tokens of key's sequence and, when withText is set, their text.
func keyedSegment(key uint64, n int, withText bool) segment {
	s := segment{tokens: appendKeyedTokens(make([]int32, 0, n), key, n)}
	if withText {
		s.text = Words(s.tokens)
	}
	return s
}

// cacheBudgetTokens bounds the tokens a promptCache keeps (about 150 MB with text).
const cacheBudgetTokens = 1 << 24

// promptCache hands out the n keyed prompts of tokens tokens each (shared system prompts),
// memoizing them when all n fit cacheBudgetTokens and regenerating them otherwise.
type promptCache struct {
	seed, tag uint64
	tokens    int
	text      bool
	cached    []segment // nil when the set is too large to keep
}

func newPromptCache(seed, tag uint64, n, tokens int, withText bool) *promptCache {
	c := &promptCache{seed: seed, tag: tag, tokens: tokens, text: withText}
	if n*tokens <= cacheBudgetTokens {
		c.cached = make([]segment, n)
	}
	return c
}

// get returns prompt i (0 <= i < n).
func (c *promptCache) get(i int) segment {
	if c.cached == nil {
		return keyedSegment(deriveSeed(c.seed, c.tag, uint64(i)), c.tokens, c.text)
	}
	if c.cached[i].tokens == nil {
		c.cached[i] = keyedSegment(deriveSeed(c.seed, c.tag, uint64(i)), c.tokens, c.text)
	}
	return c.cached[i]
}
