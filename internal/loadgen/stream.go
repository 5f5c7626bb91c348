package loadgen

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"kvroute/internal/openai"
	"kvroute/results"
)

// chunk is the part of a streamed chat or completion chunk the client reads. An error event
// is {"error": {...}} (OpenAI, recent vLLM) or {"object": "error", "message": ...} (older vLLM).
type chunk struct {
	Object  string `json:"object"`
	Message string `json:"message"`
	Choices []struct {
		Delta *struct {
			Content *string `json:"content"`
		} `json:"delta"`
		Text *string `json:"text"`
	} `json:"choices"`
	Usage json.RawMessage `json:"usage"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// text returns the content the chunk carries, across its choices.
func (c *chunk) text() string {
	var out string
	for _, ch := range c.Choices {
		switch {
		case ch.Delta != nil && ch.Delta.Content != nil:
			out += *ch.Delta.Content
		case ch.Text != nil:
			out += *ch.Text
		}
	}
	return out
}

// errorMessage returns the message of an error event, and false for other chunks.
func (c *chunk) errorMessage() (string, bool) {
	switch {
	case c.Error != nil:
		return c.Error.Message, true
	case c.Object == "error":
		return c.Message, true
	}
	return "", false
}

// streamReader folds one response's server-sent events into its Result.
type streamReader struct {
	s      *sender
	res    *Result
	text   strings.Builder
	chunks int
	last   time.Duration // offset of the last content chunk
	usage  openai.Usage
	hasUse bool
}

// readStream reads body to "data: [DONE]" and completes res, or fails it with the cause: a
// read error, a chunk that is not JSON, an error event, or a stream that ends without [DONE].
func (s *sender) readStream(ctx context.Context, body io.Reader, res *Result) {
	r := &streamReader{s: s, res: res}
	br := bufio.NewReaderSize(body, 32<<10)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			done, ferr := r.line(line)
			if ferr != nil {
				r.finishText()
				s.fail(ctx, res, results.StatusFailed, ferr)
				return
			}
			if done {
				r.complete()
				return
			}
		}
		if err != nil {
			r.finishText()
			if errors.Is(err, io.EOF) {
				err = errors.New("truncated stream: it ended without data: [DONE]")
			} else {
				err = fmt.Errorf("stream read: %w", err)
			}
			s.fail(ctx, res, results.StatusFailed, err)
			return
		}
	}
}

// line handles one line of the stream; it reports whether it was the final [DONE].
func (r *streamReader) line(l []byte) (bool, error) {
	data, ok := bytes.CutPrefix(bytes.TrimRight(l, "\r\n"), []byte("data:"))
	if !ok {
		return false, nil // blank separators, comments, event: and id: fields
	}
	data = bytes.TrimSpace(data)
	if string(data) == "[DONE]" {
		return true, nil
	}
	var c chunk
	if err := json.Unmarshal(data, &c); err != nil {
		return false, fmt.Errorf("bad chunk: %w", err)
	}
	if msg, isErr := c.errorMessage(); isErr {
		return false, fmt.Errorf("stream error event: %s", msg)
	}
	if len(c.Usage) > 0 && string(c.Usage) != "null" {
		if u, ok := openai.ParseUsage(data); ok {
			r.usage, r.hasUse = u, true
		}
	}
	if t := c.text(); t != "" {
		r.token(t)
	}
	return false, nil
}

// token records a content chunk arriving now.
func (r *streamReader) token(t string) {
	now := r.s.now()
	rec := &r.res.Record
	if r.chunks == 0 {
		rec.FirstToken = max(now, rec.Arrival)
	} else {
		r.res.ITL = append(r.res.ITL, max(now-r.last, 0))
	}
	r.last = now
	r.chunks++
	r.text.WriteString(t)
}

// finishText fills in what was received before the stream ended.
func (r *streamReader) finishText() {
	r.res.Text = r.text.String()
	r.res.Record.OutputTokens = r.chunks
}

// complete ends the request as completed, taking token counts from the usage when the
// server reported it.
func (r *streamReader) complete() {
	r.finishText()
	rec := &r.res.Record
	rec.Finish = max(r.s.now(), rec.Arrival)
	rec.Status = results.StatusCompleted
	if r.hasUse {
		rec.PromptTokens, rec.CachedTokens, rec.OutputTokens = r.usage.PromptTokens, r.usage.CachedTokens, r.usage.CompletionTokens
	}
	if rec.FirstToken == 0 && rec.OutputTokens > 0 {
		rec.FirstToken = rec.Finish // no content chunk: the answer arrived whole at the end
	}
}
