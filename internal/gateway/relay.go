package gateway

import (
	"errors"
	"io"
	"maps"
	"net/http"
	"strconv"
	"sync"
	"time"

	"kvroute/internal/openai"
	"kvroute/router"
)

// statusClientClosed labels requests whose client went away (nginx's convention).
const statusClientClosed = 499

// maxKeptBody bounds the non-streamed response body kept to read its usage.
const maxKeptBody = 1 << 20

// call is one client request's scratch state; calls are pooled.
type call struct {
	start   time.Time
	buf     []byte // copy buffer
	scan    openai.StreamScanner
	kept    []byte // a non-streamed 200 body, for its usage; nil once it outgrew maxKeptBody
	exclude []*backend
	ex      exchange
	body    []byte // the request body's storage
	usage   router.Usage
	lastErr error
	status  int
	backend string
	reason  string
	// endpointHdr is the X-Kvroute-Endpoint value for backend.
	endpointHdr []string
}

var callPool = sync.Pool{New: func() any { return &call{buf: make([]byte, 32<<10), kept: make([]byte, 0, 4<<10)} }}

func getCall(start time.Time) *call {
	c := callPool.Get().(*call)
	c.start = start
	return c
}

func putCall(c *call) {
	c.scan.Reset()
	if cap(c.kept) > 64<<10 || c.kept == nil {
		c.kept = make([]byte, 0, 4<<10)
	}
	if cap(c.body) > 1<<20 {
		c.body = nil
	}
	c.ex.recycle()
	*c = call{buf: c.buf, scan: c.scan, kept: c.kept[:0], exclude: c.exclude[:0], ex: c.ex, body: c.body[:0]}
	callPool.Put(c)
}

// relay writes the backend's response to the client, chunk by chunk, flushing after each
// chunk of an event stream, and watches the body for its usage. n bytes of the body are in
// c.buf already, and rerr is the error that came with them.
func (g *Gateway) relay(w http.ResponseWriter, r *http.Request, c *call, req *router.Request, x *exchange, n int, rerr error) {
	stream := x.head.stream
	h := w.Header()
	setFields(h, x.head.fields)
	// Which backend served the request and why: load generators record them per request.
	h["X-Kvroute-Endpoint"] = c.endpointHdr
	h["X-Kvroute-Reason"] = g.reasonHeader(c.reason)
	w.WriteHeader(x.head.status)
	c.status = x.head.status
	var fl http.Flusher
	if stream {
		fl, _ = w.(http.Flusher)
	}
	keep := !stream && x.head.status == http.StatusOK
	for {
		if n > 0 {
			p := c.buf[:n]
			if stream {
				_, _ = c.scan.Write(p)
			} else if keep {
				c.keep(p)
			}
			if _, err := w.Write(p); err != nil {
				c.status = statusClientClosed
				c.usage = c.usageOf(req, stream)
				return
			}
			if fl != nil {
				fl.Flush()
			}
		}
		if rerr != nil {
			break
		}
		n, rerr = x.Read(c.buf)
	}
	c.usage = c.usageOf(req, stream)
	g.endRelay(w, r, c, stream, rerr, fl)
}

// endRelay ends the client's response after the backend's body ended with rerr. A stream
// that broke, or ended without its [DONE] event, gets an error event; a non-streamed body
// that broke is aborted so the client sees a failed response, never a truncated one.
func (g *Gateway) endRelay(w http.ResponseWriter, r *http.Request, c *call, stream bool, rerr error, fl http.Flusher) {
	var err error
	switch {
	case r.Context().Err() != nil:
		c.status = statusClientClosed
		return
	case rerr == io.EOF:
		if !stream || c.scan.Done() || c.scan.Failed() {
			return
		}
		err = errors.New("backend stream ended without [DONE]")
	default:
		err = rerr
	}
	e := failureError(err)
	c.status = e.Status
	if !stream {
		panic(http.ErrAbortHandler)
	}
	_, _ = w.Write(e.AppendEvent(c.buf[:0]))
	if fl != nil {
		fl.Flush()
	}
}

func (c *call) keep(p []byte) {
	if c.kept == nil {
		return
	}
	if len(c.kept)+len(p) > maxKeptBody {
		c.kept = nil
		return
	}
	c.kept = append(c.kept, p...)
}

// usageOf is the usage the response reported; without one, the prompt length is the
// request's estimate and, for streams, the completion length is the count of text chunks.
func (c *call) usageOf(req *router.Request, stream bool) router.Usage {
	var u openai.Usage
	var ok bool
	if stream {
		u, ok = c.scan.Usage()
	} else if c.kept != nil {
		u, ok = openai.ParseUsage(c.kept)
	}
	if !ok {
		u.PromptTokens = req.InputTokens
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

// setFields adds a response's forwarded fields to h, with one allocation for all of them.
func setFields(h http.Header, fields []field) {
	vals := make([]string, len(fields))
	for i, f := range fields {
		vals[i] = f.value
		if vs, ok := h[f.key]; ok {
			h[f.key] = append(vs, f.value)
		} else {
			h[f.key] = vals[i : i+1 : i+1]
		}
	}
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
