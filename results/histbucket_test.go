package results

import (
	"math/rand/v2"
	"testing"
	"time"
)

// TestBucketOfMatchesLog checks the table lookup against the logarithm at every bucket bound,
// either side of it, across the small durations one by one, and at log-uniform random ones.
func TestBucketOfMatchesLog(t *testing.T) {
	check := func(d time.Duration) {
		t.Helper()
		if got, want := bucketOf(d), bucketByLog(d); got != want {
			t.Fatalf("bucketOf(%d) = %d, want %d", d, got, want)
		}
	}
	for d := time.Duration(-5); d < 300_000; d++ {
		check(d)
	}
	bucketOf(0) // builds the tables
	for b := 1; b <= histMaxBucket; b++ {
		lo := time.Duration(histLower[b])
		check(lo - 1)
		check(lo)
		check(lo + 1)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 200_000 {
		check(time.Duration(r.Int64N(1 << uint(r.IntN(62)+1))))
	}
	check(1<<63 - 1)
}

func BenchmarkHistogramAdd(b *testing.B) {
	b.ReportAllocs()
	var h Histogram
	r := rand.New(rand.NewPCG(1, 2))
	ds := make([]time.Duration, 1024)
	for i := range ds {
		ds[i] = time.Duration(5e6 + r.Int64N(30e6)) // 5–35 ms, like decode steps
	}
	for i := 0; b.Loop(); i++ {
		h.Add(ds[i&1023], 8)
	}
}
