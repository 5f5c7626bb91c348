package results

import (
	"bytes"
	"encoding/json"
	"errors"
)

// VLLMMetrics is a results directory's VLLMMetricsFile: per run, the increase of each scraped
// vLLM server's histograms over the run. cmd/loadgen writes it (loadgen.WriteMetricsFile) when
// it scrapes the servers' /metrics pages; a calibration reads it (calibrate.ParseMetricsFile).
type VLLMMetrics struct {
	Runs []RunHistograms `json:"runs"`
}

// RunHistograms are one run's server histograms, in the order of the URLs scraped.
type RunHistograms struct {
	Run     string             `json:"run"`
	Servers []ServerHistograms `json:"servers"`
}

// ServerHistograms are one server's histogram deltas over a run, keyed by the vLLM metric
// name. Absent lists, sorted, the names the server's page lacked in either reading (every
// name when the page was not a vLLM one or could not be read).
type ServerHistograms struct {
	URL        string                    `json:"url"`
	Histograms map[string]HistogramDelta `json:"histograms"`
	Absent     []string                  `json:"absent,omitempty"`
}

// HistogramDelta is a histogram's increase between two readings: cumulative buckets, the sum
// (seconds or tokens) and the count of the observations made in between.
type HistogramDelta struct {
	Buckets []HistogramBucket `json:"buckets"`
	Sum     float64           `json:"sum"`
	Count   float64           `json:"count"`
}

// HistogramBucket is one cumulative histogram bucket: its upper bound as Prometheus writes it
// ("+Inf" for the last) and the observations at or below it.
type HistogramBucket struct {
	LE    string  `json:"le"`
	Count float64 `json:"count"`
}

// UnmarshalJSON decodes a histogram strictly: "sum" and "count" are required (a missing one
// is an error, not a zero) and no other key is allowed.
func (h *HistogramDelta) UnmarshalJSON(b []byte) error {
	var raw struct {
		Buckets []HistogramBucket `json:"buckets"`
		Sum     *float64          `json:"sum"`
		Count   *float64          `json:"count"`
	}
	if err := unmarshalStrict(b, &raw); err != nil {
		return err
	}
	if raw.Sum == nil || raw.Count == nil {
		return errors.New(`results: a histogram wants "sum" and "count"`)
	}
	*h = HistogramDelta{Buckets: raw.Buckets, Sum: *raw.Sum, Count: *raw.Count}
	return nil
}

// UnmarshalJSON decodes a bucket strictly: "le" and "count" are required and no other key
// is allowed.
func (bk *HistogramBucket) UnmarshalJSON(b []byte) error {
	var raw struct {
		LE    *string  `json:"le"`
		Count *float64 `json:"count"`
	}
	if err := unmarshalStrict(b, &raw); err != nil {
		return err
	}
	if raw.LE == nil || raw.Count == nil {
		return errors.New(`results: a histogram bucket wants "le" and "count"`)
	}
	*bk = HistogramBucket{LE: *raw.LE, Count: *raw.Count}
	return nil
}

// unmarshalStrict decodes the one JSON value b into v, rejecting unknown keys: a type with
// its own UnmarshalJSON does not inherit the outer decoder's DisallowUnknownFields.
func unmarshalStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}
