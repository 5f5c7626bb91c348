package calibrate

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"

	"kvroute/results"
)

// loadgenColumns are the requests.csv columns (results package schema, written by
// cmd/loadgen and cmd/simulate) calibration needs; times are milliseconds from the start of
// the run.
var loadgenColumns = []string{"run", "status", "arrival_ms", "first_token_ms", "finish_ms", "prompt_tokens", "output_tokens"}

// ParseRequestsCSV reads a results directory's requests.csv and returns one Measurement per
// run, in the order runs lists them (the names of summary.json's runs; every run of the file
// must be one of them). Required columns: run, status, arrival_ms, first_token_ms, finish_ms,
// prompt_tokens and output_tokens; other columns are ignored. Only completed requests are
// kept. Errors name the file, the line and the column.
func ParseRequestsCSV(r io.Reader, name string, runs []string) ([]Measurement, error) {
	cr := csv.NewReader(r)
	cr.ReuseRecord = true
	header, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("calibrate: %s: header: %w", name, err)
	}
	col := map[string]int{}
	for i, h := range header {
		col[h] = i
	}
	idx := make([]int, len(loadgenColumns))
	for k, c := range loadgenColumns {
		i, ok := col[c]
		if !ok {
			return nil, &BenchFieldError{File: name, Field: c, Err: ErrMissingField}
		}
		idx[k] = i
	}
	byRun := make([][]Observed, len(runs))
	for {
		row, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		line, _ := cr.FieldPos(0)
		if err != nil {
			return nil, fmt.Errorf("calibrate: %s: %w", name, err)
		}
		k := slices.Index(runs, row[idx[0]])
		if k < 0 {
			return nil, fmt.Errorf("calibrate: %s line %d: run %q is not in summary.json", name, line, row[idx[0]])
		}
		if results.Status(row[idx[1]]) != results.StatusCompleted {
			continue
		}
		o, err := parseRequestRow(row, idx)
		if err != nil {
			return nil, fmt.Errorf("calibrate: %s line %d: %w", name, line, err)
		}
		byRun[k] = append(byRun[k], o)
	}
	var out []Measurement
	for k, reqs := range byRun {
		if len(reqs) == 0 {
			continue
		}
		sortByArrival(reqs)
		m := Measurement{Source: name + " run " + runs[k], Run: runs[k], Requests: reqs}
		if err := m.Validate(); err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("calibrate: %s: no completed requests", name)
	}
	return out, nil
}

// parseRequestRow reads one completed request.
func parseRequestRow(row []string, idx []int) (Observed, error) {
	var f [3]float64
	for k := range f {
		v, err := strconv.ParseFloat(row[idx[2+k]], 64)
		if err != nil || !finiteNonNeg(v) {
			return Observed{}, fmt.Errorf("column %s: want milliseconds >= 0, got %q", loadgenColumns[2+k], row[idx[2+k]])
		}
		f[k] = v
	}
	var n [2]int
	for k := range n {
		v, err := strconv.Atoi(row[idx[5+k]])
		if err != nil || v < 1 {
			return Observed{}, fmt.Errorf("column %s: want tokens >= 1, got %q", loadgenColumns[5+k], row[idx[5+k]])
		}
		n[k] = v
	}
	arr, first, fin := seconds(f[0]/1e3), seconds(f[1]/1e3), seconds(f[2]/1e3)
	if first <= arr || fin < first {
		return Observed{}, fmt.Errorf("arrival %v, first token %v, finish %v: want arrival < first token <= finish", arr, first, fin)
	}
	return Observed{Arrival: arr, PromptTokens: n[0], OutputTokens: n[1], TTFT: first - arr, E2E: fin - arr}, nil
}
