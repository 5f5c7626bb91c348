package gateway

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// headError is a request head the server refuses, with the status it answers.
type headError struct {
	status int
	msg    string
}

func (e *headError) Error() string { return "gateway: server: " + e.msg }

var (
	errHeadTooLarge = &headError{http.StatusRequestHeaderFieldsTooLarge, "request head too large"}
	errRequestLine  = &headError{http.StatusBadRequest, "malformed request line"}
	errVersion      = &headError{http.StatusHTTPVersionNotSupported, "unsupported HTTP version"}
	errBadField     = &headError{http.StatusBadRequest, "malformed header field"}
	errNoHost       = &headError{http.StatusBadRequest, "missing or repeated Host header"}
	errRequestLen   = &headError{http.StatusBadRequest, "invalid or conflicting Content-Length"}
	errRequestTE    = &headError{http.StatusNotImplemented, "unsupported Transfer-Encoding"}
	errBothLengths  = &headError{http.StatusBadRequest, "both Content-Length and Transfer-Encoding"}
)

// reqHead is the part of a request head the server itself needs, besides what goes into the
// http.Request.
type reqHead struct {
	http10    bool
	keepAlive bool // HTTP/1.0 with Connection: keep-alive
	expect    bool // Expect: 100-continue
	fr        framing
	host      string // the last Host value
	vals      []byte // scratch: the field values, concatenated
	keys      []field
}

// knownTargets are the request targets served without parsing or allocating.
var knownTargets = []string{"/v1/chat/completions", "/v1/completions", "/v1/models", "/health", "/ready", "/metrics"}

// knownMethods are the methods named without allocating.
var knownMethods = []string{http.MethodPost, http.MethodGet, http.MethodHead, http.MethodPut, http.MethodDelete, http.MethodOptions}

// readRequestHead reads a request line and header fields from br into r (Method, URL,
// RequestURI, Proto, Header, Host, ContentLength, TransferEncoding, Close) and h. max bounds
// the head's bytes. A *headError says which status to answer; io.EOF means the client closed
// the connection before sending anything.
func (h *reqHead) read(br *bufio.Reader, r *http.Request, u *url.URL, max int) error {
	budget := max
	line, err := readHeadLine(br, &budget)
	if err != nil {
		return err
	}
	if err := h.requestLine(line, r, u); err != nil {
		return err
	}
	*h = reqHead{http10: h.http10, host: h.host, vals: h.vals[:0], keys: h.keys[:0], fr: framing{length: -1, tokens: h.fr.tokens[:0]}}
	hosts := 0
	for {
		line, err := readHeadLine(br, &budget)
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
		if len(line) == 0 {
			break
		}
		if len(h.keys) == maxFields {
			return errHeadTooLarge
		}
		key, value, err := splitField(line)
		if err != nil {
			return errBadField
		}
		if key == "Host" {
			hosts++
			if string(value) != h.host { // a connection's requests usually name the same host
				h.host = string(value)
			}
			r.Host = h.host
			continue
		}
		if err := h.note(key, value); err != nil {
			return err
		}
		off := len(h.vals)
		h.vals = append(h.vals, value...)
		h.keys = append(h.keys, field{key: key, off: off, end: len(h.vals)})
	}
	if hosts > 1 || (hosts == 0 && !h.http10) {
		return errNoHost
	}
	if u.Host != "" { // absolute form: the target names the host (RFC 9112 §3.2.2)
		r.Host = u.Host
	}
	return h.finish(r)
}

// note records what a field says about the body and the connection.
func (h *reqHead) note(key string, value []byte) error {
	switch key {
	case "Expect":
		h.expect = h.expect || asciiEqualFold(value, "100-continue")
	case "Connection":
		for tok := range strings.SplitSeq(string(value), ",") {
			h.keepAlive = h.keepAlive || strings.EqualFold(strings.TrimSpace(tok), "keep-alive")
		}
	}
	if _, err := h.fr.note(key, value); err != nil {
		if errors.Is(err, errTransferEncoding) {
			return errRequestTE
		}
		return errRequestLen
	}
	return nil
}

// finish fills r's header map and framing fields.
func (h *reqHead) finish(r *http.Request) error {
	fr := &h.fr
	if fr.chunked && fr.length >= 0 {
		return errBothLengths
	}
	if fr.chunked && h.http10 {
		return errRequestTE // HTTP/1.0 has no transfer codings
	}
	vals := string(h.vals)
	strs := make([]string, len(h.keys))
	for i, f := range h.keys {
		strs[i] = vals[f.off:f.end]
		if vs, ok := r.Header[f.key]; ok {
			r.Header[f.key] = append(vs, strs[i])
		} else {
			r.Header[f.key] = strs[i : i+1 : i+1]
		}
	}
	switch {
	case fr.chunked:
		r.ContentLength, r.TransferEncoding = -1, chunkedTE
	case fr.length >= 0:
		r.ContentLength = fr.length
	default:
		r.ContentLength = 0
	}
	r.Close = fr.close || (h.http10 && !h.keepAlive)
	return nil
}

var chunkedTE = []string{"chunked"}

// requestLine parses "METHOD target HTTP/1.x" into r and u.
func (h *reqHead) requestLine(line []byte, r *http.Request, u *url.URL) error {
	sp1 := bytes.IndexByte(line, ' ')
	if sp1 <= 0 {
		return errRequestLine
	}
	rest := line[sp1+1:]
	sp2 := bytes.IndexByte(rest, ' ')
	if sp2 <= 0 {
		return errRequestLine
	}
	method, target, proto := line[:sp1], rest[:sp2], rest[sp2+1:]
	for _, c := range method {
		if !isTokenByte(c) {
			return errRequestLine
		}
	}
	switch string(proto) {
	case "HTTP/1.1":
		h.http10, r.Proto, r.ProtoMinor = false, "HTTP/1.1", 1
	case "HTTP/1.0":
		h.http10, r.Proto, r.ProtoMinor = true, "HTTP/1.0", 0
	default:
		return errVersion
	}
	r.ProtoMajor = 1
	r.Method = intern(method, knownMethods)
	if t, ok := lookup(target, knownTargets); ok {
		*u = url.URL{Path: t}
		r.RequestURI = t
	} else {
		t := string(target)
		pu, err := url.ParseRequestURI(t)
		if err != nil {
			return errRequestLine
		}
		*u, r.RequestURI = *pu, t
	}
	r.URL = u
	return nil
}

// lookup returns the string of known equal to b, if there is one.
func lookup(b []byte, known []string) (string, bool) {
	for _, k := range known {
		if string(b) == k {
			return k, true
		}
	}
	return "", false
}

// intern returns the string of known equal to b, or b as a new string.
func intern(b []byte, known []string) string {
	if s, ok := lookup(b, known); ok {
		return s
	}
	return string(b)
}

// readHeadLine reads one line of a request head, charging it to budget.
func readHeadLine(br *bufio.Reader, budget *int) ([]byte, error) {
	line, err := readLine(br)
	if err == errLineTooLong {
		return nil, errHeadTooLarge
	}
	*budget -= len(line) + 2
	if err == nil && *budget < 0 {
		return nil, errHeadTooLarge
	}
	return line, err
}
