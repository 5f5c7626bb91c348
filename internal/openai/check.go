package openai

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// CheckStream reports the first way body fails to be a well-formed OpenAI event stream as a
// client reads it: every line is a "data:" line, a comment or another event-stream field
// (event, id, retry), every "data:" line holds a JSON object or "[DONE]", every event ends
// with a blank line, nothing follows [DONE], and the stream ends with [DONE] or with an error
// event ({"error": ...}). It returns nil for a well-formed stream.
func CheckStream(body []byte) error {
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, maxLine)
	var last string // "done", "error" or "data": the last event's kind
	inEvent, line := false, 0
	for sc.Scan() {
		line++
		l := bytes.TrimSuffix(sc.Bytes(), []byte{'\r'})
		if len(l) == 0 {
			inEvent = false
			continue
		}
		if last == "done" {
			return fmt.Errorf("openai: stream line %d: %q after [DONE]", line, l)
		}
		data, ok := bytes.CutPrefix(l, dataPrefix)
		if !ok {
			if l[0] == ':' || hasField(l, "event") || hasField(l, "id") || hasField(l, "retry") {
				continue
			}
			return fmt.Errorf("openai: stream line %d: %q is not an event-stream field", line, l)
		}
		if inEvent {
			return fmt.Errorf("openai: stream line %d: a second data line in one event", line)
		}
		inEvent = true
		data = bytes.TrimLeft(data, " ")
		switch {
		case bytes.Equal(data, donePayload):
			last = "done"
		case !json.Valid(data) || data[0] != '{':
			return fmt.Errorf("openai: stream line %d: data is not a JSON object: %q", line, data)
		case bytes.HasPrefix(data, errorKey):
			last = "error"
		default:
			last = "data"
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("openai: stream: %w", err)
	}
	if inEvent || (len(body) > 0 && body[len(body)-1] != '\n') {
		return errors.New("openai: stream: the last event is not ended by a blank line")
	}
	if last != "done" && last != "error" {
		return errors.New("openai: stream: ends without [DONE] or an error event")
	}
	return nil
}

// hasField reports whether l is the event-stream line of field name.
func hasField(l []byte, name string) bool {
	return bytes.HasPrefix(l, []byte(name)) && (len(l) == len(name) || l[len(name)] == ':')
}
