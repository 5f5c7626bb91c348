package workloads

import (
	"errors"
	"fmt"
	"io"
)

// fileSource is a source read from a file: it knows the file's name.
type fileSource interface {
	source
	path() string
}

func (s *shareGPTSource) path() string { return s.w.Path }
func (s *mooncakeSource) path() string { return s.rd.name }
func (s *azureSource) path() string    { return s.rd.name }

// nonEmpty wraps a file source so that a file yielding no conversation at all fails with a
// *ParseError naming it and wrapping ErrNoRequests, instead of a run of zero requests that
// exits cleanly (an empty download, a CSV header with no rows, `[]`, or every record
// dropped by the filters).
func nonEmpty[S fileSource](src S, err error) (source, error) {
	if err != nil {
		return nil, err
	}
	return &countingSource{fileSource: src}, nil
}

// countingSource counts the conversations its source produced.
type countingSource struct {
	fileSource
	n int
}

func (c *countingSource) next() (*conversation, error) {
	conv, err := c.fileSource.next()
	switch {
	case err == nil:
		c.n++
	case errors.Is(err, io.EOF) && c.n == 0:
		why := "the file holds no records"
		if k := c.skipped(); k > 0 {
			why = fmt.Sprintf("the filters dropped all %d records", k)
		}
		return nil, &ParseError{File: c.path(), Offset: -1, Err: fmt.Errorf("%w: %s", ErrNoRequests, why)}
	}
	return conv, err
}
