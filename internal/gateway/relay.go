package gateway

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"kvroute/internal/openai"
	"kvroute/router"
)

// maxKeptBody bounds the non-streamed response body kept to read its usage.
const maxKeptBody = 1 << 20

// Event-stream buffering: a stream's bytes are passed on event by event, so the client never
// gets part of an event; an event longer than maxHeldEvent is passed on as it arrives.
const (
	streamChunk  = 16 << 10
	maxHeldEvent = 1 << 20
)

// relay is the body of a backend's response as the proxy copies it to the client. It bounds
// each read with the attempt's timeouts, reads the usage the response reports, and releases
// the request's reservation, with that usage, when the proxy closes it. An event stream is
// passed on in whole events; when the backend's stream breaks or ends without [DONE], the
// incomplete event is dropped and an OpenAI error event ends the stream instead, so that
// every event the client gets parses.
type relay struct {
	c      *call
	res    *reservation
	rc     io.ReadCloser
	stream bool
	kept   []byte // a non-streamed 200 body, for its usage; nil when not kept
	scan   openai.StreamScanner

	// Streams: buf[start:ready] is ready to give (whole events, or the error event), and
	// buf[ready:] the start of an event still arriving.
	buf          []byte
	start, ready int
	partial      bool // part of an over-long event was given: the client is mid-event
	// complete: the stream's [DONE] was given and the proxy asked for more, so it wrote
	// [DONE] to the client; the response is counted by its status however it ends.
	complete bool

	started bool  // the backend's first body byte came: its first token was reported
	done    bool  // the backend's body ended, by EOF or by failure
	failure error // why it failed, when it did
	closed  bool
}

// newRelay relays resp's body. An event stream loses the backend's Content-Length: the relay
// passes it on in whole events and may drop an incomplete one or add an error event, so its
// length is the relay's, and the client gets it chunked.
func newRelay(c *call, res *reservation, resp *http.Response) *relay {
	r := &relay{c: c, res: res, rc: resp.Body, stream: isEventStream(resp.Header)}
	if r.stream {
		resp.Header.Del("Content-Length")
		resp.ContentLength = -1
	}
	if !r.stream && resp.StatusCode == http.StatusOK {
		r.kept = make([]byte, 0, 4<<10)
	}
	return r
}

func isEventStream(h http.Header) bool {
	const sse = "text/event-stream"
	ct := h.Get("Content-Type")
	return len(ct) >= len(sse) && strings.EqualFold(ct[:len(sse)], sse)
}

// Read implements io.Reader.
func (r *relay) Read(p []byte) (int, error) {
	if !r.stream {
		return r.readWhole(p)
	}
	if r.start == r.ready && r.scan.Done() {
		r.complete = true
	}
	for r.start == r.ready {
		if r.done {
			return 0, io.EOF
		}
		r.fill()
	}
	n := copy(p, r.buf[r.start:r.ready])
	r.start += n
	return n, nil
}

// readWhole passes a non-streamed body on as it arrives; an error aborts the client's
// response (ReverseProxy's ErrAbortHandler), so the client sees a failed response, never a
// truncated one.
func (r *relay) readWhole(p []byte) (int, error) {
	n, err := r.read(p)
	if r.kept != nil {
		if len(r.kept)+n > maxKeptBody {
			r.kept = nil
		} else {
			r.kept = append(r.kept, p[:n]...)
		}
	}
	if err != nil {
		r.done = true
		if err != io.EOF {
			r.failure = err
		}
	}
	return n, err
}

// read reads the backend's body within the attempt's timeouts. Its first byte is the
// request's first token as the router sees it (a stream's first event; a whole response's
// body), reported to the lifecycle at once.
func (r *relay) read(p []byte) (int, error) {
	n, err := r.c.read(r.rc, p)
	if n > 0 && !r.started {
		r.started = true
		r.res.firstToken(time.Now())
	}
	return n, err
}

// fill reads more of the stream and makes the events it completes ready.
func (r *relay) fill() {
	if r.start > 0 { // everything before start was given
		n := copy(r.buf, r.buf[r.start:])
		r.buf, r.ready, r.start = r.buf[:n], r.ready-r.start, 0
	}
	if len(r.buf) == cap(r.buf) {
		if cap(r.buf) >= maxHeldEvent { // an over-long event: pass on what came
			r.give(len(r.buf))
			r.partial = true
			return
		}
		r.buf = slices.Grow(r.buf, max(streamChunk, cap(r.buf)))
	}
	n, err := r.read(r.buf[len(r.buf):cap(r.buf)])
	r.buf = r.buf[:len(r.buf)+n]
	if end := lastEventEnd(r.buf[r.ready:]); end > 0 {
		r.give(r.ready + end)
		r.partial = false
	}
	if err != nil {
		r.end(err)
	}
}

