package openai

import (
	"errors"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/google/go-cmp/cmp"
)

func TestParseChat(t *testing.T) {
	cases := []struct {
		name string
		body string
		want Request
	}{
		{
			name: "string contents",
			body: `{"model":"m","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi there"}],"max_tokens":8,"user":"alice"}`,
			want: Request{Model: "m", Prompt: "be brief hi there", User: "alice", MaxTokens: 8,
				Messages: []Message{{"system", "be brief"}, {"user", "hi there"}}},
		},
		{
			name: "parts, null content, stream with usage",
			body: `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"x"}},{"type":"text","text":"b"}]},{"role":"assistant","content":null}]}`,
			want: Request{Model: "m", Prompt: "a b ", Stream: true, IncludeUsage: true,
				Messages: []Message{{"user", "a b"}, {"assistant", ""}}},
		},
		{
			name: "max_completion_tokens",
			body: ` {"messages":[{"role":"user","content":"x"}],"max_completion_tokens":5}`,
			want: Request{Prompt: "x", MaxTokens: 5, Messages: []Message{{"user", "x"}}},
		},
		{
			name: "max_tokens wins",
			body: `{"messages":[{"role":"user","content":"x"}],"max_tokens":3,"max_completion_tokens":5}`,
			want: Request{Prompt: "x", MaxTokens: 3, Messages: []Message{{"user", "x"}}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseChat([]byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseCompletion(t *testing.T) {
	cases := []struct {
		name string
		body string
		want Request
	}{
		{"string", `{"model":"m","prompt":"once upon","max_tokens":4}`, Request{Model: "m", Prompt: "once upon", MaxTokens: 4}},
		{"strings", `{"prompt":["a","b"]}`, Request{Prompt: "a b"}},
		{"ids", `{"prompt":[1,2,3]}`, Request{PromptTokens: []int32{1, 2, 3}}},
		{"id lists", `{"prompt":[[1,2],[3]],"stream":true}`, Request{PromptTokens: []int32{1, 2, 3}, Stream: true}},
		{"empty string", `{"prompt":""}`, Request{}},
		{"kv_transfer_params as sent", `{"prompt":"x","kv_transfer_params":{"do_remote_decode":true, "b":[1]}}`,
			Request{Prompt: "x", KVTransferParams: jsontext.Value(`{"do_remote_decode":true, "b":[1]}`)}},
		{"kv_transfer_params null", `{"prompt":"x","kv_transfer_params":null}`, Request{Prompt: "x", KVTransferParams: jsontext.Value("null")}},
		{"kv_transfer_params repeated: the last wins", `{"prompt":"x","kv_transfer_params":{"a":1},"kv_transfer_params":{"b":2}}`,
			Request{Prompt: "x", KVTransferParams: jsontext.Value(`{"b":2}`)}},
		{"kv_transfer_params with invalid UTF-8, kept", "{\"prompt\":\"x\",\"kv_transfer_params\":{\"h\":\"\xff\"}}",
			Request{Prompt: "x", KVTransferParams: jsontext.Value("{\"h\":\"\xff\"}")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseCompletion([]byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	chat, compl := ParseChat, ParseCompletion
	cases := []struct {
		name      string
		parse     func([]byte) (Request, error)
		body      string
		wantParam string
	}{
		{"not json", chat, `hello`, ""},
		{"truncated", chat, `{"messages":[{"role":"user","content":"x"}`, ""},
		{"array body", chat, `[]`, ""},
		{"no messages", chat, `{"model":"m"}`, "messages"},
		{"empty messages", chat, `{"messages":[]}`, "messages"},
		{"model not string", chat, `{"model":3,"messages":[{"role":"user","content":"x"}]}`, "model"},
		{"negative max_tokens", chat, `{"messages":[{"role":"user","content":"x"}],"max_tokens":-1}`, "max_tokens"},
		{"no prompt", compl, `{"model":"m"}`, "prompt"},
		{"null prompt", compl, `{"prompt":null}`, "prompt"},
		{"prompt object", compl, `{"prompt":{}}`, "prompt"},
		{"prompt bool in list", compl, `{"prompt":[true]}`, "prompt"},
		{"content parts not objects", chat, `{"messages":[{"content":[1]}]}`, "messages.content"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.parse([]byte(tc.body))
			var re *RequestError
			if !errors.As(err, &re) {
				t.Fatalf("err = %v, want a *RequestError", err)
			}
			if re.Param != tc.wantParam {
				t.Errorf("param = %q, want %q (err %v)", re.Param, tc.wantParam, err)
			}
		})
	}
}
