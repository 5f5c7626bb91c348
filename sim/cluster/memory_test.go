package cluster

import (
	"runtime"
	"testing"

	"kvroute/results"
	"kvroute/workloads"
)

// TestMemoryIndependentOfRunLength runs multi-turn chat (whole conversations, each turn
// re-sending the history) through a 2-replica fleet at a load it sustains, for 4,000 and for
// 16,000 requests, and samples the heap in use as results arrive. What a run holds is its
// fleet (block pools, tables: fixed sizes), the hash memo (a fixed number of completed
// requests, with the histories they read: it fills up over the first few thousand) and its
// requests in flight, so four times the requests must not take much more memory: about 12
// and 14 MiB; a kilobyte kept per request would add 12. The aggregator is left out: it keeps
// every record by design. (Under overload, as in BenchmarkSimulate's multi-turn run, the
// queues and so the requests in flight grow with the run.)
func TestMemoryIndependentOfRunLength(t *testing.T) {
	if testing.Short() {
		t.Skip("simulates 20,000 requests")
	}
	peak := func(requests int) uint64 {
		w := workloads.Config{
			Workload: workloads.WorkloadConfig{Kind: workloads.KindSyntheticChat},
			Arrival:  workloads.ArrivalConfig{Process: workloads.ProcessPoisson, Rate: 5},
			Requests: requests,
		}
		var top uint64
		done := 0
		record := func(*results.Record) {
			if done++; done%1000 == 0 {
				var ms runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&ms)
				top = max(top, ms.HeapInuse)
			}
		}
		runFleet(t, w, "round-robin", 2, Sink{Record: record})
		if done != requests {
			t.Fatalf("%d of %d requests recorded", done, requests)
		}
		return top
	}
	small, large := peak(4000), peak(16000)
	t.Logf("peak heap in use: %.1f MiB at 4,000 requests, %.1f MiB at 16,000", float64(small)/(1<<20), float64(large)/(1<<20))
	if large > small+small/4 {
		t.Errorf("peak heap in use grew from %d to %d bytes with 4x the requests", small, large)
	}
}