// give makes buf[ready:end] ready and scans it for usage.
func (r *relay) give(end int) {
	_, _ = r.scan.Write(r.buf[r.ready:end])
	r.ready = end
}

// end finishes the stream after the backend's body ended with err.
func (r *relay) end(err error) {
	r.done = true
	if err == io.EOF && r.ready < len(r.buf) && r.buf[len(r.buf)-1] == '\n' {
		r.buf = append(r.buf, '\n') // the last event lacked only its blank line
		r.give(len(r.buf))
	}
	name := r.c.backend
	switch {
	case errors.Is(err, errClientGone):
		r.failure = err
		r.buf = r.buf[:r.ready]
		return
	case r.scan.Done() && r.ready == len(r.buf): // what fails after [DONE] loses nothing
		return
	case isTimeout(err):
		r.failure = fmt.Errorf("backend %s: %w", name, err)
	case err != io.EOF:
		r.failure = fmt.Errorf("backend %s: stream broke: %s", name, errnoText(err))
	case r.ready < len(r.buf):
		r.failure = fmt.Errorf("backend %s: stream ended in the middle of an event", name)
	case r.scan.Done() || r.scan.Failed():
		return
	default:
		r.failure = fmt.Errorf("backend %s: stream ended without [DONE]", name)
	}
	r.buf = r.buf[:r.ready] // the incomplete event is dropped
	if r.partial {
		r.buf = append(r.buf, "\n\n"...) // end the over-long event the client is in
	}
	r.buf = failureError(r.failure).AppendEvent(r.buf)
	r.ready = len(r.buf)
}

// lastEventEnd returns the end of the last complete event in b, just after its blank line
// ("\n\n" or "\r\n\r\n"), or 0 when b holds none.
func lastEventEnd(b []byte) int {
	end := 0
	if i := bytes.LastIndex(b, []byte("\n\n")); i >= 0 {
		end = i + 2
	}
	if i := bytes.LastIndex(b, []byte("\n\r\n")); i >= 0 && i+3 > end {
		end = i + 3
	}
	return end
}

// Close implements io.Closer: it closes the backend's body, records how the response ended
// and releases the reservation with the usage the response reported. ReverseProxy calls it
// once the response is copied, or failed to be.
func (r *relay) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	err := r.rc.Close()
	switch {
	case r.complete: // the client got [DONE]: the status stands
	case r.failure != nil && !errors.Is(r.failure, errClientGone):
		r.c.status = failureError(r.failure).Status
	case !r.done || r.failure != nil:
		r.c.status = statusClientClosed // the copy to the client stopped first
	}
	r.res.release(r.usage(), time.Now())
	return err
}

// usage is the usage the response reported; without one, the prompt length is the request's
// estimate and, for streams, the completion length is the count of text chunks.
func (r *relay) usage() router.Usage {
	var u openai.Usage
	var ok bool
	if r.stream {
		u, ok = r.scan.Usage()
	} else if r.kept != nil && r.done && r.failure == nil {
		u, ok = openai.ParseUsage(r.kept)
	}
	if !ok {
		u.PromptTokens = r.c.req.InputTokens
	}
	return router.Usage{PromptTokens: u.PromptTokens, CachedTokens: u.CachedTokens, CompletionTokens: u.CompletionTokens}
}

// maxReasons bounds the decision reasons whose header values are kept.
const maxReasons = 256

// reasonHeader returns the X-Kvroute-Reason header value for reason, made once per reason:
// policies have a handful of reasons, and the copy-on-write map is read without a lock.
func (g *Gateway) reasonHeader(reason string) []string {
	m := g.reasons.Load()
	if v, ok := (*m)[reason]; ok {
		return v
	}
	v := []string{reason}
	if len(*m) < maxReasons {
		next := make(map[string][]string, len(*m)+1)
		maps.Copy(next, *m)
		next[reason] = v
		g.reasons.CompareAndSwap(m, &next) // a lost race only costs a later miss
	}
	return v
}

// statusLabels holds the label of each HTTP status, built once so labelling does not allocate.
var statusLabels = func() [600]string {
	var l [600]string
	for i := range l {
		l[i] = strconv.Itoa(i)
	}
	return l
}()

func statusLabel(code int) string {
	if code >= 0 && code < len(statusLabels) {
		return statusLabels[code]
	}
	return strconv.Itoa(code)
}
