package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// FuzzParseChat checks that any body either parses or fails with a *RequestError, and that a
// parsed body's Prompt is its message contents joined with single spaces.
func FuzzParseChat(f *testing.F) {
	f.Add([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":3}`))
	f.Add([]byte(`{"messages":[{"role":"user","content":[{"type":"text","text":"a"}]}],"stream":true}`))
	f.Add([]byte(`{"messages":[{"content":null}],"user":"u"}`))
	f.Add([]byte(`{"messages":"x"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseChat(b)
		if err != nil {
			var re *RequestError
			if !errors.As(err, &re) {
				t.Fatalf("error %v is not a *RequestError", err)
			}
			return
		}
		parts := make([]string, len(r.Messages))
		for i, m := range r.Messages {
			parts[i] = m.Content
		}
		if want := strings.Join(parts, " "); r.Prompt != want {
			t.Fatalf("prompt %q, want %q", r.Prompt, want)
		}
		if r.MaxTokens < 0 {
			t.Fatalf("negative max tokens %d", r.MaxTokens)
		}
	})
}

// FuzzDecoderOracle checks the fast decoder against encoding/json on arbitrary bodies: both
// accept or both reject, and accepted bodies give the same request.
func FuzzDecoderOracle(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","messages":[{"role":"user","content":"hi \u00e9\n"}],"max_tokens":3,"stream":true,"stream_options":{"include_usage":true}}`,
		`{"prompt":["a",[1,2],3,null],"user":"u","max_completion_tokens":null}`,
		`{"messages":[{"content":[{"type":"text","text":"a"},null,{"text":"b"}]},null],"x":{"y":[1.5e3,true,false,null,"z"]}}`,
		`{"prompt":"\ud800","max_tokens":-0}`,
		`{"prompt":"x","max_tokens":1e2}`,
		"{\"prompt\":\"\xff\"}",
		`{"prompt":"x","kv_transfer_params":{"do_remote_decode":true,"remote_block_ids":[1, 2]}}`,
		`{"prompt":"x","kv_transfer_params":null}`,
	} {
		f.Add([]byte(s), true)
		f.Add([]byte(s), false)
	}
	f.Fuzz(func(t *testing.T, b []byte, chat bool) {
		parse := ParseCompletion
		if chat {
			parse = ParseChat
		}
		got, gotErr := parse(b)
		want, wantErr := oracleParse(b, chat)
		if (gotErr == nil) != (wantErr == nil) {
			if quirky(b) {
				return
			}
			t.Fatalf("body %q: fast err %v, encoding/json err %v", b, gotErr, wantErr)
		}
		if gotErr != nil {
			return
		}
		if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" && !quirky(b) {
			t.Fatalf("body %q (-encoding/json +fast):\n%s", b, diff)
		}
	})
}

// FuzzCompletionRoundTrip encodes a completion request from fuzzed fields and checks that
// parsing it gives the fields back; arbitrary bytes must not panic the parser either.
func FuzzCompletionRoundTrip(f *testing.F) {
	f.Add("llama", "once upon a time", "bob", 16, true)
	f.Add("", "", "", 0, false)
	f.Add("m\u2028", "\x00\"\\", "é", 1<<20, true)
	f.Fuzz(func(t *testing.T, model, prompt, user string, maxTokens int, stream bool) {
		_, _ = ParseCompletion([]byte(prompt)) // arbitrary bytes: no panic
		if maxTokens < 0 {
			maxTokens = -maxTokens
		}
		if maxTokens < 0 { // math.MinInt
			maxTokens = 0
		}
		b, err := json.Marshal(map[string]any{"model": model, "prompt": prompt, "user": user, "max_tokens": maxTokens, "stream": stream})
		if err != nil {
			t.Fatal(err)
		}
		r, err := ParseCompletion(b)
		if err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		// encoding/json replaces invalid UTF-8 with U+FFFD; compare against what was encoded.
		var want struct{ Model, Prompt, User string }
		_ = json.Unmarshal(b, &want)
		if r.Model != want.Model || r.Prompt != want.Prompt || r.User != want.User || r.MaxTokens != maxTokens || r.Stream != stream {
			t.Fatalf("round trip of %s gave %+v", b, r)
		}
	})
}

// FuzzParseUsage checks ParseUsage against encoding/json on arbitrary response bodies.
func FuzzParseUsage(f *testing.F) {
	f.Add([]byte(`{"id":"x","choices":[{"text":"a"}],"usage":{"prompt_tokens":10,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":8}}}`))
	f.Add([]byte(`{"usage":null}`))
	f.Add([]byte(`{"usage":{"prompt_tokens_details":null,"completion_tokens":2}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, ok := ParseUsage(b)
		var v struct {
			Usage *struct {
				PromptTokens        int `json:"prompt_tokens"`
				CompletionTokens    int `json:"completion_tokens"`
				PromptTokensDetails *struct {
					CachedTokens int `json:"cached_tokens"`
				} `json:"prompt_tokens_details"`
			} `json:"usage"`
		}
		t0 := bytes.TrimLeft(b, " \t\r\n")
		wantOK := len(t0) > 0 && t0[0] == '{' && json.Unmarshal(b, &v) == nil && v.Usage != nil
		if ok != wantOK {
			if quirky(b) {
				return
			}
			t.Fatalf("body %q: ok %v, encoding/json %v", b, ok, wantOK)
		}
		if !ok {
			return
		}
		want := Usage{PromptTokens: v.Usage.PromptTokens, CompletionTokens: v.Usage.CompletionTokens}
		if v.Usage.PromptTokensDetails != nil {
			want.CachedTokens = v.Usage.PromptTokensDetails.CachedTokens
		}
		if got != want && !quirky(b) {
			t.Fatalf("body %q: %+v, encoding/json %+v", b, got, want)
		}
	})
}
