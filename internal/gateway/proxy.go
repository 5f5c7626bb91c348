package gateway

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"syscall"
	"time"

	"kvroute/internal/openai"
	"kvroute/router"
)

// kind is the OpenAI endpoint a request came to.
type kind uint8

const (
	kindChat kind = iota
	kindCompletion
)

// outcome says whether an attempt ended the request or it should be tried elsewhere.
type outcome uint8

const (
	done outcome = iota
	retry
)

// serveCompletion reads, parses and routes one completion request, forwarding its original
// bytes, with retries on other backends while nothing has reached the client.
func (g *Gateway) serveCompletion(w http.ResponseWriter, r *http.Request, k kind) {
	start := time.Now()
	st := g.current.Load()
	if r.Method != http.MethodPost {
		methodNotAllowed(w, http.MethodPost)
		return
	}
	if !st.authorized(r) {
		g.reject(w, st, errUnauthorized)
		return
	}
	c := getCall(start)
	defer putCall(c)
	body, oerr := readBody(r, st.cfg.Limits.MaxBodyBytes, c.body)
	c.body = body
	if oerr != nil {
		g.reject(w, st, oerr)
		return
	}
	req, oerr := g.parse(k, body, r)
	if oerr != nil {
		g.reject(w, st, oerr)
		return
	}
	if !g.knowsModel(req.Model) {
		g.reject(w, st, &openai.Error{Status: http.StatusNotFound, Type: openai.TypeInvalidRequest,
			Message: fmt.Sprintf("model %q is not served by any backend", req.Model), Param: "model", Code: "model_not_found"})
		return
	}
	g.route(w, r, st, c, req, body, k)
	g.metrics.request(st.policy.Name(), c.backend, c.reason, c.status).Inc()
}

// reject answers a request the gateway refuses before routing it.
func (g *Gateway) reject(w http.ResponseWriter, st *state, e *openai.Error) {
	openai.WriteError(w, e)
	g.metrics.request(st.policy.Name(), "", "", e.Status).Inc()
}

// readBody reads the whole request body, up to limit bytes, into buf's storage.
func readBody(r *http.Request, limit int64, buf []byte) ([]byte, *openai.Error) {
	if r.ContentLength > limit {
		return nil, tooLarge(limit)
	}
	var body []byte
	var err error
	if r.ContentLength >= 0 {
		body = slices.Grow(buf[:0], int(r.ContentLength))[:r.ContentLength]
		_, err = io.ReadFull(r.Body, body)
	} else {
		b := bytes.NewBuffer(buf[:0])
		_, err = b.ReadFrom(io.LimitReader(r.Body, limit+1))
		body = b.Bytes()
		if int64(len(body)) > limit {
			return nil, tooLarge(limit)
		}
	}
	if err != nil {
		return nil, &openai.Error{Status: http.StatusBadRequest, Type: openai.TypeInvalidRequest,
			Message: "reading request body: " + err.Error(), Code: "invalid_body"}
	}
	return body, nil
}

func tooLarge(limit int64) *openai.Error {
	return &openai.Error{Status: http.StatusRequestEntityTooLarge, Type: openai.TypeInvalidRequest,
		Message: "request body larger than " + strconv.FormatInt(limit, 10) + " bytes", Code: "request_too_large"}
}

// parse builds the policy's view of a request: model, prompt and messages, tenant and session
// (the "user" field or the X-Session-Id header, each standing in for the other), output limit,
// and the prompt length in tokens (the ids' count, or an estimate of four characters a token).
func (g *Gateway) parse(k kind, body []byte, r *http.Request) (*router.Request, *openai.Error) {
	var o openai.Request
	var err error
	if k == kindChat {
		o, err = openai.ParseChat(body)
	} else {
		o, err = openai.ParseCompletion(body)
	}
	if err != nil {
		e := &openai.Error{Status: http.StatusBadRequest, Type: openai.TypeInvalidRequest, Message: err.Error(), Code: "invalid_request"}
		var re *openai.RequestError
		if errors.As(err, &re) {
			e.Param = re.Param
		}
		return nil, e
	}
	var id [24]byte
	req := &router.Request{
		ID: string(strconv.AppendUint(append(id[:0], "gw-"...), g.seq.Add(1), 10)), Model: o.Model,
		Prompt: o.Prompt, Tokens: o.PromptTokens, MaxOutputTokens: o.MaxTokens,
	}
	if len(o.Messages) > 0 {
		req.Messages = make([]router.Message, len(o.Messages))
		for i, m := range o.Messages {
			req.Messages[i] = router.Message{Role: m.Role, Content: m.Content}
		}
	}
	session := r.Header.Get("X-Session-Id")
	req.Tenant, req.SessionKey = o.User, session
	if req.Tenant == "" {
		req.Tenant = session
	}
	if req.SessionKey == "" {
		req.SessionKey = o.User
	}
	req.InputTokens = len(o.PromptTokens)
	if req.InputTokens == 0 {
		req.InputTokens = (len(o.Prompt) + 3) / 4
	}
	return req, nil
}

