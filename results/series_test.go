package results_test

import (
	"math"
	"reflect"
	"slices"
	"testing"
	"time"

	"kvroute/results"
	"kvroute/results/resultstest"
)

func TestCollectorServiceSeries(t *testing.T) {
	recs := resultstest.Records(0, 9, 200)
	collect := func(width time.Duration, maxBuckets int, order []results.Record) results.Run {
		c := results.NewCollector(results.CollectorOpts{BucketWidth: width, MaxBuckets: maxBuckets})
		for i := range order {
			c.Add(&order[i])
		}
		return c.Run()
	}
	grown := collect(time.Second, 8, recs) // starts at 1 s and doubles as the run outgrows 8 buckets
	s := grown.Series
	if s.Buckets() > 8 || s.BucketS <= 1 {
		t.Fatalf("%d buckets of %v s, want at most 8 wider than 1 s", s.Buckets(), s.BucketS)
	}
	direct := collect(time.Duration(s.BucketS*1e9), 8, recs)
	if !reflect.DeepEqual(direct.Series, s) {
		t.Errorf("doubling the width changed the series:\ngrown  %+v\ndirect %+v", s, direct.Series)
	}
	reversed := slices.Clone(recs)
	slices.Reverse(reversed)
	if back := collect(time.Second, 8, reversed); !reflect.DeepEqual(back.Series, s) {
		t.Errorf("record order changed the series")
	}
	var prompt, output int64
	total := map[string]float64{}
	for _, r := range recs {
		if r.Status == results.StatusCompleted {
			prompt += int64(r.PromptTokens)
			output += int64(r.OutputTokens)
		}
	}
	var gotP, gotO int64
	for _, tn := range s.Tenants() {
		for i := range s.Buckets() {
			gotP += at(s.PromptTokens[tn], i)
			gotO += at(s.OutputTokens[tn], i)
			total[tn] += s.Service(tn, i)
		}
	}
	if gotP != prompt || gotO != output {
		t.Errorf("series holds %d prompt and %d output tokens, records %d and %d", gotP, gotO, prompt, output)
	}
	if j := results.Jain(total); !near(j, grown.Metrics.JainFairness, 1e-12) {
		t.Errorf("results.Jain over the series %v, metrics say %v", j, grown.Metrics.JainFairness)
	}
}

func at(v []int64, i int) int64 {
	if i < len(v) {
		return v[i]
	}
	return 0
}

// near reports whether got is within a relative tolerance tol of want.
func near(got, want, tol float64) bool {
	return math.Abs(got-want) <= tol*math.Max(math.Abs(want), 1e-9)
}
