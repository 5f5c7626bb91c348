package workloads

import (
	"bufio"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// AzureRecord is one row of an Azure LLM inference trace
// (`TIMESTAMP,ContextTokens,GeneratedTokens`) or of Vidur's processed copy of it
// (`arrived_at,num_prefill_tokens,num_decode_tokens`, arrival in seconds).
type AzureRecord struct {
	// Arrival is the row's time since the first row's.
	Arrival time.Duration
	// ContextTokens is the prompt length, tokens.
	ContextTokens int
	// GeneratedTokens is the answer length, tokens.
	GeneratedTokens int
}

// The TIMESTAMP formats accepted (2023 and 2024 releases).
const (
	azureLayout     = "2006-01-02 15:04:05.999999999"
	azureLayoutZone = "2006-01-02 15:04:05.999999999Z07:00"
	azureLayoutISO  = "2006-01-02T15:04:05.999999999Z07:00"
)

// AzureReader streams the rows of an Azure trace CSV. The header names the columns (in any
// order, extra columns ignored); timestamps must not go backwards.
type AzureReader struct {
	cr      *csv.Reader
	name    string
	cols    [3]int // time, context, generated
	seconds bool   // time column holds seconds (Vidur), not datetimes
	started bool
	first   time.Time
	firstS  float64
	last    time.Duration
	rec     int
	err     error
}

// NewAzureReader returns a reader of r; name labels errors (usually the path).
func NewAzureReader(r io.Reader, name string) *AzureReader {
	cr := csv.NewReader(r)
	cr.ReuseRecord = true
	cr.FieldsPerRecord = -1
	return &AzureReader{cr: cr, name: name}
}

// Next returns the next row, io.EOF after the last one, or a *ParseError naming the line and
// column. Errors are final.
func (r *AzureReader) Next() (AzureRecord, error) {
	if r.err != nil {
		return AzureRecord{}, r.err
	}
	rec, err := r.next()
	if err != nil {
		r.err = err
	}
	return rec, err
}

func (r *AzureReader) next() (AzureRecord, error) {
	if !r.started {
		if err := r.header(); err != nil {
			return AzureRecord{}, err
		}
		r.started = true
	}
	row, err := r.cr.Read()
	if errors.Is(err, io.EOF) {
		return AzureRecord{}, io.EOF
	}
	if err != nil {
		return AzureRecord{}, r.csvError(err)
	}
	r.rec++
	return r.parse(row)
}

func (r *AzureReader) header() error {
	row, err := r.cr.Read()
	if errors.Is(err, io.EOF) {
		return &ParseError{File: r.name, Line: 1, Offset: -1, Err: malformed("empty file, want a header")}
	}
	if err != nil {
		return r.csvError(err)
	}
	names := [2][3]string{{"timestamp", "contexttokens", "generatedtokens"},
		{"arrived_at", "num_prefill_tokens", "num_decode_tokens"}}
	for v, want := range names {
		found := [3]int{-1, -1, -1}
		for i, h := range row {
			for k, w := range want {
				if strings.EqualFold(strings.TrimSpace(strings.TrimPrefix(h, "\ufeff")), w) {
					found[k] = i
				}
			}
		}
		if found[0] >= 0 && found[1] >= 0 && found[2] >= 0 {
			r.cols, r.seconds = found, v == 1
			return nil
		}
	}
	return &ParseError{File: r.name, Line: 1, Offset: -1,
		Err: malformed("header must name TIMESTAMP,ContextTokens,GeneratedTokens (or arrived_at,num_prefill_tokens,num_decode_tokens)")}
}

func (r *AzureReader) csvError(err error) error {
	pe := &ParseError{File: r.name, Offset: -1, Err: malformed("%v", err)}
	var ce *csv.ParseError
	if errors.As(err, &ce) {
		pe.Line, pe.Err = ce.Line, malformed("%v", ce.Err)
	}
	return pe
}

func (r *AzureReader) parse(row []string) (AzureRecord, error) {
	line, _ := r.cr.FieldPos(0)
	bad := func(col int, err error) (AzureRecord, error) {
		field := ""
		if col >= 0 {
			field = []string{"TIMESTAMP", "ContextTokens", "GeneratedTokens"}[col]
		}
		return AzureRecord{}, &ParseError{File: r.name, Line: line, Record: r.rec, Offset: -1, Field: field, Err: err}
	}
	for k, c := range r.cols {
		if c >= len(row) {
			return bad(k, malformed("missing column"))
		}
	}
	at, err := r.arrival(row[r.cols[0]])
	if err != nil {
		return bad(0, err)
	}
	var n [2]int
	for k := range n {
		v, err := strconv.Atoi(strings.TrimSpace(row[r.cols[k+1]]))
		if err != nil || v < 0 || v > 16*maxSegmentTokens {
			return bad(k+1, malformed("want tokens in 0..%d, got %q", 16*maxSegmentTokens, row[r.cols[k+1]]))
		}
		n[k] = v
	}
	if at < r.last {
		return bad(0, fmt.Errorf("%w: %v after %v", ErrOutOfOrder, at, r.last))
	}
	r.last = at
	return AzureRecord{Arrival: at, ContextTokens: n[0], GeneratedTokens: n[1]}, nil
}

// arrival parses a time cell into the offset from the first row.
func (r *AzureReader) arrival(cell string) (time.Duration, error) {
	cell = strings.TrimSpace(cell)
	if r.seconds {
		s, err := strconv.ParseFloat(cell, 64)
		if err != nil || math.IsNaN(s) || math.Abs(s) > maxTraceMillis/1000 {
			return 0, malformed("want seconds, got %q", cell)
		}
		if r.rec == 1 {
			r.firstS = s
		}
		return seconds(s - r.firstS), nil
	}
	for _, layout := range [...]string{azureLayout, azureLayoutZone, azureLayoutISO} {
		t, err := time.Parse(layout, cell)
		if err != nil {
			continue
		}
		if r.rec == 1 {
			r.first = t
		}
		d := t.Sub(r.first)
		if d == math.MaxInt64 || d == math.MinInt64 {
			return 0, malformed("timestamp %q is too far from the first row's", cell)
		}
		return d, nil
	}
	return 0, malformed("want a timestamp like 2023-11-16 18:15:46.6805900, got %q", cell)
}

var _ source = (*azureSource)(nil)

// azureSource replays an Azure trace. The trace has lengths but no content, so every prompt
// is ContextTokens token ids unique to its row (no prefix is shared). A zero length is
// requested as 1 token.
type azureSource struct {
	rd   *AzureReader
	file io.Closer
	seed uint64
	text bool
	n    int
}

func newAzureSource(w WorkloadConfig, seed uint64, o *options) (*azureSource, error) {
	f, err := o.open(w.Path)
	if err != nil {
		return nil, fmt.Errorf("workloads: open azure trace: %w", err)
	}
	return &azureSource{rd: NewAzureReader(bufio.NewReaderSize(f, 1<<20), w.Path), file: f, seed: seed, text: o.text}, nil
}

func (s *azureSource) next() (*conversation, error) {
	rec, err := s.rd.Next()
	if err != nil {
		return nil, err
	}
	n := s.n
	s.n++
	user := keyedSegment(deriveSeed(s.seed, tagRecord, uint64(n)), max(rec.ContextTokens, 1), s.text)
	return &conversation{at: rec.Arrival, turns: []turn{{user: user, output: max(rec.GeneratedTokens, 1)}}}, nil
}

func (s *azureSource) skipped() int { return 0 }
func (s *azureSource) Close() error { return s.file.Close() }
