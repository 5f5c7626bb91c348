package emulate

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"kvroute/internal/openai"
	"kvroute/workloads"
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
		// The workloads' synthetic vocabulary: one id a word, as the workload drew them,
		// not the 5 chunks its 17 bytes would make.
		{"synthetic words", workloads.Words([]int32{3, 250, 9000, 42}), 4},
		{"synthetic words without the trailing space", "ba be ", 2},
		{"not quite synthetic", "ba be", 2},
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
		if w, err := workloads.ParseWords(text); err == nil && len(w) > 0 {
			if !slices.Equal(ids, w) {
				t.Fatalf("synthetic text %q gives %v, want its words %v", text, ids, w)
			}
			return
		}
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

func TestChatAnswer(t *testing.T) {
	seed := promptSeed(tokenize("q"))
	for _, n := range []int{1, 2, 7, 100} {
		ids := chatAnswer(seed, n)
		if got := tokenize(workloads.Words(ids)); !slices.Equal(got, ids) {
			t.Errorf("chatAnswer(%d): its text tokenizes to %v, want %v", n, got, ids)
		}
		st := newStream([]int32{5}, n, true)
		var pieces strings.Builder
		for i := range n {
			pieces.WriteString(st.answer(i, i+1))
		}
		if pieces.String() != st.text || st.answer(0, n) != st.text {
			t.Errorf("answer pieces %q do not make up the text %q", pieces.String(), st.text)
		}
	}
	msgs := []openai.Message{{Role: "system", Content: "abcde"}, {Role: "user", Content: ""}, {Role: "user", Content: "xy"}}
	want := slices.Concat(tokenize("abcde"), tokenize("xy"))
	if got := tokenizeChat(msgs); !slices.Equal(got, want) {
		t.Errorf("tokenizeChat = %v, want %v", got, want)
	}
}

// TestConversationHitsAnswer sends a conversation's second turn, which re-sends the first
// turn's answer as an assistant message, to the replica that answered the first: as on vLLM,
// the prefix-cache hit covers the first prompt and the full blocks of the answer, all but a
// last token whose KV was never computed.
func TestConversationHitsAnswer(t *testing.T) {
	for _, streamed := range []bool{false, true} {
		t.Run(fmt.Sprint("streamed=", streamed), func(t *testing.T) {
			r, base := startReplica(t, nil)
			c := client()
			const maxTokens = 40
			turn1 := []openai.Message{
				{Role: "system", Content: strings.Repeat("You route requests to replicas. ", 10)},
				{Role: "user", Content: "What is a prefix cache?"},
			}
			send := func(msgs []openai.Message) completion {
				var wire []map[string]string
				for _, m := range msgs {
					wire = append(wire, map[string]string{"role": m.Role, "content": m.Content})
				}
				body, err := json.Marshal(map[string]any{"max_tokens": maxTokens, "messages": wire, "stream": streamed,
					"stream_options": map[string]any{"include_usage": true}})
				if err != nil {
					t.Fatal(err)
				}
				got := readCompletion(t, post(t, c, base+"/v1/chat/completions", string(body)))
				if got.Status != http.StatusOK || got.Usage == nil {
					t.Fatalf("status %d, usage %+v: %s", got.Status, got.Usage, got.ErrorMessage)
				}
				return got
			}
			first := send(turn1)
			prompt1 := tokenizeChat(turn1)
			if first.Usage.PromptTokens != len(prompt1) || first.Usage.PromptTokensDetails.CachedTokens != 0 {
				t.Fatalf("turn 1 usage %+v, want %d prompt tokens, none cached", first.Usage, len(prompt1))
			}
			turn2 := append(slices.Clone(turn1), openai.Message{Role: "assistant", Content: first.Text},
				openai.Message{Role: "user", Content: "And how does routing use it?"})
			second := send(turn2)

			// The tokens the engine holds after turn 1, and how far turn 2's prompt repeats them.
			held := slices.Concat(prompt1, tokenize(first.Text))
			if want := newStream(prompt1, maxTokens, true).req.Answer; !slices.Equal(held[len(prompt1):], want) {
				t.Fatalf("the answer received tokenizes to %v, the engine generated %v", held[len(prompt1):], want)
			}
			prompt2 := tokenizeChat(turn2)
			l := 0
			for l < min(len(prompt2), len(held)) && prompt2[l] == held[l] {
				l++
			}
			if l != len(held) {
				t.Fatalf("turn 2 repeats %d of turn 1's %d tokens", l, len(held))
			}
			bs := r.dep.BlockSize
			want := (l - 1) / bs * bs
			if got := second.Usage.PromptTokensDetails.CachedTokens; got != want || got <= len(prompt1) {
				t.Errorf("turn 2 cached %d tokens, want %d (turn 1's prompt is %d tokens, its answer %d)",
					got, want, len(prompt1), maxTokens)
			}
			if second.Usage.PromptTokens != len(prompt2) {
				t.Errorf("turn 2 prompt_tokens %d, want %d", second.Usage.PromptTokens, len(prompt2))
			}
		})
	}
}
