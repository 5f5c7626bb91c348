package hugepage

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkRandomRead follows a random cycle through a table, one dependent read per 64-byte
// cache line, as the block pool's random reads do at their worst, and reports the time per
// read, with and without Advise. Where the time jumps as the table grows is the last-level
// cache this process really gets; on a shared virtual machine that can be a fraction of
// what the processor has (docs/simulator.md, "Speed").
func BenchmarkRandomRead(b *testing.B) {
	for _, advise := range []bool{false, true} {
		for _, mib := range []int{1, 4, 8, 16, 64} {
			b.Run(fmt.Sprintf("advise=%v/%dMiB", advise, mib), func(b *testing.B) {
				next := cycle(mib<<20/64, rand.New(rand.NewPCG(1, 2)))
				if advise {
					if err := Advise(next); err != nil {
						b.Skip(err)
					}
				}
				b.ReportAllocs()
				i := int32(0)
				for b.Loop() {
					i = next[i*16]
				}
				if i < 0 {
					b.Fatal("the cycle left the table")
				}
			})
		}
	}
}

// cycle returns a table of lines 64-byte lines, each one's first 4 bytes naming the next
// line of a random cycle through all of them.
func cycle(lines int, r *rand.Rand) []int32 {
	order := r.Perm(lines)
	next := make([]int32, lines*16)
	for k, line := range order {
		next[line*16] = int32(order[(k+1)%lines])
	}
	return next
}

// TestCycleVisitsEveryLine checks that the benchmark's walk goes through every line once
// before it comes back.
func TestCycleVisitsEveryLine(t *testing.T) {
	const lines = 1000
	next := cycle(lines, rand.New(rand.NewPCG(1, 2)))
	seen := make([]bool, lines)
	i := int32(0)
	for range lines {
		if seen[i] {
			t.Fatalf("line %d visited twice", i)
		}
		seen[i] = true
		i = next[i*16]
	}
	if i != 0 {
		t.Fatalf("after %d steps the walk is at line %d, want back at 0", lines, i)
	}
}
