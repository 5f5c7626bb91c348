package results_test

import (
	"testing"

	"kvroute/results"
	"kvroute/results/resultstest"
)

// BenchmarkAggregatorAdd folds one terminal record: the per-request cost of every run.
func BenchmarkAggregatorAdd(b *testing.B) {
	recs := resultstest.Records(0, 1, 1024)
	a := results.NewAggregator()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		a.Add(&recs[i%len(recs)])
	}
}
