package openai

import (
	"bytes"

	"github.com/go-json-experiment/json"
)

// Usage is the token accounting of one response.
type Usage struct {
	// PromptTokens is usage.prompt_tokens.
	PromptTokens int
	// CompletionTokens is usage.completion_tokens.
	CompletionTokens int
	// CachedTokens is usage.prompt_tokens_details.cached_tokens: the part of the prompt served
	// from the prefix cache (0 when the server does not report it).
	CachedTokens int
}

// ParseUsage reads the "usage" object of a JSON response body or stream chunk. It reports
// false when b is not a well-formed JSON object or its usage is absent, null or ill-typed.
func ParseUsage(b []byte) (Usage, bool) {
	if t := trimSpace(b); len(t) == 0 || t[0] != '{' {
		return Usage{}, false
	}
	var v struct {
		Usage *struct {
			PromptTokens        int `json:"prompt_tokens"`
			CompletionTokens    int `json:"completion_tokens"`
			PromptTokensDetails *struct {
				CachedTokens int `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		} `json:"usage"`
	}
	if json.Unmarshal(b, &v, decodeOptions) != nil || v.Usage == nil {
		return Usage{}, false
	}
	u := Usage{PromptTokens: v.Usage.PromptTokens, CompletionTokens: v.Usage.CompletionTokens}
	if d := v.Usage.PromptTokensDetails; d != nil {
		u.CachedTokens = d.CachedTokens
	}
	return u, true
}

// StreamScanner reads a server-sent-event stream of chat or completion chunks as it passes
// through, incrementally: Write accepts the stream in pieces of any size. It records the last
// usage the stream reported, counts chunks that carry text (one token each, as vLLM streams them) for
// streams that report none, and notices the final "data: [DONE]" event and error events.
// The zero value is ready to use; it is not safe for concurrent use.
type StreamScanner struct {
	line     []byte // a partial line carried over to the next Write
	skipping bool   // the current line outgrew maxLine and is being skipped
	usage    Usage
	hasUsage bool
	chunks   int
	done     bool
	failed   bool
}

// maxLine bounds the carried partial line; longer lines (huge logprobs) are skipped.
const maxLine = 1 << 20

var (
	dataPrefix  = []byte("data:")
	donePayload = []byte("[DONE]")
	usageKey    = []byte(`"usage":{`)
	usageKeySp  = []byte(`"usage": {`)
	errorKey    = []byte(`{"error"`)
)

// Write scans p. It never fails.
func (s *StreamScanner) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			s.carry(p)
			break
		}
		if len(s.line) > 0 || s.skipping {
			s.carry(p[:i])
			if !s.skipping {
				s.scanLine(s.line)
			}
			s.line, s.skipping = s.line[:0], false
		} else {
			s.scanLine(p[:i])
		}
		p = p[i+1:]
	}
	return n, nil
}

func (s *StreamScanner) carry(p []byte) {
	if s.skipping {
		return
	}
	if len(s.line)+len(p) > maxLine {
		s.line, s.skipping = s.line[:0], true
		return
	}
	s.line = append(s.line, p...)
}

func (s *StreamScanner) scanLine(l []byte) {
	l = bytes.TrimSuffix(l, []byte{'\r'})
	data, ok := bytes.CutPrefix(l, dataPrefix)
	if !ok {
		return
	}
	data = bytes.TrimLeft(data, " ")
	switch {
	case bytes.Equal(data, donePayload):
		s.done = true
	case bytes.HasPrefix(data, errorKey):
		s.failed = true
	case bytes.Contains(data, usageKey) || bytes.Contains(data, usageKeySp):
		if u, ok := ParseUsage(data); ok {
			s.usage, s.hasUsage = u, true
		}
		if hasText(data) {
			s.chunks++
		}
	default:
		if hasText(data) {
			s.chunks++
		}
	}
}

// textKeys are the keys of generated text in chat ("content") and completion ("text") chunks.
var textKeys = [][]byte{[]byte(`"content":"`), []byte(`"text":"`), []byte(`"content": "`), []byte(`"text": "`)}

// hasText reports whether a chunk carries non-empty generated text: role-only, empty and
// finish-reason chunks do not count as tokens.
func hasText(data []byte) bool {
	for _, k := range textKeys {
		if i := bytes.Index(data, k); i >= 0 && i+len(k) < len(data) && data[i+len(k)] != '"' {
			return true
		}
	}
	return false
}

// Usage returns the usage the stream reported, or, when it reported none, the number of
// content chunks as CompletionTokens; reported says which.
func (s *StreamScanner) Usage() (u Usage, reported bool) {
	if s.hasUsage {
		return s.usage, true
	}
	return Usage{CompletionTokens: s.chunks}, false
}

// Done reports whether the stream's "data: [DONE]" event has been seen.
func (s *StreamScanner) Done() bool { return s.done }

// Failed reports whether the stream carried an error event.
func (s *StreamScanner) Failed() bool { return s.failed }

// Reset clears s for another stream, keeping its buffer.
func (s *StreamScanner) Reset() { *s = StreamScanner{line: s.line[:0]} }
