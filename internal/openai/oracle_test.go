package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
)

// The oracle decodes request bodies with encoding/json, the obvious way; the fuzz tests
// check the fast decoder against it.

type oracleBody struct {
	Model               string          `json:"model"`
	Messages            []oracleMessage `json:"messages"`
	Prompt              oraclePrompt    `json:"prompt"`
	User                string          `json:"user"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	Stream              bool            `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	KVTransferParams json.RawMessage `json:"kv_transfer_params"`
}

type oracleMessage struct {
	Role    string        `json:"role"`
	Content oracleContent `json:"content"`
}

type oracleContent string

func (c *oracleContent) UnmarshalJSON(b []byte) error {
	switch b[0] {
	case 'n':
		*c = ""
		return nil
	case '[':
		var parts []struct{ Type, Text string }
		if err := json.Unmarshal(b, &parts); err != nil {
			return err
		}
		var texts []string
		for _, p := range parts {
			if p.Type == "text" || (p.Type == "" && p.Text != "") {
				texts = append(texts, p.Text)
			}
		}
		*c = oracleContent(strings.Join(texts, " "))
		return nil
	}
	return json.Unmarshal(b, (*string)(c))
}

type oraclePrompt struct {
	text   string
	tokens []int32
	set    bool
}

func (p *oraclePrompt) UnmarshalJSON(b []byte) error {
	p.set, p.tokens = true, nil
	switch b[0] {
	case 'n':
		p.set = false
		return nil
	case '"':
		return json.Unmarshal(b, &p.text)
	case '[':
		var raw []json.RawMessage
		if err := json.Unmarshal(b, &raw); err != nil {
			return err
		}
		var texts []string
		for _, r := range raw {
			switch r[0] {
			case '"':
				var s string
				if err := json.Unmarshal(r, &s); err != nil {
					return err
				}
				texts = append(texts, s)
			case '[':
				var ids []int32
				if err := json.Unmarshal(r, &ids); err != nil {
					return err
				}
				p.tokens = append(p.tokens, ids...)
			case 'n':
				return errors.New("null prompt element")
			default:
				var id int32
				if err := json.Unmarshal(r, &id); err != nil {
					return err
				}
				p.tokens = append(p.tokens, id)
			}
		}
		p.text = strings.Join(texts, " ")
		return nil
	}
	return errors.New("want a string or an array")
}

// oracleParse parses a chat (chat true) or completion body with encoding/json.
func oracleParse(b []byte, chat bool) (Request, error) {
	if t := bytes.TrimLeft(b, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return Request{}, errors.New("not an object")
	}
	var w oracleBody
	if err := json.Unmarshal(b, &w); err != nil {
		return Request{}, err
	}
	r := Request{Model: w.Model, User: w.User, Stream: w.Stream, KVTransferParams: jsontext.Value(w.KVTransferParams)}
	if w.StreamOptions != nil {
		r.IncludeUsage = w.StreamOptions.IncludeUsage
	}
	for _, v := range []*int{w.MaxTokens, w.MaxCompletionTokens} {
		if v != nil && *v < 0 {
			return Request{}, fmt.Errorf("negative")
		}
	}
	if w.MaxTokens != nil {
		r.MaxTokens = *w.MaxTokens
	}
	if !chat {
		if !w.Prompt.set {
			return Request{}, errors.New("no prompt")
		}
		r.Prompt, r.PromptTokens = w.Prompt.text, w.Prompt.tokens
		return r, nil
	}
	if len(w.Messages) == 0 {
		return Request{}, errors.New("no messages")
	}
	var texts []string
	for _, m := range w.Messages {
		r.Messages = append(r.Messages, Message{Role: m.Role, Content: string(m.Content)})
		texts = append(texts, string(m.Content))
	}
	r.Prompt = strings.Join(texts, " ")
	if w.MaxTokens == nil && w.MaxCompletionTokens != nil {
		r.MaxTokens = *w.MaxCompletionTokens
	}
	return r, nil
}

// quirky reports bodies on which encoding/json knowingly differs from an OpenAI server:
// duplicate keys (it merges into reused slice elements) and keys matched case-insensitively.
func quirky(b []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(b))
	type frame struct {
		object bool
		keys   map[string]bool
		expect bool // next string token is a key
	}
	var stack []*frame
	known := []string{"model", "messages", "prompt", "user", "max_tokens", "max_completion_tokens", "stream", "stream_options", "include_usage", "kv_transfer_params", "role", "content", "type", "text", "usage", "prompt_tokens", "completion_tokens", "prompt_tokens_details", "cached_tokens"}
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if s, ok := tok.(string); ok && top != nil && top.object && top.expect {
			if top.keys[s] {
				return true
			}
			top.keys[s] = true
			for _, k := range known {
				if s != k && strings.EqualFold(s, k) {
					return true
				}
			}
			top.expect = false
			continue
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{object: true, keys: map[string]bool{}, expect: true})
			continue
		case json.Delim('['):
			stack = append(stack, &frame{})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		if len(stack) > 0 && stack[len(stack)-1].object {
			stack[len(stack)-1].expect = true
		}
	}
}
