package results

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// SLO holds per-request latency objectives in milliseconds, the thresholds of
// `vllm bench serve --goodput ttft:MS tpot:MS e2el:MS`. A zero field is not checked.
type SLO struct {
	// TTFTMs bounds the time to first token.
	TTFTMs float64 `json:"ttft_ms,omitempty"`
	// TPOTMs bounds the time per output token after the first.
	TPOTMs float64 `json:"tpot_ms,omitempty"`
	// E2EMs bounds the end-to-end latency.
	E2EMs float64 `json:"e2e_ms,omitempty"`
}

// Goodput counts the requests that met an SLO, as `vllm bench serve --goodput` does: a
// completed request is good when each objective set is met (value ≤ threshold); a request
// with fewer than two output tokens has a TPOT of 0.
type Goodput struct {
	// SLO is the objective the requests were held to.
	SLO SLO `json:"slo"`
	// Good is the number of requests that met it.
	Good int `json:"good"`
	// Fraction is Good over all requests (failed ones included), 0..1.
	Fraction float64 `json:"fraction"`
	// RPS is Good per second of the run's duration: vllm's request_goodput.
	RPS float64 `json:"rps"`
}

// Enabled reports whether any objective is set.
func (s SLO) Enabled() bool { return s.TTFTMs > 0 || s.TPOTMs > 0 || s.E2EMs > 0 }

// Validate rejects negative, NaN and infinite thresholds.
func (s SLO) Validate() error {
	var errs []error
	for _, f := range []struct {
		name string
		v    float64
	}{{"ttft", s.TTFTMs}, {"tpot", s.TPOTMs}, {"e2el", s.E2EMs}} {
		if f.v < 0 || math.IsNaN(f.v) || math.IsInf(f.v, 0) {
			errs = append(errs, fmt.Errorf("results: slo %s: %v ms is not a finite, non-negative number", f.name, f.v))
		}
	}
	return errors.Join(errs...)
}

// Met reports whether r completed within every objective set in s.
func (s SLO) Met(r *Record) bool {
	if r.Status != StatusCompleted {
		return false
	}
	within := func(limitMs float64, d time.Duration) bool {
		return limitMs <= 0 || float64(d)/1e6 <= limitMs
	}
	ttft, _ := r.TTFT()
	tpot, _ := r.TPOT() // 0 with fewer than two tokens, as in vllm
	return within(s.TTFTMs, ttft) && within(s.TPOTMs, tpot) && within(s.E2EMs, r.Finish-r.Arrival)
}

// ParseSLO parses vllm's --goodput syntax, "KEY:MS" pairs separated by spaces or commas with
// keys ttft, tpot and e2el (e2e is accepted too), such as "ttft:500 tpot:50".
func ParseSLO(s string) (SLO, error) {
	var slo SLO
	for _, kv := range strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == ',' }) {
		k, v, ok := strings.Cut(kv, ":")
		if !ok {
			return SLO{}, fmt.Errorf("results: slo %q: want KEY:MS", kv)
		}
		ms, err := strconv.ParseFloat(v, 64)
		if err != nil || ms <= 0 || math.IsInf(ms, 0) {
			return SLO{}, fmt.Errorf("results: slo %q: %q is not a positive number of milliseconds", kv, v)
		}
		switch strings.ToLower(k) {
		case "ttft":
			slo.TTFTMs = ms
		case "tpot":
			slo.TPOTMs = ms
		case "e2el", "e2e":
			slo.E2EMs = ms
		default:
			return SLO{}, fmt.Errorf("results: slo %q: unknown metric %q (want ttft, tpot or e2el)", kv, k)
		}
	}
	return slo, nil
}
