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
