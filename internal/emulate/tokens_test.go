package emulate

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

func TestTokenize(t *testing.T) {
	tests := []struct {
		name string
		text string
		want int
	}{
		{"empty is one token", "", 1},
		{"short", "hi", 1},
		{"one chunk", "abcd", 1},
		{"chunk and a bit", "abcde", 2},
		{"multi-byte", "héllo wörld", 4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := len(tokenize(tc.text)); got != tc.want {
				t.Errorf("len(tokenize(%q)) = %d, want %d", tc.text, got, tc.want)
			}
		})
	}
	// The ids agree with workloads.ChunkTokenizer (FNV-1a of 4-byte chunks, 31 bits).
	if got, want := tokenize("abcd")[0], int32(0x7fffffff&0xce3479bd); got != want {
		t.Errorf("tokenize(abcd) = %#x, want %#x", got, want)
	}
}

func TestAnswer(t *testing.T) {
	seed := promptSeed(tokenize("q"))
	whole := answer(seed, 0, 10)
	var pieces strings.Builder
	for i := range 10 {
		pieces.WriteString(word(seed, i))
	}
	if whole != pieces.String() || strings.HasPrefix(whole, " ") || len(strings.Fields(whole)) != 10 {
		t.Errorf("answer %q, pieces %q: want ten space-separated words", whole, pieces.String())
	}
	if other := answer(promptSeed(tokenize("r")), 0, 10); other == whole {
		t.Errorf("two prompts share the answer %q", whole)
	}
}

func FuzzTokenize(f *testing.F) {
	for _, s := range []string{"", "a", "abcd", "abcdefgh", "héllo", strings.Repeat("x", 67)} {
		f.Add(s, 4)
	}
	f.Fuzz(func(t *testing.T, text string, cut int) {
		ids := tokenize(text)
		if want := max(1, (len(text)+3)/4); len(ids) != want {
			t.Fatalf("%d ids for %d bytes, want %d", len(ids), len(text), want)
		}
		if !slices.Equal(ids, tokenize(text)) {
			t.Fatal("not deterministic")
		}
		for _, id := range ids {
			if id < 0 {
				t.Fatalf("negative id %d", id)
			}
		}
		// A prefix of whole chunks tokenizes to a prefix of the ids: shared text, shared cache.
		if cut = 4 * (max(cut, 0) % (len(text)/4 + 1)); cut > 0 {
			if !slices.Equal(tokenize(text[:cut]), ids[:cut/4]) {
				t.Fatalf("prefix %q does not give a prefix of the ids", text[:cut])
			}
		}
	})
}

// FuzzRequestBody sends arbitrary bodies to both completion endpoints: each must end in a
// JSON answer with an expected status, never a panic or a hang.
func FuzzRequestBody(f *testing.F) {
	for _, s := range []string{
		`{"prompt":"hi","max_tokens":2}`, `{"messages":[{"role":"user","content":"hi"}],"stream":true}`,
		`{"prompt":[1,2,3]}`, `{"model":"nope","prompt":"x"}`, `{`, `[]`, `{"prompt":null}`,
		`{"messages":[{"content":[{"type":"text","text":"a"}]}],"max_tokens":1,"stream":true,"stream_options":{"include_usage":true}}`,
	} {
		f.Add([]byte(s))
	}
	cfg := DefaultConfig()
	cfg.Speed, cfg.NumBlocks, cfg.MaxTokensCap = 1e6, 256, 64
	r, err := NewReplica(cfg)
	if err != nil {
		f.Fatal(err)
	}
	if err := r.Start(f.Context()); err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = r.Close() })
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, path := range []string{"/v1/completions", "/v1/chat/completions"} {
			rec := httptest.NewRecorder()
			r.ServeHTTP(rec, httptest.NewRequest("POST", path, strings.NewReader(string(body))))
			switch rec.Code {
			case http.StatusOK, http.StatusBadRequest, http.StatusNotFound:
			default:
				t.Fatalf("%s: status %d: %s", path, rec.Code, rec.Body)
			}
			if rec.Header().Get("Content-Type") == "application/json" && !json.Valid(rec.Body.Bytes()) {
				t.Fatalf("%s: invalid JSON %q", path, rec.Body)
			}
		}
	})
}
