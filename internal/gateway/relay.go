package gateway

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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
	usage   router.Usage
	lastErr error
	status  int
	backend string
	reason  string
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
	*c = call{buf: c.buf, scan: c.scan, kept: c.kept[:0], exclude: c.exclude[:0]}
	callPool.Put(c)
}

// relay writes the backend's response to the client, chunk by chunk, flushing after each
// chunk of an event stream, and watches the body for its usage.
func (g *Gateway) relay(w http.ResponseWriter, r *http.Request, ctx context.Context, c *call, req *router.Request, resp *http.Response, n int, rerr error, wd *watchdog) {
	stream := strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream")
	h := w.Header()
	copyResponseHeader(h, resp.Header)
	// Which backend served the request and why: load generators record them per request.
	h["X-Kvroute-Endpoint"] = []string{c.backend}
	h["X-Kvroute-Reason"] = []string{c.reason}
	w.WriteHeader(resp.StatusCode)
	c.status = resp.StatusCode
	var fl http.Flusher
	if stream {
		fl, _ = w.(http.Flusher)
	}
	keep := !stream && resp.StatusCode == http.StatusOK
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
		n, rerr = resp.Body.Read(c.buf)
		wd.kick()
	}
	c.usage = c.usageOf(req, stream)
	g.endRelay(w, r, ctx, c, stream, rerr, fl)
}

// endRelay ends the client's response after the backend's body ended with rerr. A stream
// that broke, or ended without its [DONE] event, gets an error event; a non-streamed body
// that broke is aborted so the client sees a failed response, never a truncated one.
func (g *Gateway) endRelay(w http.ResponseWriter, r *http.Request, ctx context.Context, c *call, stream bool, rerr error, fl http.Flusher) {
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
		if cause := context.Cause(ctx); isTimeout(cause) {
			err = cause
		}
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

// Timeout errors, the causes of an attempt's cancellation by its watchdog.
var (
	ErrHeaderTimeout    = errors.New("gateway: backend sent no response headers in time")
	ErrFirstByteTimeout = errors.New("gateway: backend sent no response body in time")
	ErrIdleTimeout      = errors.New("gateway: backend stream idle for too long")
)

func isTimeout(err error) bool {
	return errors.Is(err, ErrHeaderTimeout) || errors.Is(err, ErrFirstByteTimeout) || errors.Is(err, ErrIdleTimeout)
}

type phase uint32

const (
	phaseHeader phase = iota
	phaseFirstByte
	phaseIdle
)

var phaseErrs = [...]error{ErrHeaderTimeout, ErrFirstByteTimeout, ErrIdleTimeout}

// watchdog cancels an attempt that waits too long in its current phase.
type watchdog struct {
	timer  *time.Timer
	phase  atomic.Uint32
	to     TimeoutsConfig
	cancel context.CancelCauseFunc
}

func startWatchdog(cancel context.CancelCauseFunc, to TimeoutsConfig) *watchdog {
	wd := &watchdog{to: to, cancel: cancel}
	wd.timer = time.AfterFunc(to.Header, wd.fire)
	return wd
}

func (wd *watchdog) fire() { wd.cancel(phaseErrs[wd.phase.Load()]) }

func (wd *watchdog) enter(p phase) {
	wd.phase.Store(uint32(p))
	d := wd.to.FirstByte
	if p == phaseIdle {
		d = wd.to.Idle
	}
	wd.timer.Reset(d)
}

func (wd *watchdog) kick() { wd.timer.Reset(wd.to.Idle) }

func (wd *watchdog) stop() { wd.timer.Stop() }

// hopHeaders are the hop-by-hop headers a proxy does not forward (RFC 9110 §7.6.1), plus
// those the gateway or the transport sets itself.
var hopHeaders = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Connection": true, "Proxy-Authenticate": true,
	"Proxy-Authorization": true, "Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true,
}

// copyRequestHeader copies the client's end-to-end headers. Accept-Encoding is dropped so the
// backend answers uncompressed (the gateway reads usage from the body), and Authorization
// when the gateway itself checked it.
func copyRequestHeader(dst, src http.Header, dropAuth bool) {
	for k, v := range src {
		if hopHeaders[k] || k == "Accept-Encoding" || k == "Content-Length" || (dropAuth && k == "Authorization") {
			continue
		}
		dst[k] = v
	}
	removeConnectionHeaders(dst, src)
}

func copyResponseHeader(dst, src http.Header) {
	for k, v := range src {
		if !hopHeaders[k] {
			dst[k] = v
		}
	}
	removeConnectionHeaders(dst, src)
}

// removeConnectionHeaders drops the headers src's Connection header names as hop-by-hop.
func removeConnectionHeaders(dst, src http.Header) {
	for _, v := range src["Connection"] {
		for _, name := range strings.Split(v, ",") {
			delete(dst, http.CanonicalHeaderKey(strings.TrimSpace(name)))
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
