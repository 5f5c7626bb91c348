package vllm

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// KVTransferParams is the kv_transfer_params object of vLLM's NixlConnector two-step
// (vllm-project/vllm@053da34b vllm/distributed/kv_transfer/kv_connector/v1/nixl/scheduler.py,
// request_finished and get_num_new_matched_tokens). A prefill leg's
// request carries DoRemoteDecode; its response carries DoRemotePrefill and where the blocks
// wait; the decode leg's request carries that response's object unchanged.
type KVTransferParams struct {
	// DoRemoteDecode marks a prefill leg: compute the prompt, answer after one token and
	// keep the prompt's blocks for a decoder to read.
	DoRemoteDecode bool `json:"do_remote_decode"`
	// DoRemotePrefill marks a decode leg: the prompt's KV is read from RemoteHost.
	DoRemotePrefill bool `json:"do_remote_prefill"`
	// RemoteEngineID names the prefill engine holding the blocks.
	RemoteEngineID string `json:"remote_engine_id,omitempty"`
	// RemoteBlockIDs are the held blocks' ids on the prefill engine, one per prompt block.
	RemoteBlockIDs []int `json:"remote_block_ids,omitempty"`
	// RemoteRequestID is the prefill leg's request id there, which the decoder names when it
	// tells the prefill engine it finished reading.
	RemoteRequestID string `json:"remote_request_id,omitempty"`
	// RemoteHost and RemotePort are where the prefill engine's NIXL side channel listens.
	RemoteHost string `json:"remote_host,omitempty"`
	RemotePort int    `json:"remote_port,omitempty"`
	// TPSize is the prefill engine's tensor-parallel size.
	TPSize int `json:"tp_size,omitempty"`
}

// PrefillLegParams is the kv_transfer_params a two-step proxy puts on the prefill leg, as
// vLLM's toy proxy writes it (vllm-project/vllm@030ea52e
// tests/v1/kv_connector/nixl_integration/toy_proxy_server.py, send_request_to_service) and
// llm-d's sidecar (llm-d/llm-d-router@ebab6879 pkg/sidecar/proxy/connector_nixlv2.go:162-170):
// every remote field present and null.
const PrefillLegParams = `{"do_remote_decode":true,"do_remote_prefill":false,"remote_engine_id":null,"remote_block_ids":null,"remote_host":null,"remote_port":null}`

// MaxKVTransferParamsBytes bounds a kv_transfer_params object read from a response: a
// block id per 16 prompt tokens fits a 1M-token prompt's ids in well under this.
const MaxKVTransferParamsBytes = 1 << 20

// Errors of the two-step bodies.
var (
	// ErrNoKVTransferParams: a prefill response carries no kv_transfer_params object (a
	// server without a KV connector, or a prefill that did not stop at its length limit).
	ErrNoKVTransferParams = errors.New("vllm: prefill response has no kv_transfer_params object")
	// ErrNotObject: a body, or a kv_transfer_params value, is not a JSON object.
	ErrNotObject = errors.New("vllm: not a JSON object")
)

// PrefillBody returns the prefill leg's body for a client's completion or chat body: the
// client's members in their order, with kv_transfer_params set to PrefillLegParams, stream
// false, max_tokens 1, max_completion_tokens 1 when the client set it (as the toy proxy
// does), stream_options left out, and min_tokens left out too (vLLM rejects a min_tokens
// above max_tokens). Members added go last.
func PrefillBody(body []byte) ([]byte, error) {
	set := []member{
		{"kv_transfer_params", jsontext.Value(PrefillLegParams), true},
		{"stream", jsontext.Value("false"), true},
		{"max_tokens", jsontext.Value("1"), true},
		{"max_completion_tokens", jsontext.Value("1"), false},
		{"stream_options", nil, false},
		{"min_tokens", nil, false},
	}
	return rewrite(body, set)
}

// DecodeBody returns the decode leg's body: the client's body with kv_transfer_params set
// to params, the object the prefill leg's response returned, unchanged.
func DecodeBody(body []byte, params jsontext.Value) ([]byte, error) {
	return rewrite(body, []member{{"kv_transfer_params", params, true}})
}

// member is one top-level member PrefillBody or DecodeBody writes: value nil deletes it;
// add writes it when the body lacks it.
type member struct {
	name  string
	value jsontext.Value
	add   bool
}

