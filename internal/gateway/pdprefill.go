package gateway

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"kvroute/internal/openai"
	"kvroute/internal/vllm"
	"kvroute/router"
)

// maxPrefillBody bounds a prefill leg's response body: its kv_transfer_params at most
// vllm.MaxKVTransferParamsBytes, plus the one-token completion around them.
const maxPrefillBody = vllm.MaxKVTransferParamsBytes + 64<<10

// prefillError is the failure of a request whose prefill leg failed on every prefill
// backend the failure rule allowed: the client gets 502.
type prefillError struct{ err error }

func (e *prefillError) Error() string { return "prefill leg failed: " + e.err.Error() }
func (e *prefillError) Unwrap() error { return e.err }

// prefillRefusal is a prefill backend's answer of a client error (4xx other than 429): the
// request itself is at fault, so it is not retried and the client gets the answer.
type prefillRefusal struct {
	status int
	header http.Header
	body   []byte
}

func (e *prefillRefusal) Error() string {
	return fmt.Sprintf("prefill leg refused with status %d", e.status)
}

// prefillLeg runs the two-step's prefill leg of c on c.prefill, and on the next prefill
// backends the failure rule gives (the prefill ticket's Retry) after each failure before
// any byte reached the client: no connection, a reset, a 5xx or 429, a response without
// usable kv_transfer_params. On success c.body is the decode leg's body. Otherwise it
// returns a *prefillError, a *prefillRefusal, or the client's going away or the request's
// deadline; the prefill ticket has ended either way.
func (g *Gateway) prefillLeg(out *http.Request, c *call) error {
	body, err := vllm.PrefillBody(c.body)
	if err != nil {
		c.endPrefill(router.Usage{}, time.Now())
		return &prefillError{err}
	}
	for {
		b := c.prefill
		t0 := time.Now()
		res, u, err := g.sendPrefill(out, c, b, body)
		g.metrics.pdPrefillLeg(b.name, err, time.Since(t0))
		if err == nil {
			c.body, err = vllm.DecodeBody(c.body, res.Params)
			c.prefillCached, c.prefillDone = u.CachedTokens, true
			c.endPrefill(router.Usage{PromptTokens: u.PromptTokens, CachedTokens: u.CachedTokens, CompletionTokens: u.CompletionTokens}, time.Now())
			if err != nil {
				return &prefillError{err}
			}
			return nil
		}
		var refused *prefillRefusal
		if errors.As(err, &refused) || errors.Is(err, errClientGone) || errors.Is(err, ErrRequestTimeout) {
			c.endPrefill(router.Usage{}, time.Now())
			return err
		}
		c.lastErr = err
		if !g.retryPrefill(c) {
			return &prefillError{err}
		}
		g.metrics.retries.WithLabelValues(b.name).Inc()
	}
}

// retryPrefill ends c's failed prefill attempt and moves it to another prefill backend
// under the failure rule. It reports false when the rule allows none: the ticket ended.
func (g *Gateway) retryPrefill(c *call) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.refresh(prefillPool)
	err := c.pd.Prefill.Retry(time.Now())
	c.prefill.inflightGauge.Dec()
	if err != nil {
		c.prefill = nil
		return false
	}
	c.prefill = g.prefillBackend(c)
	return true
}

// sendPrefill sends the prefill leg's body to b with the client's headers as the proxy
// forwards them (X-Request-Id included) and reads its answer, within the attempt's timeouts.
func (g *Gateway) sendPrefill(out *http.Request, c *call, b *backend, body []byte) (vllm.PrefillResult, openai.Usage, error) {
	u := b.chatURL
	if c.kind == kindCompletion {
		u = b.complURL
	}
	req, err := http.NewRequestWithContext(c.startAttempt(out.Context()), http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		return vllm.PrefillResult{}, openai.Usage{}, err
	}
	req.Header = out.Header.Clone()
	req.Header.Set("Content-Type", "application/json")
	req.ContentLength = int64(len(body))
	req.GetBody = nil
	resp, err := g.opts.Transport.RoundTrip(req)
	if err != nil {
		return vllm.PrefillResult{}, openai.Usage{}, g.attemptFailed(b, c.cause(err), nil)
	}
	c.arm(phaseFirstByte)
	data, err := readPrefill(c, resp.Body)
	_ = resp.Body.Close()
	switch {
	case err != nil:
		return vllm.PrefillResult{}, openai.Usage{}, fmt.Errorf("backend %s: prefill response: %w", b.name, err)
	case resp.StatusCode >= 400 && resp.StatusCode < 500 && resp.StatusCode != http.StatusTooManyRequests:
		return vllm.PrefillResult{}, openai.Usage{}, &prefillRefusal{resp.StatusCode, resp.Header, data}
	case resp.StatusCode != http.StatusOK:
		return vllm.PrefillResult{}, openai.Usage{}, fmt.Errorf("backend %s answered the prefill leg with status %d", b.name, resp.StatusCode)
	}
	res, err := vllm.ParsePrefillResponse(data)
	if err != nil {
		return res, openai.Usage{}, fmt.Errorf("backend %s: %w", b.name, err)
	}
	usage, _ := openai.ParseUsage(data)
	return res, usage, nil
}

// errPrefillTooLarge: a prefill response body over maxPrefillBody.
var errPrefillTooLarge = fmt.Errorf("larger than %d bytes", maxPrefillBody)

// readPrefill reads a prefill response body, at most maxPrefillBody bytes, under c's
// timeouts; the memory it takes follows the bytes that came.
func readPrefill(c *call, rc io.Reader) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(clockedReader{c, rc}, maxPrefillBody+1))
	if err == nil && len(data) > maxPrefillBody {
		err = errPrefillTooLarge
	}
	return data, err
}

// clockedReader reads r under c's first-byte and idle timeouts.
type clockedReader struct {
	c *call
	r io.Reader
}

func (cr clockedReader) Read(p []byte) (int, error) { return cr.c.read(cr.r, p) }

// newRequestID returns a request id both legs share: 32 random hex digits, unique across
// router replicas, as vLLM keys the prefill engine's held blocks by it.
func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// refusalResponse is the prefill backend's refusal as the response the client gets.
func refusalResponse(out *http.Request, r *prefillRefusal) *http.Response {
	h := http.Header{}
	if ct := r.header.Get("Content-Type"); ct != "" {
		h.Set("Content-Type", ct)
	}
	return &http.Response{StatusCode: r.status, Status: http.StatusText(r.status), Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Body: io.NopCloser(bytes.NewReader(r.body)), ContentLength: int64(len(r.body)), Request: out}
}

// runPrefill runs c's prefill leg before its decode leg goes to res's backend. When the
// prefill leg failed it ends the request (its decode reservation released) and returns
// what the client gets: a prefill backend's refusal as the response, or the error.
func (g *Gateway) runPrefill(out *http.Request, c *call, res *reservation) (*http.Response, error) {
	err := g.prefillLeg(out, c)
	if err == nil {
		return nil, nil
	}
	res.release(router.Usage{}, time.Now())
	var refused *prefillRefusal
	if errors.As(err, &refused) {
		return refusalResponse(out, refused), nil
	}
	return nil, err
}
