package workloads

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"time"
)

// MooncakeRecord is one line of a Mooncake trace: `{"timestamp": ms, "input_length",
// "output_length", "hash_ids": […]}`.
type MooncakeRecord struct {
	// Timestamp is the arrival time as written in the trace (milliseconds there).
	Timestamp time.Duration
	// InputLength is the prompt length, tokens.
	InputLength int
	// OutputLength is the answer length, tokens.
	OutputLength int
	// HashIDs names the prompt's blocks of (usually 512) tokens; equal ids are equal blocks,
	// and since the hashes are chained, equal ids also mean equal prefixes.
	HashIDs []int64
}

// mooncakeLine is the JSON shape; pointers tell missing fields from zeros.
type mooncakeLine struct {
	Timestamp    *float64 `json:"timestamp"`
	InputLength  *int     `json:"input_length"`
	OutputLength *int     `json:"output_length"`
	HashIDs      []int64  `json:"hash_ids"`
}

// maxLineBytes bounds one line of a line-based trace.
const maxLineBytes = 16 << 20

// maxTraceMillis bounds timestamps (about 292 years fit a Duration; 100 years is plenty).
const maxTraceMillis = 100 * 365 * 24 * 3600 * 1000.0

// MooncakeReader streams the records of a Mooncake JSONL trace, one line at a time.
type MooncakeReader struct {
	sc   *bufio.Scanner
	name string
	line int
	rec  int
	last time.Duration
	err  error
}

// NewMooncakeReader returns a reader of r; name labels errors (usually the path).
func NewMooncakeReader(r io.Reader, name string) *MooncakeReader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxLineBytes)
	return &MooncakeReader{sc: sc, name: name}
}

// Next returns the next record, io.EOF after the last one, or a *ParseError naming the line
// and field. Blank lines are skipped; timestamps must not go backwards. Errors are final.
func (r *MooncakeReader) Next() (MooncakeRecord, error) {
	if r.err != nil {
		return MooncakeRecord{}, r.err
	}
	rec, err := r.next()
	if err != nil {
		r.err = err
	}
	return rec, err
}

func (r *MooncakeReader) next() (MooncakeRecord, error) {
	for r.sc.Scan() {
		r.line++
		b := bytes.TrimSpace(r.sc.Bytes())
		if len(b) == 0 {
			continue
		}
		r.rec++
		return r.parse(b)
	}
	if err := r.sc.Err(); err != nil {
		return MooncakeRecord{}, &ParseError{File: r.name, Line: r.line + 1, Offset: -1, Err: malformed("%v", err)}
	}
	return MooncakeRecord{}, io.EOF
}

func (r *MooncakeReader) parse(b []byte) (MooncakeRecord, error) {
	var l mooncakeLine
	if err := json.Unmarshal(b, &l); err != nil {
		pe := jsonError(r.name, r.rec, -1, 0, err)
		pe.Line, pe.Offset = r.line, -1
		return MooncakeRecord{}, pe
	}
	bad := func(field string, err error) (MooncakeRecord, error) {
		return MooncakeRecord{}, &ParseError{File: r.name, Line: r.line, Record: r.rec, Offset: -1, Field: field, Err: err}
	}
	switch {
	case l.Timestamp == nil:
		return bad("timestamp", malformed("missing"))
	case *l.Timestamp < 0 || *l.Timestamp > maxTraceMillis || math.IsNaN(*l.Timestamp):
		return bad("timestamp", malformed("want milliseconds in 0..%g, got %g", maxTraceMillis, *l.Timestamp))
	case l.InputLength == nil:
		return bad("input_length", malformed("missing"))
	case *l.InputLength < 0 || *l.InputLength > 16*maxSegmentTokens:
		return bad("input_length", malformed("want 0..%d tokens, got %d", 16*maxSegmentTokens, *l.InputLength))
	case l.OutputLength == nil:
		return bad("output_length", malformed("missing"))
	case *l.OutputLength < 0 || *l.OutputLength > maxSegmentTokens:
		return bad("output_length", malformed("want 0..%d tokens, got %d", maxSegmentTokens, *l.OutputLength))
	}
	ts := time.Duration(math.Round(*l.Timestamp * float64(time.Millisecond)))
	if ts < r.last {
		return bad("timestamp", fmt.Errorf("%w: %v after %v", ErrOutOfOrder, ts, r.last))
	}
	r.last = ts
	return MooncakeRecord{Timestamp: ts, InputLength: *l.InputLength, OutputLength: *l.OutputLength, HashIDs: l.HashIDs}, nil
}

var _ source = (*mooncakeSource)(nil)

// mooncakeSource replays a Mooncake trace. Hash id h becomes BlockTokens token ids drawn
// from a stream seeded by h alone, so equal ids give equal blocks (and text) in every
// request; a prompt is its blocks in order, cut to input_length (the last block is usually
// partial) and, if the ids do not cover input_length, padded with tokens unique to the
// record. A zero input or output length is requested as 1 token.
type mooncakeSource struct {
	rd    *MooncakeReader
	file  io.Closer
	seed  uint64
	block int
	text  bool
	first time.Duration
	n     int
}

func newMooncakeSource(w WorkloadConfig, seed uint64, o *options) (*mooncakeSource, error) {
	f, err := o.open(w.Path)
	if err != nil {
		return nil, fmt.Errorf("workloads: open mooncake trace: %w", err)
	}
	rd := NewMooncakeReader(bufio.NewReaderSize(f, 1<<20), w.Path)
	return &mooncakeSource{rd: rd, file: f, seed: seed, block: w.BlockTokens, text: o.text, first: -1}, nil
}

func (s *mooncakeSource) next() (*conversation, error) {
	rec, err := s.rd.Next()
	if err != nil {
		return nil, err
	}
	if s.first < 0 {
		s.first = rec.Timestamp
	}
	n := s.n
	s.n++
	tokens := make([]int32, 0, max(rec.InputLength, 1))
	for _, h := range rec.HashIDs {
		if len(tokens) >= rec.InputLength {
			break
		}
		k := min(s.block, rec.InputLength-len(tokens))
		tokens = appendKeyedTokens(tokens, deriveSeed(s.seed, tagBlock, uint64(h)), k)
	}
	if pad := max(rec.InputLength, 1) - len(tokens); pad > 0 {
		tokens = appendKeyedTokens(tokens, deriveSeed(s.seed, tagPad, uint64(n)), pad)
	}
	user := segment{tokens: tokens}
	if s.text {
		user.text = Words(tokens)
	}
	return &conversation{at: rec.Timestamp - s.first, turns: []turn{{user: user, output: max(rec.OutputLength, 1)}}}, nil
}

func (s *mooncakeSource) skipped() int { return 0 }
func (s *mooncakeSource) Close() error { return s.file.Close() }
