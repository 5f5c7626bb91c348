package calibrate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"time"
)

// maxBenchBytes bounds the benchmark files ParseBenchServe reads.
const maxBenchBytes = 256 << 20

// benchFile is the part of `vllm bench serve --save-result --save-detailed` JSON calibration
// reads. The keys are those vLLM's serve.py writes (vllm-project/vllm@009e6d4a
// vllm/benchmarks/serve.py: the `result` dict at the end of benchmark() and the `result_json`
// setup keys in main_async(); without --save-detailed the per-request arrays are deleted).
// Other keys (percentile summaries, spec-decode figures, --metadata KEY=VALUE pairs) are
// ignored: vLLM adds keys between releases and users add their own.
type benchFile struct {
	Date           *string         `json:"date"`
	Backend        *string         `json:"backend"`
	ModelID        *string         `json:"model_id"`
	NumPrompts     *int            `json:"num_prompts"`
	RequestRate    json.RawMessage `json:"request_rate"`    // a number, or the string "inf"
	MaxConcurrency *int            `json:"max_concurrency"` // null: no cap
	Completed      *int            `json:"completed"`

	InputLens  *[]int       `json:"input_lens"`
	OutputLens *[]int       `json:"output_lens"`
	TTFTs      *[]float64   `json:"ttfts"`
	ITLs       *[][]float64 `json:"itls"`
	Latencies  *[]float64   `json:"latencies"`
	StartTimes *[]float64   `json:"start_times"`
	Errors     *[]string    `json:"errors"`
}

// BenchFieldError reports a missing or malformed field of a benchmark file.
type BenchFieldError struct {
	// File names the input; Field is the JSON key (with an index for array elements).
	File, Field string
	// Err is the problem.
	Err error
}

// Error formats e as "calibrate: FILE: field FIELD: problem".
func (e *BenchFieldError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("calibrate: %s: %v", e.File, e.Err)
	}
	return fmt.Sprintf("calibrate: %s: field %q: %v", e.File, e.Field, e.Err)
}

// Unwrap returns the problem.
func (e *BenchFieldError) Unwrap() error { return e.Err }

// ErrMissingField is wrapped by a BenchFieldError for a required key the file lacks.
var ErrMissingField = errors.New("required field is missing (run vllm bench serve with --save-result --save-detailed)")

// ParseBenchServe reads one `vllm bench serve --save-result --save-detailed` JSON document.
// Required: the per-request arrays input_lens, output_lens, ttfts and itls, all of one
// length, and start_times unless request_rate is "inf" with no max_concurrency (then every
// request was sent at once). latencies (else ttft + Σ itls), errors (else a request with
// output_lens 0 failed), model_id and max_concurrency are read when present. A request with
// an error is left out, as vLLM leaves it out of its own statistics. Types are checked
// strictly; every problem is a *BenchFieldError naming file and field.
func ParseBenchServe(r io.Reader, name string) (Measurement, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxBenchBytes+1))
	if err != nil {
		return Measurement{}, &BenchFieldError{File: name, Err: err}
	}
	if len(data) > maxBenchBytes {
		return Measurement{}, &BenchFieldError{File: name, Err: fmt.Errorf("file exceeds %d bytes", maxBenchBytes)}
	}
	var f benchFile
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&f); err != nil {
		return Measurement{}, decodeError(name, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Measurement{}, &BenchFieldError{File: name, Err: errors.New("trailing data after the result object")}
	}
	return f.measurement(name)
}

// decodeError turns encoding/json's errors into a BenchFieldError naming the field.
func decodeError(name string, err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return &BenchFieldError{File: name, Field: te.Field, Err: fmt.Errorf("cannot use JSON %s as %s", te.Value, te.Type)}
	}
	return &BenchFieldError{File: name, Err: err}
}

func (f *benchFile) measurement(name string) (Measurement, error) {
	fail := func(field string, err error) (Measurement, error) {
		return Measurement{}, &BenchFieldError{File: name, Field: field, Err: err}
	}
	for _, req := range []struct {
		field string
		set   bool
	}{{"input_lens", f.InputLens != nil}, {"output_lens", f.OutputLens != nil}, {"ttfts", f.TTFTs != nil}, {"itls", f.ITLs != nil}} {
		if !req.set {
			return fail(req.field, ErrMissingField)
		}
	}
	allAtOnce, err := f.sentAtOnce()
	if err != nil {
		return fail("request_rate", err)
	}
	if f.StartTimes == nil && !allAtOnce {
		return fail("start_times", fmt.Errorf("%w; a run with a finite request_rate or a max_concurrency needs each request's start time", ErrMissingField))
	}
	n := len(*f.InputLens)
	if err := f.checkLengths(n); err != nil {
		return fail(err.field, err.err)
	}
	m := Measurement{Source: name}
	if f.ModelID != nil {
		m.Model = *f.ModelID
	}
	if f.MaxConcurrency != nil {
		if *f.MaxConcurrency < 0 {
			return fail("max_concurrency", fmt.Errorf("want >= 0 or null, got %d", *f.MaxConcurrency))
		}
		m.MaxConcurrency = *f.MaxConcurrency
	}
	for i := range n {
		o, ok, ferr := f.request(i)
		if ferr != nil {
			return fail(ferr.field, ferr.err)
		}
		if !ok {
			continue
		}
		m.Requests = append(m.Requests, o)
		for _, g := range (*f.ITLs)[i] {
			m.ITLs = append(m.ITLs, seconds(g))
		}
	}
	sortByArrival(m.Requests)
	if err := m.Validate(); err != nil {
		return Measurement{}, err
	}
	return m, nil
}

