package resultstest

import (
	"fmt"
	"math/rand/v2"
	"time"

	"kvroute/results"
)

// fixtureSpec describes one synthetic run: its policy and load, and how good it is at
// prefix reuse (hit) and latency (speed, a TTFT scale).
type fixtureSpec struct {
	name, policy, group string
	rate                float64
	tenants             int
	hit                 float64
	speed               time.Duration
	reasons             []string
	slo                 results.SLO
}

var fixtureSpecs = []fixtureSpec{
	{"chat/prefix-hash/r4", "prefix-hash", "chat", 4, 3, 0.6, 80 * time.Millisecond, []string{"prefix", "least-load"}, results.SLO{TTFTMs: 300, TPOTMs: 40}},
	{"chat/prefix-hash/r8", "prefix-hash", "chat", 8, 3, 0.55, 140 * time.Millisecond, []string{"prefix", "least-load"}, results.SLO{TTFTMs: 300, TPOTMs: 40}},
	{"chat/least-request/r4", "least-request", "chat", 4, 3, 0.2, 120 * time.Millisecond, []string{"least"}, results.SLO{TTFTMs: 300, TPOTMs: 40}},
	{"chat/least-request/r8", "least-request", "chat", 8, 3, 0.2, 130 * time.Millisecond, []string{"least"}, results.SLO{TTFTMs: 300, TPOTMs: 40}},
	{"solo", "round-robin", "", 2, 1, 0.1, 50 * time.Millisecond, nil, results.SLO{}},
}

// Records returns n synthetic records for the fixture run numbered spec (0 to 4), seeded by
// seed: Poisson-ish arrivals at the run's rate, exponential TTFTs, fixed-rate decoding and
// one failure in 25.
func Records(spec int, seed uint64, n int) []results.Record {
	return records(fixtureSpecs[spec], seed, n)
}

func records(spec fixtureSpec, seed uint64, n int) []results.Record {
	rng := rand.New(rand.NewPCG(seed, 7))
	var recs []results.Record
	t := time.Duration(0)
	for i := range n {
		t += time.Duration(rng.ExpFloat64() / spec.rate * 1e9)
		r := results.Record{
			ID: fmt.Sprintf("r%03d", i), Tenant: fmt.Sprintf("t%d", i%spec.tenants), Session: fmt.Sprintf("s%d", i%7),
			Turn: i / 7, PrefixGroup: fmt.Sprintf("g%d", i%5), Endpoint: fmt.Sprintf("e%d", i%3),
			Arrival: t, PromptTokens: 200 + rng.IntN(800), OutputTokens: 1 + rng.IntN(200),
		}
		if len(spec.reasons) > 0 {
			r.Reason = spec.reasons[rng.IntN(len(spec.reasons))]
		}
		if i%25 == 24 {
			r.Status, r.Error, r.Finish, r.OutputTokens = results.StatusFailed, "replica failed, retries exhausted", t+time.Second, 0
			r.Retries = 2
			recs = append(recs, r)
			continue
		}
		r.Status = results.StatusCompleted
		r.CachedTokens = int(spec.hit * float64(r.PromptTokens))
		r.FirstToken = t + time.Duration(rng.ExpFloat64()*float64(spec.speed))
		r.Finish = r.FirstToken + time.Duration(r.OutputTokens-1)*time.Duration(20+rng.IntN(30))*time.Millisecond
		if rng.IntN(40) == 0 {
			r.Preemptions = 1
		}
		recs = append(recs, r)
	}
	return recs
}

// Runs collects every fixture run (two policies at two loads in group "chat", and one
// ungrouped run), 120 records each, with the records of each by run name.
func Runs() ([]results.Run, map[string][]results.Record) {
	var runs []results.Run
	recs := map[string][]results.Record{}
	for i, spec := range fixtureSpecs {
		c := results.NewCollector(results.CollectorOpts{
			Name: spec.name, Policy: spec.policy, Group: spec.group, RequestRate: spec.rate, SLO: spec.slo,
			Labels:   []string{"short"},
			Scenario: map[string]any{"workload": "synthetic", "request_rate": spec.rate, "seed": 42 + i, "fleet": map[string]any{"gpu": "H100", "replicas": 3}},
		})
		rs := records(spec, uint64(i+1), 120)
		for j := range rs {
			c.Add(&rs[j])
		}
		runs = append(runs, c.Run())
		recs[spec.name] = rs
	}
	return runs, recs
}