// route makes up to 1+MaxRetries attempts, each on a backend none of the earlier ones used.
func (g *Gateway) route(w http.ResponseWriter, r *http.Request, st *state, c *call, req *router.Request, body []byte, k kind) {
	last := st.cfg.Limits.MaxRetries
	for attempt := 0; ; attempt++ {
		t0 := time.Now()
		res, err := g.reserve(st, req, c.exclude, t0)
		g.metrics.decision.Observe(time.Since(t0).Seconds())
		if err != nil {
			g.noBackend(w, c, req, err, attempt)
			return
		}
		c.backend, c.reason, c.endpointHdr = res.b.id, res.decision.Reason, res.b.endpointHdr
		if attempt == 0 {
			g.metrics.overhead.Observe(time.Since(c.start).Seconds())
		}
		if g.attempt(w, r, st, c, res, body, k, attempt == last) == done {
			return
		}
		g.metrics.retries.WithLabelValues(res.b.id).Inc()
		c.exclude = append(c.exclude, res.b)
	}
}

// noBackend answers a request no (further) backend can take: 503 on the first attempt, else
// the failure of the last attempt.
func (g *Gateway) noBackend(w http.ResponseWriter, c *call, req *router.Request, err error, attempt int) {
	if attempt == 0 {
		g.writeError(w, c, &openai.Error{Status: http.StatusServiceUnavailable, Type: openai.TypeServer,
			Message: fmt.Sprintf("no ready backend for model %q: %v", req.Model, err), Code: "no_backend"})
		return
	}
	g.writeError(w, c, failureError(c.lastErr))
}

func (g *Gateway) writeError(w http.ResponseWriter, c *call, e *openai.Error) {
	openai.WriteError(w, e)
	c.status = e.Status
}

// failureError is the error body for a backend failure: 504 for a timeout, else 502.
func failureError(err error) *openai.Error {
	if isTimeout(err) {
		return &openai.Error{Status: http.StatusGatewayTimeout, Type: openai.TypeServer, Message: err.Error(), Code: "backend_timeout"}
	}
	return &openai.Error{Status: http.StatusBadGateway, Type: openai.TypeServer, Message: fmt.Sprint("backend failed: ", err), Code: "backend_error"}
}

// attempt sends the request to res's backend and relays the response. It reports retry when
// the backend failed before any byte reached the client and another attempt is allowed.
func (g *Gateway) attempt(w http.ResponseWriter, r *http.Request, st *state, c *call, res *reservation, body []byte, k kind, last bool) outcome {
	c.usage = router.Usage{}
	defer func() { res.release(c.usage, time.Now()) }()
	x := &c.ex
	defer x.close()
	if err := g.send(r, st, x, res.b, body, k); err != nil {
		return g.failedEarly(w, r, c, res.b, err, last)
	}
	if x.head.status >= 500 && !last {
		c.lastErr = fmt.Errorf("backend %s: status %d", res.b.id, x.head.status)
		return retry
	}
	n, rerr := readSome(x, c.buf)
	if n == 0 && rerr != nil && rerr != io.EOF {
		return g.failedEarly(w, r, c, res.b, rerr, last)
	}
	g.relay(w, r, c, res.req, x, n, rerr)
	return done
}

// readSome reads until it gets at least one byte or an error.
func readSome(r io.Reader, buf []byte) (int, error) {
	for {
		n, err := r.Read(buf)
		if n > 0 || err != nil {
			return n, err
		}
	}
}

// send forwards the original body to b with the client's end-to-end header fields and reads
// the response head.
func (g *Gateway) send(r *http.Request, st *state, x *exchange, b *backend, body []byte, k kind) error {
	path := b.up.chatPath
	if k == kindCompletion {
		path = b.up.complPath
	}
	x.reqHead = b.up.appendRequestHead(x.reqHead[:0], path, r.Header, len(st.keys) > 0, len(body))
	return x.send(r.Context(), b.up, body, st.cfg.Timeouts)
}

// failedEarly handles a failure before any byte reached the client: the client left (done),
// or the backend failed (retry, or on the last attempt a 502 or 504 error body). A refused
// or reset connection ejects the backend until its next good scrape.
func (g *Gateway) failedEarly(w http.ResponseWriter, r *http.Request, c *call, b *backend, err error, last bool) outcome {
	if r.Context().Err() != nil {
		c.status = statusClientClosed
		return done
	}
	if !isTimeout(err) && isConnFailure(err) {
		g.eject(b, err)
	}
	c.lastErr = fmt.Errorf("backend %s: %w", b.id, err)
	if !last {
		return retry
	}
	g.writeError(w, c, failureError(c.lastErr))
	return done
}

// isConnFailure reports errors that mean nobody is serving at the backend's address.
func isConnFailure(err error) bool {
	var op *net.OpError
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		(errors.As(err, &op) && op.Op == "dial")
}
