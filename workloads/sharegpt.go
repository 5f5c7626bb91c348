package workloads

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// ShareGPTConversation is one element of the public ShareGPT JSON array
// (`[{"id", "conversations": [{"from", "value"}, …]}, …]`). Other keys are ignored.
type ShareGPTConversation struct {
	// ID is the conversation's id in the dataset.
	ID string `json:"id"`
	// Conversations lists the messages in order.
	Conversations []ShareGPTMessage `json:"conversations"`
}

// ShareGPTMessage is one message of a ShareGPT conversation.
type ShareGPTMessage struct {
	// From is the author: "human" or "gpt" in the public file ("user", "assistant",
	// "system", "chatgpt", "bing" and "bard" also occur in variants).
	From string `json:"from"`
	// Value is the message text.
	Value string `json:"value"`
}

// ShareGPTReader streams the conversations of a ShareGPT JSON array one at a time, so memory
// does not grow with the file (the ~640 MB public file included).
type ShareGPTReader struct {
	dec     *json.Decoder
	name    string
	record  int
	offset  int64
	started bool
	err     error
}

// NewShareGPTReader returns a reader of r; name labels errors (usually the path).
func NewShareGPTReader(r io.Reader, name string) *ShareGPTReader {
	return &ShareGPTReader{dec: json.NewDecoder(r), name: name}
}

// Next returns the next conversation, io.EOF after the last one, or a *ParseError naming the
// record (1-based array element), its byte offset and the offending field. Errors are final.
func (r *ShareGPTReader) Next() (ShareGPTConversation, error) {
	if r.err != nil {
		return ShareGPTConversation{}, r.err
	}
	c, err := r.next()
	if err != nil {
		r.err = err
	}
	return c, err
}

func (r *ShareGPTReader) next() (ShareGPTConversation, error) {
	if !r.started {
		r.started = true
		tok, err := r.dec.Token()
		if err != nil || tok != json.Delim('[') {
			return ShareGPTConversation{}, r.fail(0, "", malformed("want a JSON array of conversations"))
		}
	}
	if !r.dec.More() {
		return ShareGPTConversation{}, r.end()
	}
	r.record++
	r.offset = r.dec.InputOffset()
	var c ShareGPTConversation
	if err := r.dec.Decode(&c); err != nil {
		return ShareGPTConversation{}, jsonError(r.name, r.record, r.offset, 0, err)
	}
	return c, nil
}

// end consumes the closing bracket and checks that nothing but space follows.
func (r *ShareGPTReader) end() error {
	tok, err := r.dec.Token()
	if err != nil || tok != json.Delim(']') {
		return r.fail(0, "", malformed("want ',' or ']' after array element"))
	}
	if _, err := r.dec.Token(); !errors.Is(err, io.EOF) {
		return r.fail(0, "", malformed("data after the closing ']'"))
	}
	return io.EOF
}

func (r *ShareGPTReader) fail(record int, field string, err error) error {
	return &ParseError{File: r.name, Record: record, Offset: r.dec.InputOffset(), Field: field, Err: err}
}

// Offset returns the byte offset at which the latest conversation returned by Next begins
// (possibly at the separating comma or white space before it).
func (r *ShareGPTReader) Offset() int64 { return r.offset }

// jsonError turns a decoding error of the record starting at offset into a *ParseError;
// base is the file offset at which the decoder started reading.
func jsonError(name string, record int, offset, base int64, err error) *ParseError {
	pe := &ParseError{File: name, Record: record, Offset: offset, Err: err}
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		pe.Field = te.Field
		pe.Offset = base + te.Offset
		pe.Err = malformed("want %s, got JSON %s", te.Type, te.Value)
	case errors.As(err, &se):
		pe.Offset = base + se.Offset
		pe.Err = malformed("%v", se)
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		pe.Err = malformed("file ends inside the record")
	}
	return pe
}

// readShareGPTAt decodes the conversation that starts at off (after optional white space
// and one comma) in a file of size bytes.
func readShareGPTAt(ra io.ReaderAt, size, off int64, name string, record int) (ShareGPTConversation, error) {
	br := bufio.NewReader(io.NewSectionReader(ra, off, size-off))
	base := off
	for {
		b, err := br.ReadByte()
		if err != nil {
			return ShareGPTConversation{}, &ParseError{File: name, Record: record, Offset: off,
				Err: fmt.Errorf("%w: file changed since it was indexed", ErrMalformed)}
		}
		if b != ' ' && b != '\t' && b != '\n' && b != '\r' && b != ',' {
			_ = br.UnreadByte() // cannot fail right after ReadByte
			break
		}
		base++
	}
	var c ShareGPTConversation
	if err := json.NewDecoder(br).Decode(&c); err != nil {
		return c, jsonError(name, record, off, base, err)
	}
	return c, nil
}
