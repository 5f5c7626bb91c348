package gateway

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// bodyMode is how an HTTP/1.1 message body is delimited (RFC 9112 §6.3).
type bodyMode uint8

const (
	bodyLength  bodyMode = iota // Content-Length bytes (0 for none)
	bodyChunked                 // chunked transfer coding
	bodyClose                   // until the connection closes (responses only)
)

// Errors in the framing of an HTTP/1.1 message.
var (
	errChunkSize   = errors.New("gateway: malformed chunk size")
	errChunkCRLF   = errors.New("gateway: chunk data not followed by CRLF")
	errLineTooLong = errors.New("gateway: HTTP line too long")
	errTrailers    = errors.New("gateway: too many trailer fields")
	errChunkLF     = errors.New("gateway: chunked framing line ends with a bare LF")
)

// maxTrailers bounds the trailer fields skipped at the end of a chunked body.
const maxTrailers = 64

// body reads one message body from a buffered connection. Read returns at most one chunk's
// worth of data and never waits for more once it has some, so a stream is relayed as it
// arrives; it returns io.EOF together with the last data when the end is already buffered,
// so the connection can be reused without another read.
type body struct {
	br   *bufio.Reader
	mode bodyMode
	left int64 // bytes left: of the body (bodyLength) or of the current chunk (bodyChunked)
	crlf bool  // chunked: the CRLF after the current chunk's data is still to be read
	eof  bool  // the body ended where its framing says it ends
}

// reset starts a body of the given mode on br; n is its length for bodyLength.
func (b *body) reset(br *bufio.Reader, mode bodyMode, n int64) {
	*b = body{br: br, mode: mode, left: n, eof: mode == bodyLength && n == 0}
}

// done reports whether the whole body has been read and its framing consumed.
func (b *body) done() bool { return b.eof }

// Read reads body bytes into p.
func (b *body) Read(p []byte) (int, error) {
	if b.eof {
		return 0, io.EOF
	}
	switch b.mode {
	case bodyLength:
		return b.readLength(p)
	case bodyChunked:
		return b.readChunked(p)
	}
	n, err := b.br.Read(p)
	if err == io.EOF {
		b.eof = true
	}
	return n, err
}

func (b *body) readLength(p []byte) (int, error) {
	if b.left == 0 {
		b.eof = true
		return 0, io.EOF
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.br.Read(p)
	b.left -= int64(n)
	if b.left == 0 {
		b.eof = true
		return n, io.EOF
	}
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

func (b *body) readChunked(p []byte) (int, error) {
	if b.left == 0 {
		if err := b.nextChunk(); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF // the connection closed inside the body
			}
			return 0, err
		}
		if b.eof {
			return 0, io.EOF
		}
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.br.Read(p)
	b.left -= int64(n)
	if err == io.EOF {
		return n, io.ErrUnexpectedEOF
	}
	if err != nil || b.left > 0 || !b.framingBuffered() {
		return n, err
	}
	// The framing that follows is here already: consuming it now shows the caller the end
	// of the body without another read on the connection.
	if err := b.nextChunk(); err != nil {
		return n, err
	}
	if b.eof {
		return n, io.EOF
	}
	return n, nil
}

// nextChunk reads the CRLF ending the previous chunk, if any, and the next chunk's size line;
// after the last chunk it skips the trailer fields and marks the body done.
func (b *body) nextChunk() error {
	if b.crlf {
		line, err := readChunkLine(b.br)
		if err != nil {
			return err
		}
		if len(line) != 0 {
			return errChunkCRLF
		}
		b.crlf = false
	}
	line, err := readChunkLine(b.br)
	if err != nil {
		return err
	}
	n, err := parseChunkSize(line)
	if err != nil {
		return err
	}
	if n > 0 {
		b.left, b.crlf = n, true
		return nil
	}
	for range maxTrailers {
		line, err := readChunkLine(b.br)
		if err != nil {
			return err
		}
		if len(line) == 0 {
			b.eof = true
			return nil
		}
		if _, _, err := splitField(line); err != nil {
			return err
		}
	}
	return errTrailers
}

// framingBuffered reports whether the buffer holds everything nextChunk would read: the
// CRLF, the next size line and, when that size is 0, the blank line that ends the body.
func (b *body) framingBuffered() bool {
	buf, _ := b.br.Peek(b.br.Buffered())
	lines := 0
	for want := 2; lines < want; lines++ {
		i := bytes.IndexByte(buf, '\n')
		if i < 0 {
			return false
		}
		if lines == 1 {
			if n, err := parseChunkSize(trimCR(buf[:i])); err == nil && n == 0 {
				want = 3
			}
		}
		buf = buf[i+1:]
	}
	return true
}

// parseChunkSize parses a chunk-size line: hex digits, then optional whitespace and chunk
// extensions, which are ignored.
func parseChunkSize(line []byte) (int64, error) {
	var n int64
	i := 0
	for ; i < len(line); i++ {
		d, ok := hexDigit(line[i])
		if !ok {
			break
		}
		if i >= 15 { // 16 hex digits could overflow int64
			return 0, errChunkSize
		}
		n = n<<4 | int64(d)
	}
	if i == 0 {
		return 0, errChunkSize
	}
	for ; i < len(line); i++ {
		switch line[i] {
		case ' ', '\t':
		case ';':
			return n, nil
		default:
			return 0, errChunkSize
		}
	}
	return n, nil
}

func hexDigit(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// readLine reads one line ending in LF (an optional CR before it is dropped). A line longer
// than the reader's buffer is an error.
func readLine(br *bufio.Reader) ([]byte, error) {
	line, err := readRawLine(br)
	if err != nil {
		return nil, err
	}
	return trimCR(line[:len(line)-1]), nil
}

// readChunkLine reads a line of chunked framing, which must end in CRLF: a bare LF there
// is refused, as net/http refuses it, so that no two parsers split a body differently.
func readChunkLine(br *bufio.Reader) ([]byte, error) {
	line, err := readRawLine(br)
	if err != nil {
		return nil, err
	}
	if len(line) < 2 || line[len(line)-2] != '\r' {
		return nil, errChunkLF
	}
	return line[:len(line)-2], nil
}

// readRawLine reads one line with its LF; a line longer than the reader's buffer, or one cut
// by the end of the stream, is an error.
func readRawLine(br *bufio.Reader) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	switch {
	case err == bufio.ErrBufferFull:
		return nil, errLineTooLong
	case err == io.EOF && len(line) > 0:
		return nil, io.ErrUnexpectedEOF
	case err != nil:
		return nil, err
	}
	return line, nil
}

func trimCR(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\r' {
		return b[:n-1]
	}
	return b
}
