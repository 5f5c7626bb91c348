package openai

import (
	"errors"
	"fmt"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
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
	// KVTransferParams is the "kv_transfer_params" value as sent (vLLM's KV connector
	// parameters, which vllm.ParseKVTransferParams reads), null included; nil when the body
	// has none. It is read in the same pass, with the same rules, as the other fields.
	KVTransferParams jsontext.Value
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

// ParseChat parses a /v1/chat/completions body. It fails with a *RequestError when the body
// is not a well-formed JSON object, a known field has the wrong type, or there are no
// messages. Field names are matched exactly, as OpenAI-compatible servers do.
func ParseChat(b []byte) (Request, error) {
	var w chatBody
	if err := decode(b, &w); err != nil {
		return Request{}, err
	}
	if len(w.Messages.roles) == 0 {
		return Request{}, &RequestError{Param: "messages", Err: errors.New("required: a non-empty array")}
	}
	r, err := w.common()
	if err != nil {
		return Request{}, err
	}
	r.Messages, r.Prompt = w.Messages.messages()
	if w.MaxTokens == nil && w.MaxCompletionTokens != nil {
		r.MaxTokens = *w.MaxCompletionTokens
	}
	return r, nil
}

// ParseCompletion parses a /v1/completions body. It fails with a *RequestError when the body
// is not a well-formed JSON object, a known field has the wrong type, or there is no prompt.
func ParseCompletion(b []byte) (Request, error) {
	var w completionBody
	if err := decode(b, &w); err != nil {
		return Request{}, err
	}
	if !w.Prompt.set {
		return Request{}, &RequestError{Param: "prompt", Err: errors.New("required")}
	}
	r, err := w.common()
	if err != nil {
		return Request{}, err
	}
	r.Prompt, r.PromptTokens = w.Prompt.text, w.Prompt.tokens
	return r, nil
}

// common returns the fields both request kinds share, after checking the token limits.
func (w *commonFields) common() (Request, error) {
	for _, f := range []struct {
		param string
		v     *int
	}{{"max_tokens", w.MaxTokens}, {"max_completion_tokens", w.MaxCompletionTokens}} {
		if f.v != nil && *f.v < 0 {
			return Request{}, &RequestError{Param: f.param, Err: fmt.Errorf("%d: want >= 0", *f.v)}
		}
	}
	r := Request{Model: w.Model, User: w.User, Stream: w.Stream, KVTransferParams: w.KVTransferParams}
	if w.MaxTokens != nil {
		r.MaxTokens = *w.MaxTokens
	}
	if w.StreamOptions != nil {
		r.IncludeUsage = w.StreamOptions.IncludeUsage
	}
	return r, nil
}

// decodeOptions are those of Python's json module, which OpenAI-compatible servers parse
// with: a repeated key is not an error (the last one wins), and invalid UTF-8 in a string
// becomes U+FFFD rather than an error (the backend, which gets the original bytes, decides).
var decodeOptions = json.JoinOptions(jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))

// decode unmarshals a request body into w, turning the decoder's errors into a
// *RequestError that names the field at fault.
func decode(b []byte, w any) error {
	if t := trimSpace(b); len(t) == 0 || t[0] != '{' {
		return &RequestError{Err: errors.New("the body must be a JSON object")}
	}
	err := json.Unmarshal(b, w, decodeOptions)
	if err == nil {
		return nil
	}
	var se *json.SemanticError
	if errors.As(err, &se) {
		return &RequestError{Param: paramOf(se.JSONPointer), Err: err}
	}
	return &RequestError{Err: err}
}

// paramOf names the request field a JSON pointer points into, array indices left out:
// "/messages/0/content/1" is "messages.content".
func paramOf(p jsontext.Pointer) string {
	var names []string
	for tok := range p.Tokens() {
		if tok != "" && strings.Trim(tok, "0123456789") == "" {
			continue // an array index
		}
		names = append(names, tok)
	}
	return strings.Join(names, ".")
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\r' || b[0] == '\n') {
		b = b[1:]
	}
	return b
}
