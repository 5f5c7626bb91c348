package calibrate

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"kvroute/results"
)

// Observed is one request as measured (from a benchmark file) or as simulated.
type Observed struct {
	// Arrival is when the request was sent, from the first request of its run.
	Arrival time.Duration
	// PromptTokens and OutputTokens are the request's lengths, each at least 1.
	PromptTokens, OutputTokens int
	// TTFT is the time to first token; E2E the time to the last token.
	TTFT, E2E time.Duration
}

// TPOT returns the mean time per output token after the first, as vllm bench serve defines it
// ((E2E − TTFT) / (output tokens − 1)), or false with fewer than two output tokens.
func (o Observed) TPOT() (time.Duration, bool) {
	if o.OutputTokens < 2 {
		return 0, false
	}
	return (o.E2E - o.TTFT) / time.Duration(o.OutputTokens-1), true
}

// Measurement is one measured run: its completed requests in arrival order, the gaps between
// streamed tokens where the source has them, and where it came from.
type Measurement struct {
	// Source names the file or directory (and run) it was read from, for errors and reports.
	Source string
	// Run is the run's name in a loadgen directory (its summary.json); empty for other sources.
	Run string
	// Model is the model the run asked for (vLLM's model_id); may be empty.
	Model string
	// MaxConcurrency is the client's cap on requests in flight; 0 means none.
	MaxConcurrency int
	// Requests are the completed requests, sorted by Arrival.
	Requests []Observed
	// ITLs are the inter-token gaps of every completed request, when the source records them.
	ITLs []time.Duration
	// Server, when the source has them (a loadgen directory's vllm-metrics.json), are the
	// run's latencies as its vLLM servers measured them, over every request of the run.
	Server *ServerStats
}

// Validate checks that m has requests, in arrival order, with positive lengths and latencies.
func (m Measurement) Validate() error {
	if len(m.Requests) == 0 {
		return fmt.Errorf("calibrate: %s: no completed requests", m.Source)
	}
	var errs []error
	for i, r := range m.Requests {
		switch {
		case r.PromptTokens < 1 || r.OutputTokens < 1:
			errs = append(errs, fmt.Errorf("request %d: prompt %d and output %d tokens: want >= 1", i, r.PromptTokens, r.OutputTokens))
		case r.TTFT <= 0 || r.E2E < r.TTFT:
			errs = append(errs, fmt.Errorf("request %d: ttft %v, e2e %v: want 0 < ttft <= e2e", i, r.TTFT, r.E2E))
		case r.Arrival < 0 || (i > 0 && r.Arrival < m.Requests[i-1].Arrival):
			errs = append(errs, fmt.Errorf("request %d: arrival %v out of order", i, r.Arrival))
		}
		if len(errs) >= 5 {
			break
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("calibrate: %s: %w", m.Source, errors.Join(errs...))
	}
	return nil
}

// sortByArrival orders reqs by Arrival (stable) and shifts them so the first arrives at 0.
func sortByArrival(reqs []Observed) {
	slices.SortStableFunc(reqs, func(a, b Observed) int {
		return int(min(max(a.Arrival-b.Arrival, -1), 1))
	})
	if len(reqs) == 0 {
		return
	}
	first := reqs[0].Arrival
	for i := range reqs {
		reqs[i].Arrival -= first
	}
}

// Stats are the latency statistics the report compares, in milliseconds.
type Stats struct {
	Requests                   int
	TTFTMean, TTFTp50, TTFTp99 float64
	TPOTMean, TPOTp50, TPOTp99 float64
	E2EMean, E2Ep99            float64
	ITLMean, ITLp99            float64 // 0 when the source has no per-token gaps
}

// StatsOf returns the statistics of reqs and of the inter-token gaps itls.
func StatsOf(reqs []Observed, itls []time.Duration) Stats {
	var ttft, tpot, e2e, itl []float64
	for _, r := range reqs {
		ttft = append(ttft, ms(r.TTFT))
		e2e = append(e2e, ms(r.E2E))
		if t, ok := r.TPOT(); ok {
			tpot = append(tpot, ms(t))
		}
	}
	for _, d := range itls {
		itl = append(itl, ms(d))
	}
	// Means first, over the values in request order; then each slice is sorted once for its
	// percentiles.
	s := Stats{Requests: len(reqs), TTFTMean: meanOf(ttft), TPOTMean: meanOf(tpot), E2EMean: meanOf(e2e), ITLMean: meanOf(itl)}
	for _, v := range [][]float64{ttft, tpot, e2e, itl} {
		slices.Sort(v)
	}
	s.TTFTp50, s.TTFTp99 = results.Percentile(ttft, 50), results.Percentile(ttft, 99)
	s.TPOTp50, s.TPOTp99 = results.Percentile(tpot, 50), results.Percentile(tpot, 99)
	s.E2Ep99, s.ITLp99 = results.Percentile(e2e, 99), results.Percentile(itl, 99)
	return s
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

func meanOf(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}
