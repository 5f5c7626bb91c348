package openai

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"unicode/utf8"
)

// decoder is a small validating JSON reader specialised for request bodies: it decodes the
// few fields routing needs and validates, without building anything, everything else. It is
// several times faster than encoding/json on a prompt-sized body, which matters because the
// proxy parses every request it routes. A wrong-typed known field is recorded and reported
// only once the whole body is known to be well-formed, so syntax errors take precedence, as
// with encoding/json.
type decoder struct {
	b       []byte
	i       int
	depth   int
	typeErr error
}

// maxDepth is the deepest nesting accepted, as in encoding/json.
const maxDepth = 10000

func (d *decoder) syntax(msg string) error {
	return &RequestError{Err: fmt.Errorf("malformed JSON at byte %d: %s", d.i, msg)}
}

// mismatch records that param holds a value of the wrong type, and skips the value.
func (d *decoder) mismatch(param, want string) error {
	if d.typeErr == nil {
		d.typeErr = &RequestError{Param: param, Err: fmt.Errorf("want %s", want)}
	}
	return d.skip()
}

func (d *decoder) ws() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// peek returns the next byte after whitespace, or 0 at the end.
func (d *decoder) peek() byte {
	d.ws()
	if d.i < len(d.b) {
		return d.b[d.i]
	}
	return 0
}

// top decodes the body's top-level object into w.
func (d *decoder) top(w *body) error {
	if d.peek() != '{' {
		return &RequestError{Err: errors.New("body is not a JSON object")}
	}
	var so streamOptions
	err := d.object(func(key string) error { return d.topField(key, w, &so) })
	if err != nil {
		return err
	}
	if d.peek() != 0 {
		return d.syntax("data after the top-level object")
	}
	w.includeUsage = so.set && so.includeUsage
	return d.typeErr
}

type streamOptions struct{ set, includeUsage bool }

func (d *decoder) topField(key string, w *body, so *streamOptions) error {
	switch key {
	case "model":
		return d.stringValue("model", &w.model)
	case "user":
		return d.stringValue("user", &w.user)
	case "messages":
		return d.messages(w)
	case "prompt":
		return d.prompt(w)
	case "max_tokens":
		return d.intValue("max_tokens", &w.maxTokens, &w.hasMaxTokens)
	case "max_completion_tokens":
		return d.intValue("max_completion_tokens", &w.maxCompletionTokens, &w.hasMaxCompletion)
	case "stream":
		return d.boolValue("stream", &w.stream)
	case "stream_options":
		return d.streamOptions(so)
	}
	return d.skip()
}

// object reads an object, calling field for each key with the decoder at its value; field
// must consume the value.
func (d *decoder) object(field func(key string) error) error {
	if d.depth++; d.depth > maxDepth {
		return d.syntax("nested too deeply")
	}
	d.i++ // '{'
	if d.peek() == '}' {
		d.i++
		d.depth--
		return nil
	}
	for {
		if d.peek() != '"' {
			return d.syntax("want a string key")
		}
		key, err := d.readKnown()
		if err != nil {
			return err
		}
		if d.peek() != ':' {
			return d.syntax("want ':' after a key")
		}
		d.i++
		d.ws()
		if err := field(key); err != nil {
			return err
		}
		switch d.peek() {
		case ',':
			d.i++
		case '}':
			d.i++
			d.depth--
			return nil
		default:
			return d.syntax("want ',' or '}' in an object")
		}
	}
}

// array reads an array, calling elem with the decoder at each element; elem must consume it.
func (d *decoder) array(elem func() error) error {
	if d.depth++; d.depth > maxDepth {
		return d.syntax("nested too deeply")
	}
	d.i++ // '['
	if d.peek() == ']' {
		d.i++
		d.depth--
		return nil
	}
	for {
		d.ws()
		if err := elem(); err != nil {
			return err
		}
		switch d.peek() {
		case ',':
			d.i++
		case ']':
			d.i++
			d.depth--
			return nil
		default:
			return d.syntax("want ',' or ']' in an array")
		}
	}
}

