package tokenize

import (
	"strings"
	"testing"
)

// BenchmarkAppendBytes measures an 8k-token prompt (about 32k characters).
func BenchmarkAppendBytes(b *testing.B) {
	text := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 32*1024/45)
	for _, name := range []string{NameCharacter, NameTiktoken} {
		b.Run(name+"/chars=32k", func(b *testing.B) {
			tok, err := New(name)
			if err != nil {
				b.Fatal(err)
			}
			buf := make([]byte, 0, 64*1024)
			b.SetBytes(int64(len(text)))
			b.ReportAllocs()
			for b.Loop() {
				if buf, err = tok.AppendBytes(buf[:0], text); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
