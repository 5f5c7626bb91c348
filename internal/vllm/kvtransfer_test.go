package vllm

import (
	"errors"
	"strings"
	"testing"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/google/go-cmp/cmp"
)

func TestPrefillBody(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		want       map[string]any
	}{{
		name: "chat stream",
		body: `{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true},"max_tokens":50,"min_tokens":5}`,
		want: map[string]any{"model": "m", "messages": []any{map[string]any{"role": "user", "content": "hi"}},
			"stream": false, "max_tokens": 1.0, "kv_transfer_params": prefillParams()},
	}, {
		name: "completion without limits",
		body: `{"model":"m","prompt":"abc"}`,
		want: map[string]any{"model": "m", "prompt": "abc", "stream": false, "max_tokens": 1.0, "kv_transfer_params": prefillParams()},
	}, {
		name: "max_completion_tokens and earlier params replaced",
		body: `{"model":"m","prompt":"abc","max_completion_tokens":9,"kv_transfer_params":{"x":1}}`,
		want: map[string]any{"model": "m", "prompt": "abc", "stream": false, "max_tokens": 1.0, "max_completion_tokens": 1.0, "kv_transfer_params": prefillParams()},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := PrefillBody([]byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			var got map[string]any
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatalf("%s: %v", b, err)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("PrefillBody (-want +got):\n%s", d)
			}
			if !strings.HasPrefix(string(b), `{"model":"m",`) {
				t.Errorf("the client's members lost their order: %s", b)
			}
		})
	}
}

func prefillParams() map[string]any {
	return map[string]any{"do_remote_decode": true, "do_remote_prefill": false, "remote_engine_id": nil,
		"remote_block_ids": nil, "remote_host": nil, "remote_port": nil}
}

