package workloads

import (
	"errors"
	"io"
	"math"
	"os"
	"testing"
	"time"
)

// Samples of the public traces the repository ships (examples/data/README.md: sources and
// licenses), relative to this package.
const (
	mooncakeTracePath = "../examples/data/mooncake-conversation-2000.jsonl"
	azureTracePath    = "../examples/data/azure-conv-2023-2000.csv"
)

// blockCounter measures how many prompt blocks repeat an earlier block: the prefix-cache hit
// rate of an infinite cache. Blocks are identified by a chained hash of their tokens.
type blockCounter struct {
	size           int
	seen           map[uint64]struct{}
	total, repeats int
}

func newBlockCounter(size int) *blockCounter {
	return &blockCounter{size: size, seen: map[uint64]struct{}{}}
}

func (b *blockCounter) add(tokens []int32) {
	h := uint64(14695981039346656037)
	for start := 0; start < len(tokens); start += b.size {
		block := tokens[start:min(start+b.size, len(tokens))]
		// A chained hash of the block's length and its first and last 4 tokens: random
		// blocks that agree on these 8 tokens are equal with overwhelming probability, and
		// hashing every token is slow under the race detector.
		h = mix64(h ^ uint64(len(block)))
		for i := range min(4, len(block)) {
			h = mix64(h ^ uint64(uint32(block[i])) ^ uint64(uint32(block[len(block)-1-i]))<<32)
		}
		b.total++
		if _, ok := b.seen[h]; ok {
			b.repeats++
		} else {
			b.seen[h] = struct{}{}
		}
	}
}

func (b *blockCounter) fraction() float64 {
	if b.total == 0 {
		return 0
	}
	return float64(b.repeats) / float64(b.total)
}

func TestRealTraces(t *testing.T) {
	tests := []struct {
		name      string
		kind      Kind
		path      string
		requests  int
		blockSize int
	}{
		{name: "mooncake", kind: KindMooncake, path: mooncakeTracePath, requests: 2000, blockSize: 512},
		{name: "azure", kind: KindAzure, path: azureTracePath, requests: 2000, blockSize: 512},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{Workload: WorkloadConfig{Kind: tc.kind, Path: tc.path}}
			s := mustBuild(t, cfg, 1, WithText(false))
			blocks := newBlockCounter(tc.blockSize)
			var n, in, out int
			var last time.Duration
			for {
				req, ok := s.Next()
				if !ok {
					break
				}
				n++
				in += len(req.Tokens)
				out += req.OutputTokens
				last = req.Arrival
				blocks.add(req.Tokens)
			}
			if err := s.Err(); err != nil {
				t.Fatal(err)
			}
			if n != tc.requests {
				t.Errorf("requests = %d, want %d", n, tc.requests)
			}
			if tc.kind == KindMooncake {
				ids, repeated := hashIDRepeats(t, tc.path)
				t.Logf("%s: %d hash ids, repeated hash-id fraction %.5f", tc.path, ids, repeated)
				if math.Abs(repeated-blocks.fraction()) > 0.001 {
					t.Errorf("repeated generated blocks %.4f differ from repeated hash ids %.4f", blocks.fraction(), repeated)
				}
			}
			t.Logf("%s: %d requests over %v (%.2f req/s), mean input %.0f, mean output %.0f tokens; "+
				"%d-token blocks %d, %d repeated (fraction %.5f)",
				tc.path, n, last.Round(time.Millisecond), float64(n)/last.Seconds(), float64(in)/float64(n),
				float64(out)/float64(n), tc.blockSize, blocks.total, blocks.repeats, blocks.fraction())
		})
	}
}

// hashIDRepeats counts a Mooncake trace's hash ids and the fraction seen before.
func hashIDRepeats(t *testing.T, path string) (int, float64) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rd := NewMooncakeReader(f, path)
	seen := map[int64]bool{}
	total, repeats := 0, 0
	for {
		rec, err := rd.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range rec.HashIDs {
			total++
			if seen[h] {
				repeats++
			}
			seen[h] = true
		}
	}
	return total, float64(repeats) / float64(total)
}
