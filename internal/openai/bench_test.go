package openai

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// benchChat returns a chat body of about size bytes: a system message and a user message of
// words. With escapes, one word in six carries a JSON escape (a newline, a quote, a tab) or
// non-ASCII text, as documents and code pasted into prompts do.
func benchChat(size int, escapes bool) []byte {
	plain := []string{"lorem", "ipsum", "dolor", "sit", "amet,", "consectetur", "adipiscing", "elit."}
	special := []string{`line\nbreak`, `\"quoted\"`, `tab\tstop`, "naïve", "résumé", "emoji😀"}
	rng := rand.New(rand.NewPCG(1, 2))
	var sb strings.Builder
	for sb.Len() < size {
		if escapes && rng.IntN(6) == 0 {
			sb.WriteString(special[rng.IntN(len(special))])
		} else {
			sb.WriteString(plain[rng.IntN(len(plain))])
		}
		sb.WriteByte(' ')
	}
	return []byte(`{"model":"llama-3.1-8b","max_tokens":4,"messages":[{"role":"system","content":"You are terse."},` +
		`{"role":"user","content":"` + sb.String() + `"}],"temperature":0.7,"stream":true,"stream_options":{"include_usage":true}}`)
}

// BenchmarkParseChat parses chat bodies of 2 KB, 32 KB and 220 KB (about 55k tokens), plain
// and with escapes, with ParseChat and, for comparison, with encoding/json (the test oracle,
// which extracts the same fields).
func BenchmarkParseChat(b *testing.B) {
	for _, size := range []int{2 << 10, 32 << 10, 220 << 10} {
		for _, escapes := range []bool{false, true} {
			body := benchChat(size, escapes)
			text := map[bool]string{false: "plain", true: "escapes"}[escapes]
			for _, p := range []struct {
				name  string
				parse func([]byte) (Request, error)
			}{{"ParseChat", ParseChat}, {"encoding-json", func(b []byte) (Request, error) { return oracleParse(b, true) }}} {
				b.Run(fmt.Sprintf("size=%dK/%s/%s", size>>10, text, p.name), func(b *testing.B) {
					b.SetBytes(int64(len(body)))
					b.ReportAllocs()
					for b.Loop() {
						if _, err := p.parse(body); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
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