func TestDecodeBody(t *testing.T) {
	params := jsontext.Value(`{"do_remote_prefill":true,"remote_block_ids":[1,2],"remote_engine_id":"e"}`)
	b, err := DecodeBody([]byte(`{"model":"m","stream":true,"max_tokens":7}`), params)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"model":"m","stream":true,"max_tokens":7,"kv_transfer_params":{"do_remote_prefill":true,"remote_block_ids":[1,2],"remote_engine_id":"e"}}`
	if string(b) != want {
		t.Errorf("DecodeBody = %s, want %s", b, want)
	}
}

func TestRewriteRejects(t *testing.T) {
	for _, body := range []string{``, `[]`, `"x"`, `{"a":`, `{"a":1,"a":2}`, `{"a":1}x`} {
		if _, err := PrefillBody([]byte(body)); err == nil {
			t.Errorf("PrefillBody(%q): no error", body)
		}
	}
}

func TestParsePrefillResponse(t *testing.T) {
	huge := `{"kv_transfer_params":{"remote_block_ids":[` + strings.Repeat("1,", MaxKVTransferParamsBytes/2) + `1]}}`
	for _, tc := range []struct {
		name, body string
		want       PrefillResult
		err        error
	}{
		{"vllm", `{"choices":[],"kv_transfer_params":{"do_remote_prefill":true,"remote_block_ids":[3]},"usage":{"prompt_tokens":40,"prompt_tokens_details":{"cached_tokens":32}}}`,
			PrefillResult{Params: jsontext.Value(`{"do_remote_prefill":true,"remote_block_ids":[3]}`)}, nil},
		{"null details", `{"kv_transfer_params":{"a":1},"usage":{"prompt_tokens_details":null}}`,
			PrefillResult{Params: jsontext.Value(`{"a":1}`)}, nil},
		{"absent", `{"usage":{"prompt_tokens_details":{"cached_tokens":16}}}`, PrefillResult{}, ErrNoKVTransferParams},
		{"null", `{"kv_transfer_params":null}`, PrefillResult{}, ErrNoKVTransferParams},
		{"array", `{"kv_transfer_params":[1]}`, PrefillResult{}, ErrNotObject},
		{"huge", huge, PrefillResult{}, nil},
		{"not json", `{"kv_transfer_params":`, PrefillResult{}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParsePrefillResponse([]byte(tc.body))
			wantErr := tc.err != nil || tc.name == "huge" || tc.name == "not json"
			if (err != nil) != wantErr || (tc.err != nil && !errors.Is(err, tc.err)) {
				t.Fatalf("err = %v, want %v", err, tc.err)
			}
			if tc.name == "huge" || tc.name == "not json" {
				return
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

func TestRequestKVTransfer(t *testing.T) {
	p, ok, err := RequestKVTransfer([]byte(`{"prompt":"x","kv_transfer_params":` + PrefillLegParams + `}`))
	if err != nil || !ok || !p.DoRemoteDecode || p.DoRemotePrefill {
		t.Errorf("prefill leg: %+v %v %v", p, ok, err)
	}
	if _, ok, err := RequestKVTransfer([]byte(`{"prompt":"x"}`)); ok || err != nil {
		t.Errorf("no params: ok %v err %v", ok, err)
	}
	// As vLLM (Python's json) parses it: a repeated member and invalid UTF-8 are no error.
	lax := "{\"prompt\":\"\xff\",\"prompt\":\"y\",\"kv_transfer_params\":{\"do_remote_decode\":true}}"
	if p, ok, err := RequestKVTransfer([]byte(lax)); !ok || err != nil || !p.DoRemoteDecode {
		t.Errorf("repeated member, invalid UTF-8: %+v ok %v err %v", p, ok, err)
	}
	in := KVTransferParams{DoRemotePrefill: true, RemoteEngineID: "e", RemoteBlockIDs: []int{4, 5}, RemoteRequestID: "r",
		RemoteHost: "127.0.0.1", RemotePort: 9, TPSize: 1}
	b, _ := json.Marshal(map[string]any{"kv_transfer_params": in})
	out, ok, err := RequestKVTransfer(b)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	if d := cmp.Diff(in, out); d != "" {
		t.Errorf("round trip (-want +got):\n%s", d)
	}
}

func TestParseKVTransferParams(t *testing.T) {
	for _, tc := range []struct {
		name    string
		v       string
		want    KVTransferParams
		ok      bool
		wantErr bool
	}{
		{"none", "", KVTransferParams{}, false, false},
		{"null", "null", KVTransferParams{}, false, false},
		{"prefill leg", PrefillLegParams, KVTransferParams{DoRemoteDecode: true}, true, false},
		{"unknown member skipped", `{"do_remote_prefill":true,"extra":[1]}`, KVTransferParams{DoRemotePrefill: true}, true, false},
		{"repeated member: the last wins", `{"do_remote_decode":false,"do_remote_decode":true}`, KVTransferParams{DoRemoteDecode: true}, true, false},
		{"invalid UTF-8 becomes U+FFFD", "{\"remote_engine_id\":\"e\xff\"}", KVTransferParams{RemoteEngineID: "e\ufffd"}, true, false},
		{"not an object", `"yes"`, KVTransferParams{}, false, true},
		{"ill-typed member", `{"do_remote_decode":"yes"}`, KVTransferParams{}, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok, err := ParseKVTransferParams(jsontext.Value(tc.v))
			if (err != nil) != tc.wantErr || ok != tc.ok {
				t.Fatalf("ok %v err %v: want ok %v, error %v", ok, err, tc.ok, tc.wantErr)
			}
			if d := cmp.Diff(tc.want, got); !tc.wantErr && d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

func FuzzPrefillResponse(f *testing.F) {
	f.Add([]byte(`{"kv_transfer_params":{"do_remote_prefill":true},"usage":{"prompt_tokens_details":{"cached_tokens":1}}}`))
	f.Add([]byte(`{"kv_transfer_params":null}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParsePrefillResponse(b)
		if err != nil {
			return
		}
		if r.Params.Kind() != '{' || len(r.Params) > MaxKVTransferParamsBytes {
			t.Fatalf("accepted params %q", r.Params)
		}
		body, err := DecodeBody([]byte(`{"model":"m"}`), r.Params)
		if err != nil {
			t.Fatalf("DecodeBody of accepted params: %v", err)
		}
		got, ok, err := RequestKVTransfer(body)
		_ = got
		if err == nil && !ok {
			t.Fatalf("decode body lost its params: %s", body)
		}
	})
}
