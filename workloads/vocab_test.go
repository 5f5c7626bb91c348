package workloads

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestWordsRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		ids  []int32
		text string
	}{
		{name: "empty", ids: nil, text: ""},
		{name: "one-syllable", ids: []int32{0, 1, 99}, text: "ba be zu "},
		{name: "two-syllable", ids: []int32{100, VocabSize - 1}, text: "baba zuzu "},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Words(tc.ids); got != tc.text {
				t.Errorf("Words = %q, want %q", got, tc.text)
			}
			got, err := ParseWords(tc.text)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.ids, got); diff != "" {
				t.Errorf("ParseWords (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWordsAllIDsDistinct(t *testing.T) {
	seen := map[string]int32{}
	for id := range int32(VocabSize) {
		w := Words([]int32{id})
		if prev, ok := seen[w]; ok {
			t.Fatalf("ids %d and %d both map to %q", prev, id, w)
		}
		seen[w] = id
	}
}

func TestParseWordsRejects(t *testing.T) {
	for _, text := range []string{"ba", "qa ", "bab ", "ba  ", "hello world "} {
		if _, err := ParseWords(text); err == nil {
			t.Errorf("ParseWords(%q) succeeded, want an error", text)
		}
	}
}

func TestSyntheticTextCharsPerToken(t *testing.T) {
	seg := keyedSegment(42, 100_000, true)
	got := float64(len(seg.text)) / float64(len(seg.tokens))
	if got < 4.8 || got > 5.2 {
		t.Errorf("chars per token = %.3f, want about 4.98", got)
	}
}

func TestKeyedTokensArePrefixes(t *testing.T) {
	long := appendKeyedTokens(nil, 7, 1000)
	for _, n := range []int{0, 1, 2, 255, 256, 257, 511, 999} {
		if diff := cmp.Diff(long[:n], appendKeyedTokens([]int32{}, 7, n)); diff != "" {
			t.Errorf("n=%d: not a prefix (-want +got):\n%s", n, diff)
		}
	}
}

func TestChunkTokenizer(t *testing.T) {
	tests := []struct {
		name  string
		bytes int
		text  string
		want  int
	}{
		{name: "empty", bytes: 4, text: "", want: 0},
		{name: "exact", bytes: 4, text: "abcdefgh", want: 2},
		{name: "partial", bytes: 4, text: "abcdefghi", want: 3},
		{name: "default-chunk", bytes: 0, text: "abcde", want: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := len(ChunkTokenizer{ChunkBytes: tc.bytes}.Encode(tc.text)); got != tc.want {
				t.Errorf("len(Encode(%q)) = %d, want %d", tc.text, got, tc.want)
			}
		})
	}
	tok := DefaultTokenizer()
	a, b := tok.Encode("shared prefix text, then A"), tok.Encode("shared prefix text, then B")
	if diff := cmp.Diff(a[:6], b[:6]); diff != "" {
		t.Errorf("common prefix tokens differ:\n%s", diff)
	}
	if strings.Repeat("x", 0) != "" || a[6] == b[6] {
		t.Errorf("differing chunks got equal ids")
	}
}

// TestAppendWordsMatchesSyllables checks the table-driven AppendWords against building each
// word from its syllables, and that it writes nothing past the text it appends.
func TestAppendWordsMatchesSyllables(t *testing.T) {
	naive := func(dst []byte, ids []int32) []byte {
		for _, id := range ids {
			k := int(id) % VocabSize
			if k < 0 {
				k += VocabSize
			}
			if k >= syllableN {
				k -= syllableN
				dst = appendSyllable(dst, k/syllableN)
				k %= syllableN
			}
			dst = appendSyllable(dst, k)
			dst = append(dst, ' ')
		}
		return dst
	}
	r := rand.New(rand.NewPCG(3, 4))
	for range 500 {
		ids := make([]int32, r.IntN(40))
		for i := range ids {
			switch r.IntN(4) {
			case 0:
				ids[i] = int32(r.IntN(100))
			case 1:
				ids[i] = r.Int32() - 1<<30
			default:
				ids[i] = int32(r.IntN(VocabSize))
			}
		}
		backing := []byte("prefix:" + strings.Repeat("#", 300))
		got := AppendWords(backing[:7], ids)
		want := naive([]byte("prefix:"), ids)
		if string(got) != string(want) {
			t.Fatalf("AppendWords(%v) = %q, want %q", ids, got, want)
		}
		if len(got) <= len(backing) {
			if rest := string(backing[len(got):]); rest != strings.Repeat("#", len(backing)-len(got)) {
				t.Fatalf("AppendWords(%v) wrote past its text: %q", ids, rest)
			}
		}
	}
}

// BenchmarkAppendKeyedTokens draws a turn's worth of synthetic tokens into a reused array.
func BenchmarkAppendKeyedTokens(b *testing.B) {
	b.ReportAllocs()
	dst := make([]int32, 0, 1024)
	for i := 0; b.Loop(); i++ {
		dst = appendKeyedTokens(dst[:0], uint64(i), 1000)
	}
}
