package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
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

// call is one client request as the proxy handles it: what the policy was asked, the
// attempts so far, and how it ended. It is also the request's context (clock.go), ended by
// its timeouts, in which it travels from the handler to the proxy's hooks.
type call struct {
	clock
	st      *state
	req     *router.Request
	body    []byte // the original request body, forwarded unchanged
	kind    kind
	start   time.Time
	ticket  *router.Ticket // the request's life in the router's lifecycle: own, or pd.Decode
	own     router.Ticket
	lastErr error // the last attempt's failure, with the backend's name
	// P/D: the request's tickets, its prefill backend while its prefill ticket lives (nil when
	// it prefills on its decode backend), the prefill leg's cached tokens once it answered.
	pd            router.PDTicket
	prefill       *backend
	prefillCached int
	prefillDone   bool
	requestID     string // the X-Request-Id both legs carry
	// status is the HTTP status the client got: 499 when it went away, 502 or 504 when a
	// started stream failed.
	status  int
	backend string // the name of the backend of the last attempt
	reason  string // the policy's reason for it
}

type callKey struct{}

// callOf returns the call a proxied request's context carries.
func callOf(ctx context.Context) *call { return ctx.Value(callKey{}).(*call) }

// Value implements context.Context: the call is found under callKey.
func (c *call) Value(key any) any {
	if key == (callKey{}) {
		return c
	}
	return c.clock.Context.Value(key)
}

// statusClientClosed labels requests whose client went away (nginx's convention).
const statusClientClosed = 499

// serveCompletion reads, parses and routes one completion request, and forwards its original
// bytes through the proxy, which tries other backends while that is safe.
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
	body, oerr := readBody(w, r, st.cfg.Limits.MaxBodyBytes)
	if oerr != nil {
		// The request's framing can no longer be trusted: nothing more is read from this
		// connection, so nothing the client sent after the body can pass for a request.
		w.Header().Set("Connection", "close")
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
	if st.tokenize && len(req.Tokens) == 0 {
		t0 := time.Now()
		result := g.fillTokens(r.Context(), st, req)
		g.metrics.tokenize.WithLabelValues(result).Observe(time.Since(t0).Seconds())
	}
	c := &call{st: st, req: req, body: body, kind: k, start: start}
	c.startClock(r.Context(), st.cfg.Timeouts, start)
	defer func() {
		c.stopClock()
		g.metrics.request(st.policyName(), c.backend, c.reason, c.status).Inc()
	}()
	g.proxy.ServeHTTP(w, r.WithContext(c))
}

// reject answers a request the gateway refuses before routing it.
func (g *Gateway) reject(w http.ResponseWriter, st *state, e *openai.Error) {
	openai.WriteError(w, e)
	g.metrics.request(st.policyName(), "", "", e.Status).Inc()
}

// Body reading: the buffer starts at bodyChunk bytes and at most doubles with what arrived, so
// the memory a request holds follows the bytes it sent, never the length it announced.
const bodyChunk = 32 << 10

// readBody reads the whole request body, up to limit bytes. A body larger than limit gets
// 413 (and net/http closes the connection after the answer), one that stops arriving before
// the server's body timeout 408, a malformed one 400.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, *openai.Error) {
	if r.ContentLength > limit {
		return nil, tooLarge(limit)
	}
	rd := http.MaxBytesReader(w, r.Body, limit)
	buf := make([]byte, 0, min(bodyChunk, max(int(r.ContentLength)+1, 512))) // +1: the read that sees EOF
	for {
		if len(buf) == cap(buf) {
			next := 2 * cap(buf)
			if r.ContentLength > 0 {
				next = min(next, int(r.ContentLength)+1)
			}
			buf = slices.Grow(buf, next-len(buf))
		}
		n, err := rd.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, bodyError(err, limit)
		}
	}
}

// bodyError is the answer to a request whose body could not be read.
func bodyError(err error, limit int64) *openai.Error {
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return tooLarge(limit)
	case errors.Is(err, os.ErrDeadlineExceeded):
		return &openai.Error{Status: http.StatusRequestTimeout, Type: openai.TypeInvalidRequest,
			Message: "request body not received in time", Code: "request_timeout"}
	}
	return &openai.Error{Status: http.StatusBadRequest, Type: openai.TypeInvalidRequest,
		Message: "reading request body: " + err.Error(), Code: "invalid_body"}
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
		Prompt: o.Prompt, Tokens: o.PromptTokens, MaxOutputTokens: o.MaxTokens, Body: body,
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