// skip validates and skips one value.
func (d *decoder) skip() error {
	switch c := d.peek(); {
	case c == '{':
		return d.object(func(string) error { return d.skip() })
	case c == '[':
		return d.array(d.skip)
	case c == '"':
		_, _, err := d.scanString()
		return err
	case c == 't':
		return d.literal("true")
	case c == 'f':
		return d.literal("false")
	case c == 'n':
		return d.literal("null")
	case c == '-' || (c >= '0' && c <= '9'):
		_, err := d.number()
		return err
	case c == 0:
		return d.syntax("unexpected end of input")
	}
	return d.syntax("unexpected character")
}

func (d *decoder) literal(lit string) error {
	if len(d.b)-d.i < len(lit) || string(d.b[d.i:d.i+len(lit)]) != lit {
		return d.syntax("invalid literal")
	}
	d.i += len(lit)
	return nil
}

// isNull consumes a null literal if one is next.
func (d *decoder) isNull() bool {
	if d.peek() == 'n' && d.literal("null") == nil {
		return true
	}
	return false
}

// scanString validates the string literal at d.i and moves past it, returning its bounds
// (quotes excluded) and whether it holds escapes. Runs of plain bytes are skipped with
// vectorized searches for the closing quote and the next backslash.
func (d *decoder) scanString() (lit []byte, escaped bool, err error) {
	start := d.i
	i := d.i + 1
	// Most strings are short (keys, roles, ids, finish reasons): a plain loop over
	// their first bytes costs less than setting up the vectorised searches below, which take
	// over from i at the first escape, control byte, or after shortString bytes.
	for j := i; j < len(d.b) && j < i+shortString; j++ {
		if c := d.b[j]; c == '"' {
			d.i = j + 1
			return d.b[start:d.i], false, nil
		} else if c == '\\' || c < 0x20 {
			break
		}
	}
	quote := -1 // the next '"' at or after i, or len(d.b) when there is none
	for {
		if quote < i {
			quote = indexFrom(d.b, i, '"')
		}
		stop := quote
		if bs := bytes.IndexByte(d.b[i:quote], '\\'); bs >= 0 {
			stop = i + bs
		}
		if c := indexControl(d.b[i:stop]); c >= 0 {
			d.i = i + c
			return nil, false, d.syntax("control character in a string")
		}
		i = stop
		if i == len(d.b) {
			d.i = i
			return nil, false, d.syntax("unterminated string")
		}
		if d.b[i] == '"' {
			d.i = i + 1
			return d.b[start:d.i], escaped, nil
		}
		escaped = true
		n, ok := escapeLen(d.b[i:])
		if !ok {
			d.i = i
			return nil, false, d.syntax("invalid escape in a string")
		}
		i += n
	}
}

// shortString is how many bytes scanString checks one by one before it searches.
const shortString = 24

// indexFrom returns the index of the first c in b at or after i, or len(b) when there is none.
func indexFrom(b []byte, i int, c byte) int {
	if j := bytes.IndexByte(b[i:], c); j >= 0 {
		return i + j
	}
	return len(b)
}

// indexControl returns the index of the first byte below 0x20 in b, or -1. It tests eight
// bytes at a time: (x - 0x20…20) &^ x & 0x80…80 is non-zero exactly when some byte of x is
// below 0x20.
func indexControl(b []byte) int {
	i := 0
	for ; i+8 <= len(b); i += 8 {
		x := binary.LittleEndian.Uint64(b[i:])
		if (x-0x2020202020202020)&^x&0x8080808080808080 != 0 {
			break
		}
	}
	for ; i < len(b); i++ {
		if b[i] < 0x20 {
			return i
		}
	}
	return -1
}

// escapeLen returns the length of the escape sequence at the start of b.
func escapeLen(b []byte) (int, bool) {
	if len(b) < 2 {
		return 0, false
	}
	switch b[1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return 2, true
	case 'u':
		if len(b) < 6 {
			return 0, false
		}
		for _, h := range b[2:6] {
			if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
				return 0, false
			}
		}
		return 6, true
	}
	return 0, false
}

// readString decodes the string literal at d.i. Escapes and invalid UTF-8 go through
// encoding/json so that the result is exactly what it would decode.
func (d *decoder) readString() (string, error) {
	lit, escaped, err := d.scanString()
	if err != nil {
		return "", err
	}
	return decodeLit(lit, escaped)
}

