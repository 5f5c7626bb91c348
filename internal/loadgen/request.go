package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"kvroute/results"
	"kvroute/workloads"
)

// Result is one request's outcome as the client measured it.
type Result struct {
	// Record is the request's terminal record; its times are offsets from the start of the
	// run, Arrival being when the request was sent.
	Record results.Record
	// Scheduled is the workload's arrival time for the request; Arrival − Scheduled is how
	// late it was sent (the wait for a concurrency slot included).
	Scheduled time.Duration
	// ITL holds the gaps between consecutive content chunks, in order (vllm's itl).
	ITL []time.Duration
	// Text is the answer received, the content chunks concatenated.
	Text string
	// EngineTTFT is the time to first token on the server's engine clock, from the
	// HeaderEngineTTFT response header (the emulator sets it; 0 when absent): unlike
	// Record's TTFT, it holds no HTTP hop and no delay of a busy client host.
	EngineTTFT time.Duration
	// Warmup reports that the request arrived before Options.Warmup: it is not part of
	// the measurement.
	Warmup bool
}

// chatBody and completionBody are the request bodies sent, as vllm bench serve sends them.
type (
	chatBody struct {
		Model         string              `json:"model"`
		Messages      []workloads.Message `json:"messages"`
		MaxTokens     int                 `json:"max_tokens"`
		IgnoreEOS     bool                `json:"ignore_eos"`
		Stream        bool                `json:"stream"`
		StreamOptions streamOptions       `json:"stream_options"`
		User          string              `json:"user,omitempty"`
	}
	completionBody struct {
		Model         string        `json:"model"`
		Prompt        any           `json:"prompt"`
		MaxTokens     int           `json:"max_tokens"`
		IgnoreEOS     bool          `json:"ignore_eos"`
		Stream        bool          `json:"stream"`
		StreamOptions streamOptions `json:"stream_options"`
		User          string        `json:"user,omitempty"`
	}
	streamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	}
)

// encodeRequest returns the path and body for req: a chat completion when it has messages,
// a completion with its text (or, without text, its token ids) otherwise.
func encodeRequest(model string, req *workloads.Request) (string, []byte, error) {
	so := streamOptions{IncludeUsage: true}
	var v any
	path := ChatPath
	if len(req.Messages) > 0 {
		v = chatBody{Model: model, Messages: req.Messages, MaxTokens: req.OutputTokens, IgnoreEOS: true,
			Stream: true, StreamOptions: so, User: req.Tenant}
	} else {
		var prompt any = req.Text
		if req.Text == "" {
			prompt = req.Tokens
		}
		path = CompletionPath
		v = completionBody{Model: model, Prompt: prompt, MaxTokens: req.OutputTokens, IgnoreEOS: true,
			Stream: true, StreamOptions: so, User: req.Tenant}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", nil, fmt.Errorf("loadgen: encode request %s: %w", req.ID, err)
	}
	return path, b, nil
}

// errRequestTimeout is the cause of a request context that ran past Options.RequestTimeout.
var errRequestTimeout = errors.New("loadgen: request timeout")

// sender sends one request and measures its stream against the run's clock.
type sender struct {
	client  *http.Client
	target  string
	model   string
	timeout time.Duration
	start   time.Time
}

// now returns the time since the start of the run.
func (s *sender) now() time.Duration { return time.Since(s.start) }

// send sends req and reads its answer to the end; it always returns a terminal Result.
func (s *sender) send(ctx context.Context, req *workloads.Request) *Result {
	res := &Result{Record: results.Record{
		ID: req.ID, Tenant: req.Tenant, Session: req.Session, Turn: req.Turn, PrefixGroup: req.PrefixGroup,
		PromptTokens: len(req.Tokens),
	}}
	rec := &res.Record
	path, body, err := encodeRequest(s.model, req)
	if err != nil {
		rec.Arrival = s.now()
		s.fail(ctx, res, results.StatusFailed, err)
		return res
	}
	if s.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, s.timeout, errRequestTimeout)
		defer cancel()
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(s.target, "/")+path, bytes.NewReader(body))
	if err != nil {
		rec.Arrival = s.now()
		s.fail(ctx, res, results.StatusFailed, fmt.Errorf("loadgen: %w", err))
		return res
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "text/event-stream")
	if req.Session != "" {
		hreq.Header.Set(HeaderSession, req.Session)
	}
	rec.Arrival = s.now()
	resp, err := s.client.Do(hreq)
	if err != nil {
		s.fail(ctx, res, results.StatusFailed, fmt.Errorf("transport: %w", unwrapURL(err)))
		return res
	}
	defer resp.Body.Close()
	rec.Endpoint, rec.Reason = resp.Header.Get(HeaderEndpoint), resp.Header.Get(HeaderReason)
	res.EngineTTFT = engineTTFT(resp.Header)
	if resp.StatusCode != http.StatusOK {
		status, err := httpError(resp)
		s.fail(ctx, res, status, err)
		return res
	}
	s.readStream(ctx, resp.Body, res)
	return res
}

// engineTTFT parses HeaderEngineTTFT (seconds); 0 when absent or not a positive number.
func engineTTFT(h http.Header) time.Duration {
	v := h.Get(HeaderEngineTTFT)
	if v == "" {
		return 0
	}
	s, err := strconv.ParseFloat(v, 64)
	if err != nil || !(s > 0) || s > maxEngineTTFT.Seconds() {
		return 0
	}
	return time.Duration(s * 1e9)
}

// maxEngineTTFT bounds the engine TTFT a header may report; larger values are ignored.
const maxEngineTTFT = 24 * time.Hour

// fail ends res with status and cause; a context that timed out or was cancelled overrides
// them, since the error then only reports the interruption.
func (s *sender) fail(ctx context.Context, res *Result, status results.Status, cause error) {
	rec := &res.Record
	rec.Finish = max(s.now(), rec.Arrival)
	rec.Status, rec.Error = status, cause.Error()
	switch {
	case errors.Is(context.Cause(ctx), errRequestTimeout):
		rec.Status, rec.Error = results.StatusTimedOut, fmt.Sprintf("timeout: no complete answer within %v", s.timeout)
	case ctx.Err() != nil:
		rec.Error = "canceled: the run was stopped"
	}
}

// unwrapURL drops the "Post URL:" wrapper of a client error, keeping the cause.
func unwrapURL(err error) error {
	var ue interface{ Unwrap() error }
	if errors.As(err, &ue) && strings.HasPrefix(err.Error(), "Post ") {
		return ue.Unwrap()
	}
	return err
}

// maxErrorBody bounds how much of an error response is read.
const maxErrorBody = 64 << 10

// httpError reads a non-200 response: the OpenAI error message when the body is one, else
// the start of the body. 4xx statuses and 503 mean the server refused the request
// (rejected); other statuses mean it failed.
func httpError(resp *http.Response) (results.Status, error) {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody)) // what was read is enough to explain
	msg := strings.TrimSpace(string(b))
	var e struct {
		Error *struct {
			Message string `json:"message"`
			Code    any    `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &e) == nil && e.Error != nil {
		msg = e.Error.Message
	} else if len(msg) > 200 {
		msg = msg[:200] + "…"
	}
	status := results.StatusFailed
	if resp.StatusCode/100 == 4 || resp.StatusCode == http.StatusServiceUnavailable {
		status = results.StatusRejected
	}
	return status, fmt.Errorf("http %d: %s", resp.StatusCode, msg)
}
