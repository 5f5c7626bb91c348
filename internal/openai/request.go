package openai

import (
	"fmt"
	"strings"
)

// Message is one chat message with its content flattened to text.
type Message struct {
	// Role is "system", "user", "assistant", "tool" or whatever the client sent.
	Role string
	// Content is the message text: a string content as is, or the text parts of a
	// multi-part content joined with single spaces (image and audio parts are skipped).
	Content string
}

// Request is the routing-relevant part of a chat or completion request body.
type Request struct {
	// Model is the requested model (or LoRA adapter) name; empty when the client sent none.
	Model string
	// Prompt is the prompt flattened to text: for chat, the message contents joined with
	// single spaces, no roles and no template; for completions, the prompt string, or several
	// prompt strings joined with single spaces.
	Prompt string
	// Messages holds the chat messages; nil for completion requests.
	Messages []Message
	// PromptTokens holds token ids when a completion prompt was sent as ids; nil otherwise.
	PromptTokens []int32
	// User is the "user" field: an end-user identifier, possibly empty.
	User string
	// MaxTokens is max_tokens (or, for chat, max_completion_tokens when max_tokens is absent);
	// 0 when neither was sent.
	MaxTokens int
	// Stream reports "stream": true.
	Stream bool
	// IncludeUsage reports "stream_options": {"include_usage": true}: the last event of the
	// stream then carries the usage.
	IncludeUsage bool
}

// RequestError is a request body the parser rejects. Param names the offending field
// (empty when the body is not well-formed JSON).
type RequestError struct {
	Param string
	Err   error
}

// Error returns the message, prefixed with the package name and the field.
func (e *RequestError) Error() string {
	if e.Param == "" {
		return "openai: " + e.Err.Error()
	}
	return "openai: " + e.Param + ": " + e.Err.Error()
}

// Unwrap returns the underlying error.
func (e *RequestError) Unwrap() error { return e.Err }

// body is what the decoder extracts from either request kind; fields absent from one kind
// stay zero.
type body struct {
	model, user         string
	messages            []Message
	prompt              string
	promptTokens        []int32
	raws                []rawText // per message: its content, when still in the body
	promptSet           bool      // a prompt other than null was sent
	maxTokens           int
	maxCompletionTokens int
	hasMaxTokens        bool
	hasMaxCompletion    bool
	stream              bool
	includeUsage        bool
}

// ParseChat parses a /v1/chat/completions body. It fails with a *RequestError when the body
// is not a well-formed JSON object, a known field has the wrong type, or there are no
// messages. Field names are matched exactly, as OpenAI-compatible servers do.
func ParseChat(b []byte) (Request, error) {
	w, err := decodeBody(b)
	if err != nil {
		return Request{}, err
	}
	if len(w.messages) == 0 {
		return Request{}, &RequestError{Param: "messages", Err: fmt.Errorf("required: a non-empty array")}
	}
	r := w.common()
	r.Messages, r.Prompt = w.messages, joinContents(w.messages, w.raws)
	if !w.hasMaxTokens && w.hasMaxCompletion {
		r.MaxTokens = w.maxCompletionTokens
	}
	return r, nil
}

// joinContents returns the message contents joined with single spaces, and makes each
// message's Content a substring of that prompt: plain contents are copied from the body once.
func joinContents(msgs []Message, raws []rawText) string {
	size := func(i int) int {
		if raws[i].ok {
			return len(raws[i].b)
		}
		return len(msgs[i].Content)
	}
	n := len(msgs) - 1
	for i := range msgs {
		n += size(i)
	}
	var sb strings.Builder
	sb.Grow(n)
	for i := range msgs {
		if i > 0 {
			sb.WriteByte(' ')
		}
		if raws[i].ok {
			sb.Write(raws[i].b)
		} else {
			sb.WriteString(msgs[i].Content)
		}
	}
	prompt := sb.String()
	off := 0
	for i := range msgs {
		l := size(i)
		msgs[i].Content = prompt[off : off+l]
		off += l + 1
	}
	return prompt
}

// ParseCompletion parses a /v1/completions body. It fails with a *RequestError when the body
// is not a well-formed JSON object, a known field has the wrong type, or there is no prompt.
func ParseCompletion(b []byte) (Request, error) {
	w, err := decodeBody(b)
	if err != nil {
		return Request{}, err
	}
	if !w.promptSet {
		return Request{}, &RequestError{Param: "prompt", Err: fmt.Errorf("required")}
	}
	r := w.common()
	r.Prompt, r.PromptTokens = w.prompt, w.promptTokens
	return r, nil
}

func (w *body) common() Request {
	r := Request{Model: w.model, User: w.user, Stream: w.stream, IncludeUsage: w.includeUsage}
	if w.hasMaxTokens {
		r.MaxTokens = w.maxTokens
	}
	return r
}

// decodeBody decodes a request body and checks the token limits.
func decodeBody(b []byte) (body, error) {
	var w body
	d := decoder{b: b}
	if err := d.top(&w); err != nil {
		return body{}, err
	}
	if w.hasMaxTokens && w.maxTokens < 0 {
		return body{}, &RequestError{Param: "max_tokens", Err: fmt.Errorf("%d: want >= 0", w.maxTokens)}
	}
	if w.hasMaxCompletion && w.maxCompletionTokens < 0 {
		return body{}, &RequestError{Param: "max_completion_tokens", Err: fmt.Errorf("%d: want >= 0", w.maxCompletionTokens)}
	}
	return w, nil
}
