package openai

import (
	"bytes"
	"errors"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// The request bodies as they are decoded: only the fields routing reads; the others are
// skipped. Decoding is github.com/go-json-experiment/json, the code of Go's encoding/json/v2
// (GOEXPERIMENT=jsonv2): 4-5× faster than encoding/json here, and, against the decoder of
// our own it replaced, 3× faster on prompts with escapes (newlines, quotes) and 1.5-2×
// slower on plain ASCII (BenchmarkParseChat; docs/proxy.md).

// commonFields are the fields chat and completion requests share.
type commonFields struct {
	Model               string         `json:"model"`
	User                string         `json:"user"`
	MaxTokens           *int           `json:"max_tokens"`
	MaxCompletionTokens *int           `json:"max_completion_tokens"`
	Stream              bool           `json:"stream"`
	StreamOptions       *streamOptions `json:"stream_options"`
	KVTransferParams    jsontext.Value `json:"kv_transfer_params"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type chatBody struct {
	commonFields
	Messages messageList `json:"messages"`
}

type completionBody struct {
	commonFields
	Prompt prompt `json:"prompt"`
}

// messageList decodes the messages of a chat request into one buffer: the message contents
// joined with single spaces, which is the request's prompt, and each message's role and the
// end of its content in that buffer. A 220 KB body is then copied once, not once per message
// and again for the prompt. A null message has no role and no content.
type messageList struct {
	roles []string
	ends  []int
	text  []byte
}

// UnmarshalJSONFrom implements json.UnmarshalerFrom.
func (l *messageList) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	*l = messageList{}
	switch dec.PeekKind() {
	case 'n':
		_, err := dec.ReadToken()
		return err
	case '[':
	case jsontext.KindInvalid:
		return readErr(dec)
	default:
		return errWantMessages
	}
	// The contents are at most as long as the rest of the body: one allocation holds them.
	l.text = make([]byte, 0, len(dec.UnreadBuffer()))
	if _, err := dec.ReadToken(); err != nil {
		return err
	}
	for dec.PeekKind() != ']' {
		if len(l.roles) > 0 {
			l.text = append(l.text, ' ')
		}
		role, err := l.message(dec)
		if err != nil {
			return err
		}
		l.roles, l.ends = append(l.roles, role), append(l.ends, len(l.text))
	}
	_, err := dec.ReadToken()
	return err
}

// message reads one message, appending its content to l.text, and returns its role.
func (l *messageList) message(dec *jsontext.Decoder) (string, error) {
	switch dec.PeekKind() {
	case 'n':
		_, err := dec.ReadToken()
		return "", err
	case '{':
	case jsontext.KindInvalid:
		return "", readErr(dec)
	default:
		return "", &json.SemanticError{JSONPointer: dec.StackPointer(), Err: errWantMessage}
	}
	if _, err := dec.ReadToken(); err != nil {
		return "", err
	}
	start := len(l.text)
	var role string
	for dec.PeekKind() != '}' {
		name, err := dec.ReadToken()
		if err != nil {
			return "", err
		}
		switch name.String() {
		case "role":
			err = json.UnmarshalDecode(dec, &role)
		case "content":
			l.text, err = appendContent(l.text[:start], dec) // a repeated key: the last one wins
		default:
			err = dec.SkipValue()
		}
		if err != nil {
			return "", err
		}
	}
	_, err := dec.ReadToken()
	return role, err
}

// messages returns the decoded messages, their contents substrings of prompt. The prompt
// shares l's buffer, as strings.Builder's String does: l must not be used afterwards.
func (l *messageList) messages() (msgs []Message, prompt string) {
	prompt = unsafe.String(unsafe.SliceData(l.text), len(l.text))
	msgs = make([]Message, len(l.roles))
	start := 0
	for i, end := range l.ends {
		msgs[i] = Message{Role: l.roles[i], Content: prompt[start:end]}
		start = end + 1
	}
	return msgs, prompt
}

// appendContent appends a message's content flattened to text to dst: a string as is, null
// as nothing, and an array of parts as the text of its text parts joined with single spaces
// (a part with no type but a text counts as text; image, audio and other parts are skipped).
func appendContent(dst []byte, dec *jsontext.Decoder) ([]byte, error) {
	switch dec.PeekKind() {
	case '"':
		v, err := dec.ReadValue()
		if err != nil {
			return dst, err
		}
		if raw := v[1 : len(v)-1]; bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw) {
			return append(dst, raw...), nil // nothing to unquote: most of a long prompt
		}
		// The decoder checked the string's syntax, so an error here can only report invalid
		// UTF-8, already replaced with U+FFFD, which the decode options allow.
		dst, _ = jsontext.AppendUnquote(dst, v)
		return dst, nil
	case 'n':
		_, err := dec.ReadToken()
		return dst, err
	case '[':
		var parts []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if err := json.UnmarshalDecode(dec, &parts); err != nil {
			return dst, err
		}
		n := 0
		for _, p := range parts {
			if p.Type == "text" || (p.Type == "" && p.Text != "") {
				if n > 0 {
					dst = append(dst, ' ')
				}
				dst, n = append(dst, p.Text...), n+1
			}
		}
		return dst, nil
	case jsontext.KindInvalid:
		return dst, readErr(dec)
	}
	err := &json.SemanticError{JSONPointer: dec.StackPointer(), Err: errWantContent}
	_ = dec.SkipValue()
	return dst, err
}

var (
	errWantMessages = errors.New("want an array of messages")
	errWantMessage  = errors.New("want a message object or null")
	errWantContent  = errors.New("want a string, an array of content parts or null")
	errWantPrompt   = errors.New("want a string, an array of strings, an array of token ids or an array of arrays of token ids")
)

// prompt is a completion prompt: a string, strings (joined with single spaces), token ids,
// or lists of token ids (concatenated). null is no prompt.
type prompt struct {
	text   string
	tokens []int32
	set    bool
}

// UnmarshalJSONFrom implements json.UnmarshalerFrom.
func (p *prompt) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	*p = prompt{}
	switch dec.PeekKind() {
	case 'n':
		_, err := dec.ReadToken()
		return err
	case '"':
		p.set = true
		return json.UnmarshalDecode(dec, &p.text)
	case '[':
		p.set = true
		return p.list(dec)
	case jsontext.KindInvalid:
		return readErr(dec)
	}
	return errWantPrompt
}

// list reads an array of prompt elements.
func (p *prompt) list(dec *jsontext.Decoder) error {
	if _, err := dec.ReadToken(); err != nil { // [
		return err
	}
	var texts []string
	for dec.PeekKind() != ']' {
		var err error
		switch dec.PeekKind() {
		case '"':
			var s string
			err = json.UnmarshalDecode(dec, &s)
			texts = append(texts, s)
		case '0':
			var id int32
			err = json.UnmarshalDecode(dec, &id)
			p.tokens = append(p.tokens, id)
		case '[':
			var ids []int32
			err = json.UnmarshalDecode(dec, &ids)
			p.tokens = append(p.tokens, ids...)
		case jsontext.KindInvalid:
			return readErr(dec)
		default:
			return errWantPrompt
		}
		if err != nil {
			return err
		}
	}
	p.text = strings.Join(texts, " ")
	_, err := dec.ReadToken() // ]
	return err
}

// readErr returns the syntax error a PeekKind of KindInvalid stands for.
func readErr(dec *jsontext.Decoder) error {
	_, err := dec.ReadToken()
	return err
}
