package results

import (
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
	"time"
)

// requestColumns is requests.csv's header: a run name, every Record field, then the derived
// latencies. Times are milliseconds from the start of the run.
var requestColumns = []string{
	"run", "id", "tenant", "session", "turn", "prefix_group", "endpoint", "reason", "status", "error",
	"arrival_ms", "first_token_ms", "finish_ms", "prompt_tokens", "cached_tokens", "output_tokens",
	"preemptions", "retries", "ttft_ms", "tpot_ms", "e2e_ms",
}

// pdColumns follow requestColumns in the requests.csv of a sweep with a fleet split into
// prefill and decode pools (RequestsCSVOpts.PD).
var pdColumns = []string{"prefill_endpoint", "kv_transfer_ms"}

// RequestsCSVOpts are the options of a requests.csv.
type RequestsCSVOpts struct {
	// PD adds the P/D columns (prefill_endpoint, kv_transfer_ms) after the others: set for
	// every run of a sweep that has a P/D fleet, so that its file has one header. Without
	// it the file is as it was before P/D fleets existed.
	PD bool
}

// RequestsCSV streams records to requests.csv as they complete. Rows appear in the order
// Write is called, so a caller that runs several simulations at once should give each its own
// writer (or buffer) to keep the file deterministic.
type RequestsCSV struct {
	w  *csv.Writer
	pd bool
}

// NewRequestsCSV writes the header to w and returns the writer.
func NewRequestsCSV(w io.Writer) (*RequestsCSV, error) {
	return NewRequestsCSVOpts(w, RequestsCSVOpts{})
}

// NewRequestsCSVOpts is NewRequestsCSV with options.
func NewRequestsCSVOpts(w io.Writer, o RequestsCSVOpts) (*RequestsCSV, error) {
	c := &RequestsCSV{w: csv.NewWriter(w), pd: o.PD}
	header := requestColumns
	if o.PD {
		header = append(append([]string(nil), requestColumns...), pdColumns...)
	}
	if err := c.w.Write(header); err != nil {
		return nil, fmt.Errorf("results: requests.csv: %w", err)
	}
	return c, nil
}

// Write appends r as a row of run. TTFT and TPOT cells are empty when not defined.
func (c *RequestsCSV) Write(run string, r *Record) error {
	opt := func(d time.Duration, ok bool) string {
		if !ok {
			return ""
		}
		return msString(d)
	}
	ft := ""
	if r.FirstToken > 0 {
		ft = msString(r.FirstToken)
	}
	row := []string{run, r.ID, r.Tenant, r.Session, strconv.Itoa(r.Turn), r.PrefixGroup, r.Endpoint, r.Reason,
		string(r.Status), r.Error, msString(r.Arrival), ft, msString(r.Finish),
		strconv.Itoa(r.PromptTokens), strconv.Itoa(r.CachedTokens), strconv.Itoa(r.OutputTokens),
		strconv.Itoa(r.Preemptions), strconv.Itoa(r.Retries),
		opt(r.TTFT()), opt(r.TPOT()), msString(r.Finish - r.Arrival)}
	if c.pd {
		row = append(row, r.PrefillEndpoint, opt(r.KVTransfer, r.PrefillEndpoint != ""))
	}
	if err := c.w.Write(row); err != nil {
		return fmt.Errorf("results: requests.csv: %w", err)
	}
	return nil
}

// Flush writes any buffered rows to the underlying writer.
func (c *RequestsCSV) Flush() error {
	c.w.Flush()
	if err := c.w.Error(); err != nil {
		return fmt.Errorf("results: requests.csv: %w", err)
	}
	return nil
}

// msString formats d in milliseconds, exactly (to the nanosecond).
func msString(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/1e6, 'f', -1, 64)
}
