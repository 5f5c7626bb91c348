package loadgen

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"time"

	"kvroute/results"
)

// BenchInfo is the run description `vllm bench serve --save-result` puts beside its metrics.
type BenchInfo struct {
	// Date is the start of the run, formatted as vllm does ("20060102-150405").
	Date string
	// Backend and EndpointType name the API ("openai-chat" and "openai" for chat requests).
	Backend, EndpointType string
	// Label names the run; ModelID is the model requested.
	Label, ModelID string
	// RequestRate is the offered rate in requests per second; +Inf is written as "inf".
	RequestRate float64
	// Burstiness is the gamma shape of the arrivals (1 for Poisson).
	Burstiness float64
	// MaxConcurrency is the cap on requests in flight; 0 is written as null.
	MaxConcurrency int
	// SLO, when set, adds request_goodput.
	SLO results.SLO
}

// Bench accumulates Results into the JSON document `vllm bench serve --save-result` writes.
// It keeps every request's latencies, so memory grows with the run. The zero value is not
// usable; call NewBench.
type Bench struct {
	info      BenchInfo
	inputLens []int
	outLens   []int
	ttfts     []float64
	itls      [][]float64
	latencies []float64
	starts    []float64
	texts     []string
	errs      []string
	recs      []results.Record
}

// NewBench returns an empty accumulator for the run info describes.
func NewBench(info BenchInfo) *Bench { return &Bench{info: info} }

// Add appends one request; warm-up Results are ignored.
func (b *Bench) Add(r *Result) {
	if r.Warmup {
		return
	}
	rec := r.Record
	ok := rec.Status == results.StatusCompleted
	itl := make([]float64, 0, len(r.ITL))
	ttft, latency, out := 0.0, 0.0, 0
	if ok {
		for _, d := range r.ITL {
			itl = append(itl, d.Seconds())
		}
		t, _ := rec.TTFT()
		ttft, latency, out = t.Seconds(), (rec.Finish - rec.Arrival).Seconds(), rec.OutputTokens
	}
	b.inputLens = append(b.inputLens, rec.PromptTokens)
	b.outLens = append(b.outLens, out)
	b.ttfts = append(b.ttfts, ttft)
	b.itls = append(b.itls, itl)
	b.latencies = append(b.latencies, latency)
	b.starts = append(b.starts, rec.Arrival.Seconds())
	b.texts = append(b.texts, r.Text)
	b.errs = append(b.errs, rec.Error)
	b.recs = append(b.recs, rec)
}

// percentiles are the pXX keys written for each metric, besides mean, median and std.
var percentiles = []float64{50, 90, 95, 99}

// JSON returns the document for a run that lasted duration: the per-request arrays
// (input_lens, output_lens, ttfts, itls, latencies, start_times in seconds, generated_texts,
// errors; failed requests with zeros), the totals and throughputs, and mean_, median_, std_
// and pXX_ keys in milliseconds for ttft, tpot, itl and e2el over the completed requests.
func (b *Bench) JSON(duration time.Duration) map[string]any {
	d := duration.Seconds()
	completed, inTok, outTok, good := 0, 0, 0, 0
	var ttft, tpot, itl, e2e []float64
	for i, rec := range b.recs {
		if rec.Status != results.StatusCompleted {
			continue
		}
		completed++
		inTok += rec.PromptTokens
		outTok += rec.OutputTokens
		if b.info.SLO.Met(&rec) {
			good++
		}
		ttft = append(ttft, 1e3*b.ttfts[i])
		e2e = append(e2e, 1e3*b.latencies[i])
		if t, ok := rec.TPOT(); ok {
			tpot = append(tpot, float64(t)/1e6)
		}
		for _, g := range b.itls[i] {
			itl = append(itl, 1e3*g)
		}
	}
	m := map[string]any{
		"date": b.info.Date, "backend": b.info.Backend, "endpoint_type": b.info.EndpointType, "label": b.info.Label,
		"model_id": b.info.ModelID, "num_prompts": len(b.recs), "request_rate": rateValue(b.info.RequestRate),
		"burstiness": b.info.Burstiness, "max_concurrency": nullableInt(b.info.MaxConcurrency),
		"duration": d, "completed": completed, "failed": len(b.recs) - completed,
		"total_input_tokens": inTok, "total_output_tokens": outTok,
		"request_throughput": per(completed, d), "output_throughput": per(outTok, d),
		"total_token_throughput": per(inTok+outTok, d), "request_goodput": nil,
		"input_lens": nonNil(b.inputLens), "output_lens": nonNil(b.outLens), "ttfts": nonNil(b.ttfts),
		"itls": nonNil(b.itls), "latencies": nonNil(b.latencies), "start_times": nonNil(b.starts),
		"generated_texts": nonNil(b.texts), "errors": nonNil(b.errs),
	}
	if b.info.SLO.Enabled() {
		m["request_goodput"] = per(good, d)
	}
	for _, s := range []struct {
		name string
		v    []float64
	}{{"ttft", ttft}, {"tpot", tpot}, {"itl", itl}, {"e2el", e2e}} {
		addStats(m, s.name, s.v)
	}
	return m
}

// WriteJSON writes the document JSON returns, indented.
func (b *Bench) WriteJSON(w io.Writer, duration time.Duration) error {
	out, err := json.MarshalIndent(b.JSON(duration), "", "  ")
	if err != nil {
		return fmt.Errorf("loadgen: encode bench json: %w", err)
	}
	_, err = w.Write(append(out, '\n'))
	return err
}

// addStats adds mean_, median_, std_ and pXX_ keys for one metric, 0 when v is empty, as
// numpy's defaults compute them (population std, linear-interpolated percentiles).
func addStats(m map[string]any, name string, v []float64) {
	s := slices.Clone(v)
	slices.Sort(s)
	mean, std := 0.0, 0.0
	for _, x := range s {
		mean += x
	}
	if len(s) > 0 {
		mean /= float64(len(s))
		for _, x := range s {
			std += (x - mean) * (x - mean)
		}
		std = math.Sqrt(std / float64(len(s)))
	}
	m["mean_"+name+"_ms"] = mean
	m["median_"+name+"_ms"] = results.Percentile(s, 50)
	m["std_"+name+"_ms"] = std
	for _, p := range percentiles {
		m[fmt.Sprintf("p%s_%s_ms", pctLabel(p), name)] = results.Percentile(s, p)
	}
}

// pctLabel formats a percentile as vllm names its keys: 99 → "99", 99.9 → "99.9".
func pctLabel(p float64) string {
	if p == math.Trunc(p) {
		return fmt.Sprintf("%d", int(p))
	}
	return fmt.Sprintf("%g", p)
}

func per(n int, d float64) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d
}

func rateValue(r float64) any {
	if math.IsInf(r, 1) || r == 0 {
		return "inf"
	}
	return r
}

func nullableInt(n int) any {
	if n <= 0 {
		return nil
	}
	return n
}

// nonNil makes an empty slice encode as [] rather than null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
