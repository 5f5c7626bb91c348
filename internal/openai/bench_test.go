package openai

import (
	"strings"
	"testing"
)

func BenchmarkParseChat(b *testing.B) {
	body := []byte(`{"model":"llama-3.1-8b","max_tokens":4,"messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"` +
		strings.Repeat("lorem ipsum dolor sit amet ", 70) + `"}],"temperature":0.7,"stream":false}`)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseChat(body); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseUsage(b *testing.B) {
	body := []byte(`{"id":"cmpl-1","object":"chat.completion","created":1,"model":"llama-3.1-8b","choices":[{"index":0,"message":{"role":"assistant","content":"Hello there, how can I help?"},"finish_reason":"stop"}],"usage":{"prompt_tokens":512,"completion_tokens":8,"total_tokens":520,"prompt_tokens_details":{"cached_tokens":448}}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := ParseUsage(body); !ok {
			b.Fatal("no usage")
		}
	}
}
