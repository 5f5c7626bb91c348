package workloads

import (
	"testing"
	"time"
)

// BenchmarkStream drives a multi-turn synthetic-chat stream (the workload of
// sim/cluster's BenchmarkSimulate multi-turn case: 40 new sessions/s, 20,000 requests) as a
// simulator does, each request finishing 2 s after it arrives, and reports requests taken
// per second: the cost of generating a workload, without the fleet.
func BenchmarkStream(b *testing.B) {
	cfg := Config{
		Workload: WorkloadConfig{Kind: KindSyntheticChat},
		Arrival:  ArrivalConfig{Process: ProcessPoisson, Rate: 40},
		Requests: 20000,
	}
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		s, err := Build(cfg, 1, WithText(false))
		if err != nil {
			b.Fatal(err)
		}
		n += driveFixed(b, s, 2*time.Second)
		_ = s.Close()
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "requests/s")
}

// driveFixed runs s to the end with every request finishing service after it arrives, and
// returns the number of requests taken. Requests are taken in arrival order, so they finish
// in that order too: a FIFO holds the pending finishes.
func driveFixed(b *testing.B, s *Stream, service time.Duration) int {
	var fin []finish
	head, n := 0, 0
	for {
		req, ok := s.Peek()
		if head < len(fin) && (!ok || fin[head].at <= req.Arrival) {
			f := fin[head]
			head++
			if err := s.Done(f.id, Completion{At: f.at}); err != nil {
				b.Fatal(err)
			}
			continue
		}
		if !ok {
			return n
		}
		req, _ = s.Next()
		n++
		if head > 256 && 2*head > len(fin) { // drop the finishes reported
			fin, head = fin[:copy(fin, fin[head:])], 0
		}
		fin = append(fin, finish{id: req.ID, at: req.Arrival + service})
	}
}
