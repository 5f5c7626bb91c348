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

// RequestsCSV streams records to requests.csv as they complete. Rows appear in the order
// Write is called, so a caller that runs several simulations at once should give each its own
// writer (or buffer) to keep the file deterministic.
type RequestsCSV struct {
	w *csv.Writer
}

// NewRequestsCSV writes the header to w and returns the writer.
func NewRequestsCSV(w io.Writer) (*RequestsCSV, error) {
	c := &RequestsCSV{w: csv.NewWriter(w)}
	if err := c.w.Write(requestColumns); err != nil {
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
