package openai

import "testing"

// TestKnownKey checks the interning table: the keys of a vLLM chat response are all interned,
// so reading its usage allocates nothing; keys and near-misses it does not hold are not found.
func TestKnownKey(t *testing.T) {
	// A non-streamed vLLM /v1/chat/completions response with the fields recent versions send.
	resp := []byte(`{"id":"chatcmpl-1","object":"chat.completion","created":1763800000,"model":"llama-3.1-8b",` +
		`"choices":[{"index":0,"message":{"role":"assistant","content":"Hi","refusal":null,"annotations":null,` +
		`"audio":null,"function_call":null,"tool_calls":[],"reasoning_content":null},"logprobs":null,` +
		`"finish_reason":"stop","stop_reason":null}],"service_tier":null,"system_fingerprint":null,` +
		`"usage":{"prompt_tokens":12,"total_tokens":14,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":8}},` +
		`"prompt_logprobs":null,"kv_transfer_params":null}`)
	if u, ok := ParseUsage(resp); !ok || u.CachedTokens != 8 {
		t.Fatalf("ParseUsage = %+v, %v", u, ok)
	}
	if a := testing.AllocsPerRun(100, func() { _, _ = ParseUsage(resp) }); a != 0 {
		t.Errorf("ParseUsage of a vLLM response allocates %v times: a key is missing from knownKeys", a)
	}
	for _, k := range []string{"", "x", "Model", "usage ", "cached_token", "prompt_tokens_"} {
		if got, ok := knownKey([]byte(k)); ok {
			t.Errorf("knownKey(%q) = %q, true", k, got)
		}
	}
}