// rewrite copies the JSON object body member by member, replacing or deleting the members
// set names and appending those it marks add that body lacks.
func rewrite(body []byte, set []member) ([]byte, error) {
	dec := jsontext.NewDecoder(bytes.NewReader(body))
	var out bytes.Buffer
	out.Grow(len(body) + 256)
	enc := jsontext.NewEncoder(&out)
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return nil, fmt.Errorf("vllm: request body: %w", ErrNotObject)
	}
	if err := enc.WriteToken(jsontext.BeginObject); err != nil {
		return nil, err
	}
	seen := make([]bool, len(set))
	for dec.PeekKind() != '}' {
		tok, err := dec.ReadToken()
		if err != nil {
			return nil, fmt.Errorf("vllm: request body: %w", err)
		}
		name := tok.String() // before the next read voids tok
		v, err := dec.ReadValue()
		if err != nil {
			return nil, fmt.Errorf("vllm: request body: %w", err)
		}
		i := findMember(set, name)
		switch {
		case i < 0:
			err = writeMember(enc, name, v)
		case set[i].value != nil:
			seen[i] = true
			err = writeMember(enc, name, set[i].value)
		}
		if err != nil {
			return nil, err
		}
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, fmt.Errorf("vllm: request body: %w", err)
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return nil, fmt.Errorf("vllm: request body: data after the object")
	}
	for i, m := range set {
		if m.add && !seen[i] {
			if err := writeMember(enc, m.name, m.value); err != nil {
				return nil, err
			}
		}
	}
	if err := enc.WriteToken(jsontext.EndObject); err != nil {
		return nil, err
	}
	return bytes.TrimRight(out.Bytes(), "\n"), nil
}

func findMember(set []member, name string) int {
	for i := range set {
		if set[i].name == name {
			return i
		}
	}
	return -1
}

func writeMember(enc *jsontext.Encoder, name string, v jsontext.Value) error {
	if err := enc.WriteToken(jsontext.String(name)); err != nil {
		return err
	}
	return enc.WriteValue(v)
}

// PrefillResult is what a two-step proxy reads from a prefill leg's response.
type PrefillResult struct {
	// Params is the response's kv_transfer_params object, as sent. The response's usage is
	// openai.ParseUsage's.
	Params jsontext.Value
}

// ParsePrefillResponse reads a prefill leg's non-streamed response body. It fails with
// ErrNoKVTransferParams when the body has no kv_transfer_params object (absent or null),
// and when that object is larger than MaxKVTransferParamsBytes or not an object.
func ParsePrefillResponse(body []byte) (PrefillResult, error) {
	var v struct {
		Params jsontext.Value `json:"kv_transfer_params"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return PrefillResult{}, fmt.Errorf("vllm: prefill response: %w", err)
	}
	var r PrefillResult
	switch {
	case len(v.Params) == 0 || v.Params.Kind() == 'n':
		return r, ErrNoKVTransferParams
	case v.Params.Kind() != '{':
		return r, fmt.Errorf("vllm: prefill response: kv_transfer_params: %w", ErrNotObject)
	case len(v.Params) > MaxKVTransferParamsBytes:
		return r, fmt.Errorf("vllm: prefill response: kv_transfer_params of %d bytes: want at most %d", len(v.Params), MaxKVTransferParamsBytes)
	}
	r.Params = bytes.Clone(v.Params)
	return r, nil
}

// RequestKVTransfer reads the kv_transfer_params of a completion or chat request body; ok
// is false when the body carries none (absent or null). It parses as ParseKVTransferParams
// does; a server that parses the body already should pass ParseKVTransferParams the value
// it read rather than parse the body twice.
func RequestKVTransfer(body []byte) (p KVTransferParams, ok bool, err error) {
	var v struct {
		Params jsontext.Value `json:"kv_transfer_params"`
	}
	if err := json.Unmarshal(body, &v, lenient); err != nil {
		return p, false, fmt.Errorf("vllm: kv_transfer_params: %w", err)
	}
	return ParseKVTransferParams(v.Params)
}

// ParseKVTransferParams reads a request's kv_transfer_params value (openai.Request's
// KVTransferParams); ok is false when there is none (empty or null). Members it does not
// know are skipped.
func ParseKVTransferParams(v jsontext.Value) (p KVTransferParams, ok bool, err error) {
	if len(v) == 0 {
		return p, false, nil
	}
	var pp *KVTransferParams
	if err := json.Unmarshal(v, &pp, lenient); err != nil {
		return p, false, fmt.Errorf("vllm: kv_transfer_params: %w", err)
	}
	if pp == nil {
		return p, false, nil
	}
	return *pp, true, nil
}

// lenient are the decode options of Python's json module, which vLLM parses request bodies
// with, as internal/openai's parser uses them: a repeated member is no error (the last one
// wins), nor is invalid UTF-8 in a string (it becomes U+FFFD).
var lenient = json.JoinOptions(jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
