package gateway

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/textproto"
	"strings"
)

// maxFields bounds the header fields of one message.
const maxFields = 128

// Errors in an HTTP/1.1 message head.
var (
	errStatusLine       = errors.New("gateway: malformed HTTP status line")
	errFieldLine        = errors.New("gateway: malformed HTTP header field")
	errTooManyFields    = errors.New("gateway: too many HTTP header fields")
	errContentLength    = errors.New("gateway: invalid or conflicting Content-Length")
	errTransferEncoding = errors.New("gateway: unsupported Transfer-Encoding")
	errUpgrade          = errors.New("gateway: unexpected 101 Switching Protocols")
)

// field is one header field: its canonical name and its value. off and end locate the value
// in the head's scratch buffer until the value string is made.
type field struct {
	key, value string
	off, end   int
}

// framing is what a message's head says about its body and its connection.
type framing struct {
	length  int64 // Content-Length, -1 when absent
	chunked bool  // Transfer-Encoding: chunked
	close   bool  // Connection: close
	tokens  []string
}

// respHead is the head of an HTTP/1.1 response as the proxy needs it. Its buffers are reused
// from one response to the next.
type respHead struct {
	status int
	mode   bodyMode
	length int64   // body length for bodyLength
	close  bool    // the server closes the connection after this response
	stream bool    // Content-Type is text/event-stream
	fields []field // the end-to-end fields to forward, in order
	vals   []byte  // scratch: the fields' values, concatenated
	fr     framing
}

// read reads a response's status line and header fields from br, skipping interim (1xx)
// responses, and works out how the body is delimited.
func (h *respHead) read(br *bufio.Reader) error {
	for {
		line, err := readLine(br)
		if err != nil {
			return err
		}
		status, http10, err := parseStatusLine(line)
		if err != nil {
			return err
		}
		h.status, h.stream, h.close = status, false, http10
		h.fields, h.vals, h.fr = h.fields[:0], h.vals[:0], framing{length: -1, tokens: h.fr.tokens[:0]}
		if err := h.readFields(br); err != nil {
			return err
		}
		if http10 && h.fr.chunked {
			return errTransferEncoding // HTTP/1.0 has no transfer codings
		}
		if status == 101 {
			return errUpgrade
		}
		if status >= 200 {
			break
		}
	}
	h.finish()
	return nil
}

// finish sets the body mode from the framing fields and makes the value strings.
func (h *respHead) finish() {
	fr := &h.fr
	h.close = h.close || fr.close
	switch {
	case h.status == 204 || h.status == 304:
		h.mode, h.length = bodyLength, 0
	case fr.chunked:
		h.mode = bodyChunked
	case fr.length >= 0:
		h.mode, h.length = bodyLength, fr.length
	default:
		h.mode, h.close = bodyClose, true
	}
	if h.mode != bodyLength {
		fr.tokens = append(fr.tokens, "Content-Length") // forwarded only when it delimits the body
	}
	h.fields = dropNamed(h.fields, fr.tokens)
	vals := string(h.vals)
	for i := range h.fields {
		h.fields[i].value = vals[h.fields[i].off:h.fields[i].end]
	}
}

// readFields reads header fields up to the blank line, keeping the end-to-end ones.
func (h *respHead) readFields(br *bufio.Reader) error {
	for range maxFields {
		line, err := readLine(br)
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		if err != nil {
			return err
		}
		if len(line) == 0 {
			return nil
		}
		key, value, err := splitField(line)
		if err != nil {
			return err
		}
		if hop, err := h.fr.note(key, value); err != nil || hop {
			if err != nil {
				return err
			}
			continue
		}
		if key == "Content-Type" {
			h.stream = bytes.HasPrefix(value, []byte("text/event-stream"))
		}
		off := len(h.vals)
		h.vals = append(h.vals, value...)
		h.fields = append(h.fields, field{key: key, off: off, end: len(h.vals)})
	}
	return errTooManyFields
}

