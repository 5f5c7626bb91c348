package openai

import (
	"fmt"
	"math"
	"strings"
	"unicode/utf8"
)

// stringValue reads a string or null (which leaves dst as it is) into dst.
func (d *decoder) stringValue(param string, dst *string) error {
	switch d.peek() {
	case '"':
		s, err := d.readString()
		*dst = s
		return err
	case 'n':
		return d.literal("null")
	}
	return d.mismatch(param, "a string")
}

// intValue reads an integer into dst, or null, which clears has.
func (d *decoder) intValue(param string, dst *int, has *bool) error {
	if d.isNull() {
		*has = false
		return nil
	}
	c := d.peek()
	if c != '-' && (c < '0' || c > '9') {
		return d.mismatch(param, "an integer")
	}
	lit, err := d.number()
	if err != nil {
		return err
	}
	v, ok := parseInt(lit, math.MinInt, math.MaxInt)
	if !ok {
		return d.recordMismatch(param, "an integer")
	}
	*dst, *has = int(v), true
	return nil
}

// recordMismatch records a wrong-typed value already consumed.
func (d *decoder) recordMismatch(param, want string) error {
	if d.typeErr == nil {
		d.typeErr = &RequestError{Param: param, Err: fmt.Errorf("want %s", want)}
	}
	return nil
}

// boolValue reads a boolean into dst; null leaves it as it is.
func (d *decoder) boolValue(param string, dst *bool) error {
	switch d.peek() {
	case 't':
		*dst = true
		return d.literal("true")
	case 'f':
		*dst = false
		return d.literal("false")
	case 'n':
		return d.literal("null")
	}
	return d.mismatch(param, "a boolean")
}

func (d *decoder) streamOptions(so *streamOptions) error {
	if d.isNull() {
		*so = streamOptions{}
		return nil
	}
	if d.peek() != '{' {
		return d.mismatch("stream_options", "an object")
	}
	so.set = true
	return d.object(func(key string) error {
		if key == "include_usage" {
			return d.boolValue("stream_options.include_usage", &so.includeUsage)
		}
		return d.skip()
	})
}

// messages reads the chat messages; null means none.
func (d *decoder) messages(w *body) error {
	if d.isNull() {
		w.messages = nil
		return nil
	}
	if d.peek() != '[' {
		return d.mismatch("messages", "an array")
	}
	msgs := make([]Message, 0, 4)
	raws := make([]rawText, 0, 4)
	err := d.array(func() error {
		var m Message
		var raw rawText
		var err error
		switch d.peek() {
		case '{':
			err = d.object(func(key string) error {
				switch key {
				case "role":
					if d.peek() == '"' {
						m.Role, err = d.readKnown()
						return err
					}
					return d.stringValue("messages.role", &m.Role)
				case "content":
					return d.content(&m.Content, &raw)
				}
				return d.skip()
			})
		case 'n':
			err = d.literal("null")
		default:
			err = d.mismatch("messages", "an array of objects")
		}
		msgs, raws = append(msgs, m), append(raws, raw)
		return err
	})
	w.messages, w.raws = msgs, raws
	return err
}

// rawText is a message content left in the body, to be copied once into the prompt: the
// bytes of a string literal without escapes, valid UTF-8.
type rawText struct {
	b  []byte
	ok bool
}

// content reads a message content: a string, null (empty), or an array of parts whose text
// parts are joined with single spaces. A plain string is left in the body, in raw.
func (d *decoder) content(dst *string, raw *rawText) error {
	*raw = rawText{}
	switch d.peek() {
	case '"':
		lit, escaped, err := d.scanString()
		if err != nil {
			return err
		}
		if in := lit[1 : len(lit)-1]; !escaped && utf8.Valid(in) {
			*dst, *raw = "", rawText{in, true}
			return nil
		}
		*dst, err = decodeLit(lit, escaped)
		return err
	case 'n':
		*dst = ""
		return d.literal("null")
	case '[':
	default:
		return d.mismatch("messages.content", "a string, an array or null")
	}
	var texts []string
	err := d.array(func() error {
		if d.isNull() {
			return nil
		}
		if d.peek() != '{' {
			return d.mismatch("messages.content", "an array of objects")
		}
		var typ, text string
		err := d.object(func(key string) error {
			switch key {
			case "type":
				return d.stringValue("messages.content.type", &typ)
			case "text":
				return d.stringValue("messages.content.text", &text)
			}
			return d.skip()
		})
		if typ == "text" || (typ == "" && text != "") {
			texts = append(texts, text)
		}
		return err
	})
	*dst = strings.Join(texts, " ")
	return err
}

// prompt reads a completion prompt: a string, an array of strings, of token ids or of arrays
// of token ids (a null id counts as 0, as encoding/json decodes it), or null (no prompt).
func (d *decoder) prompt(w *body) error {
	switch d.peek() {
	case 'n':
		w.promptSet = false
		return d.literal("null")
	case '"':
		s, err := d.readString()
		w.prompt, w.promptTokens, w.promptSet = s, nil, true
		return err
	case '[':
	default:
		return d.mismatch("prompt", "a string or an array")
	}
	var texts []string
	var ids []int32
	err := d.array(func() error {
		switch d.peek() {
		case '"':
			s, err := d.readString()
			texts = append(texts, s)
			return err
		case '[':
			return d.array(func() error { return d.tokenID(&ids) })
		}
		return d.tokenID(&ids)
	})
	w.prompt, w.promptTokens, w.promptSet = strings.Join(texts, " "), ids, true
	return err
}

func (d *decoder) tokenID(ids *[]int32) error {
	if d.isNull() {
		*ids = append(*ids, 0)
		return nil
	}
	c := d.peek()
	if c != '-' && (c < '0' || c > '9') {
		return d.mismatch("prompt", "token ids")
	}
	lit, err := d.number()
	if err != nil {
		return err
	}
	v, ok := parseInt(lit, math.MinInt32, math.MaxInt32)
	if !ok {
		return d.recordMismatch("prompt", "32-bit token ids")
	}
	*ids = append(*ids, int32(v))
	return nil
}
