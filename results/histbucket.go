package results

import (
	"math"
	"math/bits"
	"sync"
	"time"
)

// Bucket lookup without a logarithm. A duration's bucket is 1 + ⌊ln(d/1 µs) / ln 1.01⌋
// (0 up to 1 µs, capped at histMaxBucket), a non-decreasing step function of d, so it is
// fully described by each bucket's smallest duration, found once by bisection over that very
// formula. Add then finds a bucket in two table reads: the first bucket of d's 1/64-octave
// slice (d's bit length and the next six bits), then the one or two steps to the right bucket.
// That replaces a math.Log per sample: the ITL histogram takes one sample per replica step.

// histMaxBucket is the last bucket; larger durations (beyond ~28 hours) fall into it.
const histMaxBucket = 2600

// histSliceBits is how many bits below the leading one choose a slice of an octave.
const histSliceBits = 6

var (
	histOnce   sync.Once
	histLower  []int64 // histLower[b]: the smallest duration in bucket b (b ≥ 1)
	histSlices []int32 // [bitlen<<histSliceBits | next bits]: the bucket of the slice's first duration
)

// bucketByLog is the definition: the bucket of d by the logarithm.
func bucketByLog(d time.Duration) int {
	b := 0
	if v := float64(d); v > histMin {
		b = 1 + int(math.Log(v/histMin)/histLogRatio)
	}
	return min(b, histMaxBucket)
}

// bucketOf returns the bucket of d, equal to bucketByLog(d).
func bucketOf(d time.Duration) int {
	histOnce.Do(initHistTables)
	if d <= time.Duration(histMin) {
		return 0
	}
	b := int(histSlices[sliceOf(int64(d))])
	for b < histMaxBucket && histLower[b+1] <= int64(d) {
		b++
	}
	return b
}

// sliceOf returns the index of the 1/64-octave slice holding v > 0.
func sliceOf(v int64) int {
	n := bits.Len64(uint64(v))
	var next int
	if n > histSliceBits+1 {
		next = int(v>>(n-1-histSliceBits)) & (1<<histSliceBits - 1)
	} else {
		next = int(v<<(histSliceBits+1-n)) & (1<<histSliceBits - 1)
	}
	return n<<histSliceBits | next
}

// initHistTables computes the bucket bounds by bisection and the first bucket of each slice.
func initHistTables() {
	histLower = make([]int64, histMaxBucket+1)
	lo := int64(histMin)
	for b := 1; b <= histMaxBucket; b++ {
		hi := lo
		for bucketByLog(time.Duration(hi)) < b {
			hi = hi + hi/64 + 1
		}
		for lo < hi { // the smallest d in [lo, hi] with bucket ≥ b
			mid := lo + (hi-lo)/2
			if bucketByLog(time.Duration(mid)) >= b {
				hi = mid
			} else {
				lo = mid + 1
			}
		}
		histLower[b] = lo
	}
	histSlices = make([]int32, 65<<histSliceBits)
	b := 0
	for i := range histSlices {
		n, next := i>>histSliceBits, int64(i&(1<<histSliceBits-1))
		if n == 0 || n > 63 {
			histSlices[i] = int32(b)
			continue
		}
		// The slice's smallest value: its leading one and next bits, then zeros.
		first, top := int64(0), int64(1)<<histSliceBits|next
		if sh := n - 1 - histSliceBits; sh >= 0 {
			first = top << sh
		} else {
			first = top >> -sh
		}
		for b < histMaxBucket && histLower[b+1] <= first {
			b++
		}
		histSlices[i] = int32(b)
	}
}
