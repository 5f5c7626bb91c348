package workloads

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors; ParseError and config errors wrap them where they apply.
var (
	// ErrMalformed marks input that does not follow its format (JSON, JSONL, CSV, YAML).
	ErrMalformed = errors.New("malformed input")
	// ErrOutOfOrder marks a trace whose timestamps go backwards.
	ErrOutOfOrder = errors.New("timestamps go backwards")
	// ErrNotSeekable marks a dataset that must be shuffled but cannot be read at offsets.
	ErrNotSeekable = errors.New("file cannot be read at offsets")
	// ErrNoRequests marks a dataset or trace that yields no request at all (an empty file, a
	// header with no rows, or every record dropped by the filters), such as a failed download.
	ErrNoRequests = errors.New("no requests")
)

// ParseError locates a problem in a dataset or trace file.
type ParseError struct {
	// File is the name the reader was given, usually the path.
	File string
	// Line is the 1-based line of the problem, or 0 when the format is not line-based.
	Line int
	// Record is the 1-based number of the record (JSON array element, JSONL line or CSV data
	// row), or 0 when the problem is not inside a record.
	Record int
	// Offset is the byte offset of the problem or of its record, or -1 when unknown.
	Offset int64
	// Field names the offending field, such as "input_length" or "conversations[2].value";
	// it is empty when the record as a whole is at fault.
	Field string
	// Err is the underlying problem.
	Err error
}

// Error formats the location and the problem on one line.
func (e *ParseError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "workloads: %s", e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, " line %d", e.Line)
	}
	if e.Record > 0 {
		fmt.Fprintf(&b, " record %d", e.Record)
	}
	if e.Offset >= 0 && e.Line == 0 {
		fmt.Fprintf(&b, " (byte %d)", e.Offset)
	}
	if e.Field != "" {
		fmt.Fprintf(&b, " field %s", e.Field)
	}
	fmt.Fprintf(&b, ": %v", e.Err)
	return b.String()
}

// Unwrap returns the underlying problem.
func (e *ParseError) Unwrap() error { return e.Err }

// malformed wraps a description of a format problem so that errors.Is(err, ErrMalformed).
func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}
