package gateway

import (
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// maxBuffered is how many body bytes a response holds back before it commits to chunked
// encoding: a handler that writes less and returns without flushing gets a Content-Length
// and goes out in one write.
const maxBuffered = 32 << 10

// respWriter is the http.ResponseWriter and http.Flusher of one request on a serverConn. It is
// reused from one request to the next on its connection.
type respWriter struct {
	c       *serverConn
	header  http.Header
	status  int  // 0 until WriteHeader
	sent    bool // the head has gone out
	chunked bool
	noBody  bool  // a HEAD request, or a status that has no body
	clen    int64 // the handler's Content-Length, -1 when it set none
	written int64 // body bytes the handler wrote
	buf     []byte
	out     []byte // scratch: what one write to the connection sends
	err     error  // the first failed write to the connection
	close   bool   // close the connection after this response
}

// reset prepares w for the next request.
func (w *respWriter) reset(head bool, close bool) {
	clear(w.header)
	*w = respWriter{c: w.c, header: w.header, buf: w.buf[:0], out: w.out[:0], noBody: head, close: close, clen: -1}
}

// Header returns the header map that WriteHeader sends.
func (w *respWriter) Header() http.Header { return w.header }

// WriteHeader fixes the status; the head goes out with the first flush or when the handler
// returns. Informational (1xx) statuses are not sent. Later calls have no effect.
func (w *respWriter) WriteHeader(code int) {
	if w.status != 0 || (code >= 100 && code < 200) {
		return
	}
	if code < 100 || code > 999 {
		panic("gateway: invalid WriteHeader code " + strconv.Itoa(code))
	}
	w.status = code
	w.noBody = w.noBody || code == http.StatusNoContent || code == http.StatusNotModified
	if vs := w.header["Content-Length"]; len(vs) == 1 {
		if n, ok := parseLength([]byte(vs[0])); ok {
			w.clen = n
		}
	}
	for _, v := range w.header["Connection"] {
		w.close = w.close || strings.EqualFold(strings.TrimSpace(v), "close")
	}
}

// Write buffers p, sending what is buffered once there is enough of it.
func (w *respWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if w.err != nil {
		return 0, w.err
	}
	if w.noBody {
		if w.status == http.StatusNoContent || w.status == http.StatusNotModified {
			return 0, http.ErrBodyNotAllowed
		}
		return len(p), nil
	}
	if w.clen >= 0 && w.written+int64(len(p)) > w.clen {
		return 0, http.ErrContentLength
	}
	w.written += int64(len(p))
	w.buf = append(w.buf, p...)
	if len(w.buf) >= maxBuffered {
		w.flush(false)
	}
	return len(p), w.err
}

// Flush sends the head, if it has not gone out, and the buffered body bytes.
func (w *respWriter) Flush() {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	w.flush(false)
}

// finish ends the response after the handler returned: a response that was never flushed
// goes out whole, with a Content-Length, in one write.
func (w *respWriter) finish() {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if !w.sent && w.clen < 0 && !w.noBody {
		w.clen = int64(len(w.buf))
	}
	w.flush(true)
	if w.clen >= 0 && w.written != w.clen && !w.noBody {
		w.close = true // the body is shorter than announced: only closing ends it
	}
}

// flush writes the head if needed and the buffered bytes, and the last chunk when last.
func (w *respWriter) flush(last bool) {
	if w.err != nil || (w.sent && len(w.buf) == 0 && !(last && w.chunked)) {
		return
	}
	out := w.out[:0]
	if !w.sent {
		out = w.appendHead(out)
		w.sent = true
	}
	switch {
	case w.chunked && len(w.buf) > 0:
		out = strconv.AppendInt(out, int64(len(w.buf)), 16)
		out = append(out, "\r\n"...)
		out = append(out, w.buf...)
		out = append(out, "\r\n"...)
	case !w.chunked:
		out = append(out, w.buf...)
	}
	if last && w.chunked {
		out = append(out, "0\r\n\r\n"...)
	}
	w.buf = w.buf[:0]
	if _, err := w.c.nc.Write(out); err != nil {
		w.err, w.close = err, true
	}
	if cap(out) <= 4*maxBuffered {
		w.out = out[:0]
	}
}

// appendHead appends the status line and the header fields, and decides the framing: the
// handler's Content-Length, else chunked (HTTP/1.1) or until close (HTTP/1.0).
func (w *respWriter) appendHead(dst []byte) []byte {
	dst = append(dst, statusLine(w.status)...)
	for k, vs := range w.header {
		if k == "Content-Length" || k == "Transfer-Encoding" || k == "Connection" || !validKey(k) {
			continue
		}
		for _, v := range vs {
			dst = append(dst, k...)
			dst = append(dst, ": "...)
			dst = appendValue(dst, v)
			dst = append(dst, "\r\n"...)
		}
	}
	if _, ok := w.header["Date"]; !ok {
		dst = append(dst, "Date: "...)
		dst = append(dst, httpDate()...)
		dst = append(dst, "\r\n"...)
	}
	switch {
	case w.status == http.StatusNoContent || w.status == http.StatusNotModified:
	case w.clen >= 0:
		dst = append(dst, "Content-Length: "...)
		dst = strconv.AppendInt(dst, w.clen, 10)
		dst = append(dst, "\r\n"...)
	case w.noBody:
	case w.c.head.http10:
		w.close = true
	default:
		w.chunked = true
		dst = append(dst, "Transfer-Encoding: chunked\r\n"...)
	}
	if w.close || w.c.s.shuttingDown() {
		w.close = true
		dst = append(dst, "Connection: close\r\n"...)
	} else if w.c.head.http10 {
		dst = append(dst, "Connection: keep-alive\r\n"...)
	}
	return append(dst, "\r\n"...)
}

// appendValue appends a header value with any CR or LF replaced by a space.
func appendValue(dst []byte, v string) []byte {
	if strings.IndexByte(v, '\r') < 0 && strings.IndexByte(v, '\n') < 0 {
		return append(dst, v...)
	}
	for i := range len(v) {
		c := v[i]
		if c == '\r' || c == '\n' {
			c = ' '
		}
		dst = append(dst, c)
	}
	return dst
}

func validKey(k string) bool {
	if k == "" {
		return false
	}
	for i := range len(k) {
		if !isTokenByte(k[i]) {
			return false
		}
	}
	return true
}

// statusLines holds "HTTP/1.1 NNN Text\r\n" for every status below 600.
var statusLines = func() (l [600]string) {
	for i := range l {
		l[i] = "HTTP/1.1 " + strconv.Itoa(i) + " " + http.StatusText(i) + "\r\n"
	}
	return l
}()

func statusLine(code int) string {
	if code < len(statusLines) {
		return statusLines[code]
	}
	return "HTTP/1.1 " + strconv.Itoa(code) + " \r\n"
}

// date is the Date header's value for the current second.
type date struct {
	unix int64
	text string
}

var currentDate atomic.Pointer[date]

// httpDate returns the current time in the HTTP date format, formatting it once a second.
func httpDate() string {
	now := time.Now()
	if d := currentDate.Load(); d != nil && d.unix == now.Unix() {
		return d.text
	}
	d := &date{unix: now.Unix(), text: now.UTC().Format(http.TimeFormat)}
	currentDate.Store(d)
	return d.text
}
