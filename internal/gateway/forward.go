package gateway

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"sync"
	"syscall"
	"time"

	"kvroute/internal/openai"
	"kvroute/router"
)

// Timeout errors: a request, or an attempt at a backend, waited too long.
var (
	ErrHeaderTimeout    = errors.New("gateway: backend sent no response headers in time")
	ErrFirstByteTimeout = errors.New("gateway: backend sent no response body in time")
	ErrIdleTimeout      = errors.New("gateway: backend stream idle for too long")
	ErrRequestTimeout   = errors.New("gateway: request took longer than its deadline")
)

func isTimeout(err error) bool {
	return errors.Is(err, ErrHeaderTimeout) || errors.Is(err, ErrFirstByteTimeout) ||
		errors.Is(err, ErrIdleTimeout) || errors.Is(err, ErrRequestTimeout)
}

// errClientGone reports that the client went away: nothing more is written to it.
var errClientGone = errors.New("gateway: client went away")

// noBackendError is the failure of a request no backend could take.
type noBackendError struct {
	model string
	err   error
}

func (e *noBackendError) Error() string {
	return fmt.Sprintf("no ready backend for model %q: %v", e.model, e.err)
}

// newProxy returns the ReverseProxy completions go through: its Transport is the forwarder,
// which picks a backend per attempt; its hooks strip what the backend must not see, label
// responses, and turn failures into OpenAI error bodies.
func (g *Gateway) newProxy() *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite:        rewrite,
		Transport:      forwarder{g},
		ModifyResponse: g.modifyResponse,
		ErrorHandler:   g.proxyError,
		BufferPool:     &copyBuffers,
		ErrorLog:       log.New(io.Discard, "", 0), // failures are counted and answered, not logged
	}
}

// rewrite prepares the request sent to backends: the original body, without the headers the
// gateway consumed (the router's API key, Expect) or that would make the backend compress
// the response (the gateway reads usage from it). ReverseProxy has removed the hop-by-hop
// and forwarding headers; the forwarder sets the backend's URL per attempt.
func rewrite(pr *httputil.ProxyRequest) {
	c := callOf(pr.In.Context())
	h := pr.Out.Header
	if len(c.st.keys) > 0 {
		h.Del("Authorization")
	}
	h.Del("Expect")
	h.Del("Accept-Encoding")
	if c.st.pd != nil { // both legs, and a sidecar's, under one id
		if c.requestID = h.Get(requestIDHeader); c.requestID == "" {
			c.requestID = newRequestID()
			h.Set(requestIDHeader, c.requestID)
		}
	}
	pr.Out.ContentLength = int64(len(c.body))
	pr.Out.Body = http.NoBody
}

// modifyResponse labels the response with the backend and the decision when the
// configuration asks for it.
func (g *Gateway) modifyResponse(resp *http.Response) error {
	c := callOf(resp.Request.Context())
	c.status = resp.StatusCode
	if c.st.cfg.DebugHeaders {
		resp.Header["X-Kvroute-Endpoint"] = []string{c.backend}
		resp.Header["X-Kvroute-Reason"] = g.reasonHeader(c.reason)
	}
	return nil
}

// proxyError answers a request that got no response: no backend could take it, every
// attempt failed, or the client went away (then nothing is written).
func (g *Gateway) proxyError(w http.ResponseWriter, r *http.Request, err error) {
	c := callOf(r.Context())
	var nb *noBackendError
	switch {
	case errors.Is(err, errClientGone):
		c.status = statusClientClosed
		return
	case errors.As(err, &nb):
		e := &openai.Error{Status: http.StatusServiceUnavailable, Type: openai.TypeServer, Message: nb.Error(), Code: "no_backend"}
		openai.WriteError(w, e)
		c.status = e.Status
		return
	}
	e := failureError(err)
	openai.WriteError(w, e)
	c.status = e.Status
}

// failureError is the error body for a backend failure: 503 when the last backend tried
// refused the request (503 or 429), 504 for a timeout, else 502. err names the backend by
// its name, never its URL.
func failureError(err error) *openai.Error {
	var busy *busyError
	var pf *prefillError
	switch {
	case errors.As(err, &pf):
		return &openai.Error{Status: http.StatusBadGateway, Type: openai.TypeServer, Message: err.Error(), Code: "prefill_failed"}
	case errors.As(err, &busy):
		return &openai.Error{Status: http.StatusServiceUnavailable, Type: openai.TypeServer, Message: err.Error(), Code: "backend_busy"}
	case isTimeout(err):
		return &openai.Error{Status: http.StatusGatewayTimeout, Type: openai.TypeServer, Message: err.Error(), Code: "backend_timeout"}
	}
	return &openai.Error{Status: http.StatusBadGateway, Type: openai.TypeServer, Message: err.Error(), Code: "backend_error"}
}

// copyBuffers are the ReverseProxy's copy buffers.
var copyBuffers = bufferPool{sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}}

type bufferPool struct{ p sync.Pool }

func (bp *bufferPool) Get() []byte  { return *bp.p.Get().(*[]byte) }
func (bp *bufferPool) Put(b []byte) { bp.p.Put(&b) }