// decodeLit decodes a string literal that scanString validated.
func decodeLit(lit []byte, escaped bool) (string, error) {
	in := lit[1 : len(lit)-1]
	if !escaped && utf8.Valid(in) {
		return string(in), nil
	}
	var s string
	if err := json.Unmarshal(lit, &s); err != nil {
		return "", &RequestError{Err: err}
	}
	return s, nil
}

// knownKeys holds the object keys of requests and responses, and the message roles, that
// readKnown returns without allocating: those the decoder looks for, and other common ones.
// They are looked up by length and first and last byte in a 256-slot table rather than a map:
// hashing the key cost more than the rest of decoding a usage object.
var knownKeys = func() *[256][]string {
	var t [256][]string
	for _, k := range []string{
		"model", "user", "messages", "prompt", "max_tokens", "max_completion_tokens", "stream",
		"stream_options", "include_usage", "role", "content", "type", "text", "name", "usage",
		"prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details", "cached_tokens",
		"temperature", "top_p", "n", "stop", "seed", "tools", "tool_choice", "logprobs", "id",
		"object", "created", "choices", "index", "message", "finish_reason", "delta",
		"system_fingerprint", "stop_reason", "prompt_logprobs", "reasoning_content", "tool_calls",
		"kv_transfer_params", "service_tier", "image_url", "url", "frequency_penalty",
		"presence_penalty", "response_format", "ignore_eos", "min_tokens",
		"system", "developer", "assistant", "tool", "function",
		"refusal", "annotations", "audio", "function_call",
	} {
		slot := &t[knownSlot([]byte(k))]
		*slot = append(*slot, k)
	}
	return &t
}()

// knownSlot is b's slot in knownKeys (b is not empty).
func knownSlot(b []byte) byte {
	return byte(len(b)*37 + int(b[0])*7 + int(b[len(b)-1]))
}

// knownKey returns the interned copy of b if b is one of knownKeys.
func knownKey(b []byte) (string, bool) {
	if len(b) == 0 {
		return "", false
	}
	for _, k := range knownKeys[knownSlot(b)] {
		if k == string(b) {
			return k, true
		}
	}
	return "", false
}

// readKnown decodes a string like readString, without allocating for one of knownKeys.
func (d *decoder) readKnown() (string, error) {
	lit, escaped, err := d.scanString()
	if err != nil {
		return "", err
	}
	if !escaped {
		if k, ok := knownKey(lit[1 : len(lit)-1]); ok {
			return k, nil
		}
	}
	return decodeLit(lit, escaped)
}

// number validates the number literal at d.i and returns it.
func (d *decoder) number() ([]byte, error) {
	start, i := d.i, d.i
	digits := func() int {
		n := 0
		for i < len(d.b) && d.b[i] >= '0' && d.b[i] <= '9' {
			i++
			n++
		}
		return n
	}
	if i < len(d.b) && d.b[i] == '-' {
		i++
	}
	if i < len(d.b) && d.b[i] == '0' {
		i++
	} else if digits() == 0 {
		d.i = i
		return nil, d.syntax("invalid number")
	}
	if i < len(d.b) && d.b[i] == '.' {
		i++
		if digits() == 0 {
			d.i = i
			return nil, d.syntax("invalid number")
		}
	}
	if i < len(d.b) && (d.b[i] == 'e' || d.b[i] == 'E') {
		i++
		if i < len(d.b) && (d.b[i] == '+' || d.b[i] == '-') {
			i++
		}
		if digits() == 0 {
			d.i = i
			return nil, d.syntax("invalid number")
		}
	}
	d.i = i
	return d.b[start:i], nil
}

// parseInt parses an integer literal within [lo, hi]; ok is false for fractions, exponents
// and out-of-range values.
func parseInt(lit []byte, lo, hi int64) (int64, bool) {
	neg := len(lit) > 0 && lit[0] == '-'
	if neg {
		lit = lit[1:]
	}
	var v uint64
	for _, c := range lit {
		if c < '0' || c > '9' || v > math.MaxUint64/10 {
			return 0, false
		}
		v = v*10 + uint64(c-'0')
		if v > 1<<63 {
			return 0, false
		}
	}
	if neg {
		if v > uint64(-lo) {
			return 0, false
		}
		return -int64(v), true
	}
	if v > uint64(hi) {
		return 0, false
	}
	return int64(v), true
}
