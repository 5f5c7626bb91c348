package calibrate

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"

	"kvroute/results"
)

// Histogram names of vLLM V1's /metrics page that ParseMetricsFile reads (as cmd/loadgen's
// results.VLLMMetricsFile records them).
const (
	histTTFT    = "vllm:time_to_first_token_seconds"
	histTPOT    = "vllm:time_per_output_token_seconds"
	histITL     = "vllm:inter_token_latency_seconds" // the newer name of histTPOT
	histE2E     = "vllm:e2e_request_latency_seconds"
	histPrefill = "vllm:request_prefill_time_seconds"
	histQueue   = "vllm:request_queue_time_seconds"
	histDecode  = "vllm:request_decode_time_seconds"
)

// ErrMissingHistogram is wrapped by a *BenchFieldError for a run of vllm-metrics.json that
// has some of vLLM's latency histograms but lacks a required one.
var ErrMissingHistogram = errors.New("required histogram is missing (the server's /metrics page lacks it)")

// Moment is the sum, in seconds, and count of one histogram's observations; Count 0 means
// none (or the histogram was absent).
type Moment struct {
	Sum, Count float64
}

// MeanMS returns the mean observation in milliseconds, 0 without observations.
func (m Moment) MeanMS() float64 {
	if m.Count <= 0 {
		return 0
	}
	return 1e3 * m.Sum / m.Count
}

func (m Moment) add(o Moment) Moment { return Moment{m.Sum + o.Sum, m.Count + o.Count} }

// ServerStats are one run's latencies as its vLLM servers measured them, summed over the
// servers: TTFT, TPOT (vllm:time_per_output_token_seconds or its newer name
// vllm:inter_token_latency_seconds: one observation per token after a request's first) and
// E2E are required; Prefill, Queue and Decode are read when present.
type ServerStats struct {
	TTFT, TPOT, E2E        Moment
	Prefill, Queue, Decode Moment
}

func (s ServerStats) add(o ServerStats) ServerStats {
	return ServerStats{TTFT: s.TTFT.add(o.TTFT), TPOT: s.TPOT.add(o.TPOT), E2E: s.E2E.add(o.E2E),
		Prefill: s.Prefill.add(o.Prefill), Queue: s.Queue.add(o.Queue), Decode: s.Decode.add(o.Decode)}
}

// ParseMetricsFile reads a results directory's results.VLLMMetricsFile (results.VLLMMetrics,
// as cmd/loadgen writes it: per run and server, the increase of vLLM's histograms over the
// run) and returns, per run name, the servers' latencies summed. Every run must be one of
// runs (summary.json's). A run whose servers had none of the latency histograms is left out
// (its calibration is client-side); one with some must have TTFT, TPOT (or inter-token
// latency) and E2E. Unknown or missing keys and malformed histograms (bounds not ascending,
// cumulative counts going down, no +Inf bucket equal to the count, negative or non-finite
// sums) are errors; every problem is a *BenchFieldError naming the file and, for a document
// that decoded, the field.
func ParseMetricsFile(r io.Reader, name string, runs []string) (map[string]ServerStats, error) {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	var f results.VLLMMetrics
	if err := dec.Decode(&f); err != nil {
		return nil, &BenchFieldError{File: name, Err: err}
	}
	if f.Runs == nil {
		return nil, &BenchFieldError{File: name, Field: "runs", Err: ErrMissingHistogram}
	}
	out := map[string]ServerStats{}
	for i, run := range f.Runs {
		field := fmt.Sprintf("runs[%d]", i)
		if !slices.Contains(runs, run.Run) {
			return nil, &BenchFieldError{File: name, Field: field + ".run", Err: errors.New("not a run of summary.json")}
		}
		if _, dup := out[run.Run]; dup {
			return nil, &BenchFieldError{File: name, Field: field + ".run", Err: fmt.Errorf("run %q listed twice", run.Run)}
		}
		var sum ServerStats
		seen := false
		for k, srv := range run.Servers {
			s, has, err := serverStats(srv.Histograms, fmt.Sprintf("%s.servers[%d].histograms", field, k))
			if err != nil {
				return nil, &BenchFieldError{File: name, Field: err.field, Err: err.err}
			}
			sum, seen = sum.add(s), seen || has
		}
		if !seen {
			continue
		}
		for _, req := range []struct {
			name string
			m    Moment
		}{{histTTFT, sum.TTFT}, {histTPOT, sum.TPOT}, {histE2E, sum.E2E}} {
			if req.m.Count <= 0 || math.IsInf(req.m.Sum, 0) {
				return nil, &BenchFieldError{File: name, Field: field + ": " + req.name, Err: ErrMissingHistogram}
			}
		}
		out[run.Run] = sum
	}
	return out, nil
}

// histError is a problem at a field of the file.
type histError struct {
	field string
	err   error
}

// serverStats reads one server's histograms; has reports whether it had a latency one.
func serverStats(hs map[string]results.HistogramDelta, field string) (ServerStats, bool, *histError) {
	var s ServerStats
	has := false
	for _, h := range []struct {
		names []string
		to    *Moment
	}{{[]string{histTTFT}, &s.TTFT}, {[]string{histTPOT, histITL}, &s.TPOT}, {[]string{histE2E}, &s.E2E},
		{[]string{histPrefill}, &s.Prefill}, {[]string{histQueue}, &s.Queue}, {[]string{histDecode}, &s.Decode}} {
		for _, n := range h.names {
			j, ok := hs[n]
			if !ok {
				continue
			}
			m, err := moment(j)
			if err != nil {
				err.field = fmt.Sprintf("%s[%q]%s", field, n, err.field)
				return s, false, err
			}
			*h.to, has = m, true
			break
		}
	}
	return s, has, nil
}

// moment checks h and returns its sum and count.
func moment(h results.HistogramDelta) (Moment, *histError) {
	switch {
	case !finiteNonNeg(h.Count):
		return Moment{}, &histError{".count", fmt.Errorf("want a finite count >= 0, got %v", h.Count)}
	case !finiteNonNeg(h.Sum):
		return Moment{}, &histError{".sum", fmt.Errorf("want a finite sum >= 0, got %v", h.Sum)}
	case len(h.Buckets) == 0:
		return Moment{}, &histError{".buckets", ErrMissingHistogram}
	}
	prevLE, prevN := math.Inf(-1), 0.0
	for i, b := range h.Buckets {
		at := fmt.Sprintf(".buckets[%d]", i)
		le, err := strconv.ParseFloat(b.LE, 64)
		if err != nil || math.IsNaN(le) || le <= prevLE {
			return Moment{}, &histError{at + ".le", fmt.Errorf("want a number above the previous bucket's, got %q", b.LE)}
		}
		if !finiteNonNeg(b.Count) || b.Count < prevN {
			return Moment{}, &histError{at + ".count", fmt.Errorf("want a cumulative count >= %v, got %v", prevN, b.Count)}
		}
		prevLE, prevN = le, b.Count
	}
	if !math.IsInf(prevLE, 1) || prevN != h.Count {
		return Moment{}, &histError{".buckets", fmt.Errorf("want a last bucket le \"+Inf\" holding the count %v", h.Count)}
	}
	return Moment{Sum: h.Sum, Count: h.Count}, nil
}
