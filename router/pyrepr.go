package router

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// appendPyPayload appends Python's str((body,)) to dst, where body is a JSON object as
// json.loads parses it: Neutree's str(payload) of a Ray Serve call's args, one dict
// (neutree-ai/neutree v1.1.1 cluster-image-builder/serve/_replica_scheduler/chwbl_scheduler.py
// _extract_cache_key 318; the dict is starlette's request.json(), serve/vllm/*/app.py chat).
func appendPyPayload(dst, body []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	v, err := decodePy(dec, 0)
	if err != nil {
		return dst, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return dst, errors.New("trailing data after the JSON value")
	}
	dst = append(dst, '(')
	dst = v.appendRepr(dst)
	return append(dst, ",)"...), nil
}

// maxPyDepth bounds the nesting appendPyPayload accepts: CPython's json.loads gives up near
// its default recursion limit of 1,000 (RecursionError), so a deeper body never reaches
// Neutree's scheduler, and a hostile one cannot run the router's stack away.
const maxPyDepth = 1000

// pyValue is a decoded JSON value in the order Python keeps it: a dict keeps each key where it
// first appeared, with its last value (json.loads assigns duplicates in turn).
type pyValue struct {
	scalar []byte // rendered repr, for a string, number, true, false or null
	list   []pyValue
	keys   []string
	vals   []pyValue
	at     map[string]int // a large dict's key positions, so duplicates cost no scan
	kind   byte           // 's' scalar, 'l' list, 'd' dict
}

// decodePy reads one value, nested depth deep, from dec.
func decodePy(dec *json.Decoder, depth int) (pyValue, error) {
	tok, err := dec.Token()
	if err != nil {
		return pyValue{}, err
	}
	switch t := tok.(type) {
	case json.Delim:
		if depth++; depth > maxPyDepth {
			return pyValue{}, fmt.Errorf("nested deeper than %d", maxPyDepth)
		}
		if t == '[' {
			v := pyValue{kind: 'l'}
			for dec.More() {
				e, err := decodePy(dec, depth)
				if err != nil {
					return v, err
				}
				v.list = append(v.list, e)
			}
			_, err := dec.Token()
			return v, err
		}
		return decodePyDict(dec, depth)
	case string:
		return pyValue{kind: 's', scalar: appendPyStr(nil, t)}, nil
	case json.Number:
		b, err := appendPyNumber(nil, string(t))
		return pyValue{kind: 's', scalar: b}, err
	case bool:
		if t {
			return pyValue{kind: 's', scalar: []byte("True")}, nil
		}
		return pyValue{kind: 's', scalar: []byte("False")}, nil
	}
	return pyValue{kind: 's', scalar: []byte("None")}, nil
}

// decodePyDict reads an object's members after its '{'.
func decodePyDict(dec *json.Decoder, depth int) (pyValue, error) {
	v := pyValue{kind: 'd'}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return v, err
		}
		val, err := decodePy(dec, depth)
		if err != nil {
			return v, err
		}
		key, _ := k.(string)
		if i := v.index(key); i >= 0 {
			v.vals[i] = val
			continue
		}
		if v.at != nil {
			v.at[key] = len(v.keys)
		}
		v.keys, v.vals = append(v.keys, key), append(v.vals, val)
	}
	_, err := dec.Token()
	return v, err
}

// index returns key's position in dict v, or -1. Small dicts scan; from 16 keys on a map
// keeps the positions, so a body of many keys costs linear time.
func (v *pyValue) index(key string) int {
	if v.at == nil && len(v.keys) >= 16 {
		v.at = make(map[string]int, 2*len(v.keys))
		for i, k := range v.keys {
			v.at[k] = i
		}
	}
	if v.at != nil {
		if i, ok := v.at[key]; ok {
			return i
		}
		return -1
	}
	for i, k := range v.keys {
		if k == key {
			return i
		}
	}
	return -1
}