// note records what a field says about framing and reports whether it is hop-by-hop, that
// is, not to be forwarded (RFC 9110 §7.6.1).
func (fr *framing) note(key string, value []byte) (hop bool, err error) {
	switch key {
	case "Content-Length":
		n, ok := parseLength(value)
		if !ok || (fr.length >= 0 && fr.length != n) {
			return false, errContentLength
		}
		fr.length = n
	case "Transfer-Encoding":
		if !asciiEqualFold(value, "chunked") {
			return true, errTransferEncoding
		}
		fr.chunked = true
		return true, nil
	case "Connection":
		for tok := range strings.SplitSeq(string(value), ",") {
			tok = textproto.TrimString(tok)
			if strings.EqualFold(tok, "close") {
				fr.close = true
			} else if tok != "" {
				fr.tokens = append(fr.tokens, textproto.CanonicalMIMEHeaderKey(tok))
			}
		}
		return true, nil
	case "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate", "Proxy-Authorization", "Te", "Trailer", "Upgrade":
		return true, nil
	}
	return false, nil
}

// dropNamed removes the fields whose names the Connection header listed.
func dropNamed(fields []field, names []string) []field {
	if len(names) == 0 {
		return fields
	}
	out := fields[:0]
	for _, f := range fields {
		named := false
		for _, n := range names {
			named = named || f.key == n
		}
		if !named {
			out = append(out, f)
		}
	}
	return out
}

// parseStatusLine parses "HTTP/1.x NNN reason".
func parseStatusLine(line []byte) (status int, http10 bool, err error) {
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[8] != ' ' ||
		(len(line) > 12 && line[12] != ' ') {
		return 0, false, errStatusLine
	}
	switch line[7] {
	case '0':
		http10 = true
	case '1':
	default:
		return 0, false, errStatusLine
	}
	for _, c := range line[9:12] {
		if c < '0' || c > '9' {
			return 0, false, errStatusLine
		}
		status = status*10 + int(c-'0')
	}
	if status < 100 {
		return 0, false, errStatusLine
	}
	return status, http10, nil
}

// splitField splits "Name: value" into the canonical name and the value without the
// whitespace around it. Names must be tokens; values must not hold control characters other
// than tab, and obsolete line folding is refused.
func splitField(line []byte) (string, []byte, error) {
	i := bytes.IndexByte(line, ':')
	if i <= 0 {
		return "", nil, errFieldLine
	}
	name := line[:i]
	for _, c := range name {
		if !isTokenByte(c) {
			return "", nil, errFieldLine
		}
	}
	value := trimOWS(line[i+1:])
	for _, c := range value {
		if c < 0x20 && c != '\t' || c == 0x7f {
			return "", nil, errFieldLine
		}
	}
	return canonicalKey(name), value, nil
}

// commonKeys are the canonical names canonicalKey returns without allocating.
var commonKeys = []string{
	"Accept", "Accept-Encoding", "Authorization", "Cache-Control", "Connection", "Content-Length",
	"Content-Type", "Date", "Expect", "Host", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Proxy-Connection", "Server", "Te", "Trailer", "Transfer-Encoding",
	"Upgrade", "User-Agent", "Vary", "X-Request-Id", "X-Session-Id",
}

// canonicalKey returns the canonical form of a header name made of token bytes.
func canonicalKey(name []byte) string {
	for _, k := range commonKeys {
		if asciiEqualFold(name, k) {
			return k
		}
	}
	return textproto.CanonicalMIMEHeaderKey(string(name))
}

func asciiEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range len(b) {
		if lower(b[i]) != lower(s[i]) {
			return false
		}
	}
	return true
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

func trimOWS(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}

// parseLength parses a Content-Length value: 1 to 18 decimal digits.
func parseLength(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// isTokenByte reports whether c may appear in a token (RFC 9110 §5.6.2).
func isTokenByte(c byte) bool {
	if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' {
		return true
	}
	return c < 0x80 && strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}