// forwarder is the proxy's Transport. Each attempt asks the policy for a backend (the ones
// earlier attempts failed on excluded), sends the request there, and follows the failure
// rule: when the attempt failed before the backend's response head, in a class
// LimitsConfig.RetryOn names (retry.go), and fewer than LimitsConfig.MaxRetries retries were
// made, the request is tried on another backend. Otherwise the response, or the failure,
// reaches the client: once RoundTrip returns a response head, the request is never sent
// again. The transport makes no attempt of its own: the outgoing request cannot rewind its
// body.
type forwarder struct{ g *Gateway }

// RoundTrip implements http.RoundTripper.
func (f forwarder) RoundTrip(out *http.Request) (*http.Response, error) {
	g, c := f.g, callOf(out.Context())
	t0 := time.Now()
	res, err := g.reserve(c, t0)
	g.metrics.decision.Observe(time.Since(t0).Seconds())
	if err != nil {
		return nil, &noBackendError{c.req.Model, err}
	}
	if c.prefill != nil && c.st.cfg.PD.Mode == PDTwoStep {
		if resp, err := g.runPrefill(out, c, res); resp != nil || err != nil {
			return resp, err
		}
	}
	g.metrics.overhead.Observe(time.Since(c.start).Seconds())
	for {
		c.backend, c.reason = res.b.name, res.decision.Reason
		resp, err := f.send(out, c, res.b)
		retry := c.ticket.CanRetry() && c.st.cfg.Limits.retryable(err, resp)
		if err == nil && !retry {
			resp.Body = newRelay(c, res, resp)
			return resp, nil
		}
		err = g.attemptFailed(res.b, err, resp)
		if !retry {
			res.release(router.Usage{}, time.Now())
			return nil, err
		}
		g.metrics.retries.WithLabelValues(res.b.name).Inc()
		c.lastErr = err
		t0 := time.Now()
		if res, err = res.retry(t0); err != nil {
			return nil, c.lastErr
		}
		g.metrics.decision.Observe(time.Since(t0).Seconds())
	}
}

// send makes one attempt at b, under a context of its own: it sends the request and waits
// for the response head, up to the header timeout; the first-byte timeout then starts.
func (f forwarder) send(out *http.Request, c *call, b *backend) (*http.Response, error) {
	req := out.WithContext(c.startAttempt(out.Context())) // a copy: an earlier attempt's may still be in use
	req.URL, req.Host = b.chatURL, ""
	if c.kind == kindCompletion {
		req.URL = b.complURL
	}
	req.Body = io.NopCloser(bytes.NewReader(c.body))
	req.ContentLength = int64(len(c.body)) // a two-step's decode leg carries the prefill's params
	if c.prefill != nil && c.st.cfg.PD.Mode == PDSidecar {
		req.Header.Set(prefillerHeader, c.prefill.hostPort)
	}
	req.GetBody = nil // the transport cannot rewind the body, so it never sends the request twice
	resp, err := f.g.opts.Transport.RoundTrip(req)
	if err != nil {
		return nil, c.cause(err)
	}
	c.arm(phaseFirstByte)
	return resp, nil
}

// attemptFailed describes an attempt at b that got no response the client will see: err, or
// resp (a refusal, whose body it discards) when err is nil. The description names b, never
// its address. It ejects b when nobody is serving at its address.
func (g *Gateway) attemptFailed(b *backend, err error, resp *http.Response) error {
	switch {
	case err == nil:
		discard(resp.Body)
		return &busyError{fmt.Sprintf("backend %s refused the request with status %d", b.name, resp.StatusCode)}
	case errors.Is(err, errClientGone):
		return err
	case isTimeout(err):
		return fmt.Errorf("backend %s: %w", b.name, err)
	case isDialError(err):
		g.eject(b, err)
		return fmt.Errorf("backend %s: cannot connect: %s", b.name, errnoText(err))
	}
	return fmt.Errorf("backend %s failed before responding: %s", b.name, errnoText(err))
}

// busyError is the failure of a backend that refused the request with 503 or 429.
type busyError struct{ msg string }

func (e *busyError) Error() string { return e.msg }

// errnoText describes a transport error without the addresses it carries.
func errnoText(err error) string {
	for _, e := range []struct {
		errno syscall.Errno
		text  string
	}{{syscall.ECONNREFUSED, "connection refused"}, {syscall.ECONNRESET, "connection reset"},
		{syscall.EPIPE, "broken pipe"}, {syscall.ETIMEDOUT, "connection timed out"},
		{syscall.EHOSTUNREACH, "host unreachable"}, {syscall.ENETUNREACH, "network unreachable"}} {
		if errors.Is(err, e.errno) {
			return e.text
		}
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return "connection closed"
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return "name not resolved"
	}
	return "transport error"
}

// discard reads a little of a response the client will not see, so the connection can be
// reused, and closes it.
func discard(body io.ReadCloser) {
	_, _ = io.CopyN(io.Discard, body, 64<<10)
	_ = body.Close()
}