// sentAtOnce reports whether request_rate is "inf" (or absent) and there is no concurrency cap.
func (f *benchFile) sentAtOnce() (bool, error) {
	rate := bytes.TrimSpace(f.RequestRate)
	switch {
	case len(rate) == 0 || string(rate) == `"inf"`:
		return f.MaxConcurrency == nil, nil
	case rate[0] == '"':
		return false, fmt.Errorf(`want a number or "inf", got %s`, rate)
	}
	var v float64
	if err := json.Unmarshal(rate, &v); err != nil || !(v > 0) || math.IsInf(v, 0) {
		return false, fmt.Errorf(`want a positive number or "inf", got %s`, rate)
	}
	return false, nil
}

type fieldErr struct {
	field string
	err   error
}

// checkLengths checks that every per-request array has n entries.
func (f *benchFile) checkLengths(n int) *fieldErr {
	for _, a := range []struct {
		field string
		n     int
		set   bool
	}{
		{"output_lens", len(*f.OutputLens), true}, {"ttfts", len(*f.TTFTs), true}, {"itls", len(*f.ITLs), true},
		{"latencies", lenOf(f.Latencies), f.Latencies != nil}, {"start_times", lenOf(f.StartTimes), f.StartTimes != nil},
		{"errors", lenOf(f.Errors), f.Errors != nil},
	} {
		if a.set && a.n != n {
			return &fieldErr{a.field, fmt.Errorf("has %d entries, input_lens has %d", a.n, n)}
		}
	}
	if n == 0 {
		return &fieldErr{"input_lens", errors.New("no requests")}
	}
	return nil
}

func lenOf[T any](p *[]T) int {
	if p == nil {
		return 0
	}
	return len(*p)
}

// request returns request i, or false for a failed one.
func (f *benchFile) request(i int) (Observed, bool, *fieldErr) {
	at := func(field string) string { return fmt.Sprintf("%s[%d]", field, i) }
	if f.Errors != nil && (*f.Errors)[i] != "" {
		return Observed{}, false, nil
	}
	out := (*f.OutputLens)[i]
	if out <= 0 {
		return Observed{}, false, nil // vLLM records 0 tokens for a failed request
	}
	in := (*f.InputLens)[i]
	if in <= 0 {
		return Observed{}, false, &fieldErr{at("input_lens"), fmt.Errorf("want > 0 tokens, got %d", in)}
	}
	ttft := (*f.TTFTs)[i]
	e2e := ttft
	for _, g := range (*f.ITLs)[i] {
		if !finiteNonNeg(g) {
			return Observed{}, false, &fieldErr{at("itls"), fmt.Errorf("want finite gaps >= 0 s, got %v", g)}
		}
		e2e += g
	}
	if f.Latencies != nil {
		e2e = (*f.Latencies)[i]
	}
	var start float64
	if f.StartTimes != nil {
		start = (*f.StartTimes)[i]
	}
	for _, v := range []struct {
		field string
		v     float64
	}{{"ttfts", ttft}, {"latencies", e2e}, {"start_times", start}} {
		if !finiteNonNeg(v.v) {
			return Observed{}, false, &fieldErr{at(v.field), fmt.Errorf("want a finite time >= 0 s, got %v", v.v)}
		}
	}
	if !(ttft > 0) || e2e < ttft {
		return Observed{}, false, &fieldErr{at("ttfts"), fmt.Errorf("ttft %v s, latency %v s: want 0 < ttft <= latency", ttft, e2e)}
	}
	return Observed{Arrival: seconds(start), PromptTokens: in, OutputTokens: out, TTFT: seconds(ttft), E2E: seconds(e2e)}, true, nil
}

func finiteNonNeg(v float64) bool { return v >= 0 && !math.IsInf(v, 0) }

// seconds converts s (finite, >= 0, below ~292 years) to a Duration.
func seconds(s float64) time.Duration {
	return time.Duration(math.Round(min(s, 9e9) * 1e9))
}