// appendRepr appends Python's repr of v.
func (v *pyValue) appendRepr(dst []byte) []byte {
	switch v.kind {
	case 'l':
		dst = append(dst, '[')
		for i := range v.list {
			if i > 0 {
				dst = append(dst, ", "...)
			}
			dst = v.list[i].appendRepr(dst)
		}
		return append(dst, ']')
	case 'd':
		dst = append(dst, '{')
		for i, k := range v.keys {
			if i > 0 {
				dst = append(dst, ", "...)
			}
			dst = append(appendPyStr(dst, k), ": "...)
			dst = v.vals[i].appendRepr(dst)
		}
		return append(dst, '}')
	}
	return append(dst, v.scalar...)
}

// appendPyNumber appends repr(json.loads(num)): an int keeps its digits ("-0" is 0); a float is
// repr(float): the shortest round-trip digits, fixed from 1e-4 up to 1e16 (with ".0" when
// integral), an exponent of at least two digits otherwise; out of range, inf.
func appendPyNumber(dst []byte, num string) ([]byte, error) {
	if !strings.ContainsAny(num, ".eE") {
		if num == "-0" {
			return append(dst, '0'), nil
		}
		return append(dst, num...), nil
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return dst, fmt.Errorf("number %q: %w", num, err)
	}
	switch {
	case math.IsInf(f, 1):
		return append(dst, "inf"...), nil
	case math.IsInf(f, -1):
		return append(dst, "-inf"...), nil
	case f == 0:
		if math.Signbit(f) {
			return append(dst, "-0.0"...), nil
		}
		return append(dst, "0.0"...), nil
	}
	if e := pyExp(f); e < -4 || e >= 16 {
		return strconv.AppendFloat(dst, f, 'e', -1, 64), nil
	}
	n := len(dst)
	dst = strconv.AppendFloat(dst, f, 'f', -1, 64)
	if !bytes.ContainsRune(dst[n:], '.') {
		dst = append(dst, ".0"...)
	}
	return dst, nil
}

// pyExp is the decimal exponent of f's shortest round-trip digits, as Python's repr decides
// between fixed and exponent notation (float_repr_style "short": exponent when < -4 or >= 16).
func pyExp(f float64) int {
	s := strconv.FormatFloat(math.Abs(f), 'e', -1, 64)
	e, _ := strconv.Atoi(s[strings.IndexByte(s, 'e')+1:])
	return e
}

// appendPyStr appends Python's repr of s: single quotes unless s holds a single quote and no
// double quote; backslash, the quote, \t \n \r escaped; other unprintable characters as \xNN,
// \uNNNN or \UNNNNNNNN (str.isprintable, which Go's unicode.IsPrint matches: letters, marks,
// numbers, punctuation, symbols and the ASCII space).
func appendPyStr(dst []byte, s string) []byte {
	quote := byte('\'')
	if strings.IndexByte(s, '\'') >= 0 && strings.IndexByte(s, '"') < 0 {
		quote = '"'
	}
	dst = append(dst, quote)
	for len(s) > 0 {
		n := 0 // the leading run of printable ASCII needing no escape, copied at once
		for n < len(s) && s[n] >= 0x20 && s[n] < 0x7f && s[n] != '\\' && s[n] != quote {
			n++
		}
		dst, s = append(dst, s[:n]...), s[n:]
		if len(s) == 0 {
			break
		}
		r, size := utf8.DecodeRuneInString(s)
		s = s[size:]
		switch {
		case r == '\\' || r == rune(quote):
			dst = append(dst, '\\', byte(r))
		case r == '\t':
			dst = append(dst, `\t`...)
		case r == '\n':
			dst = append(dst, `\n`...)
		case r == '\r':
			dst = append(dst, `\r`...)
		case r >= 0x7f && unicode.IsPrint(r):
			dst = utf8.AppendRune(dst, r)
		case r < 0x100:
			dst = fmt.Appendf(dst, `\x%02x`, r)
		case r < 0x10000:
			dst = fmt.Appendf(dst, `\u%04x`, r)
		default:
			dst = fmt.Appendf(dst, `\U%08x`, r)
		}
	}
	return append(dst, quote)
}
