package results

import "testing"

// BenchmarkAggregatorAdd folds one terminal record: the per-request cost of every run.
func BenchmarkAggregatorAdd(b *testing.B) {
	recs := fixtureRecords(fixtureSpecs[0], 1, 1024)
	a := NewAggregator()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		a.Add(&recs[i%len(recs)])
	}
}
