package openai_test

import (
	"fmt"

	"kvroute/internal/openai"
)

func Example() {
	body := []byte(`{"model":"llama-3.1-8b","max_tokens":16,"user":"alice",
		"messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Hi!"}]}`)
	req, err := openai.ParseChat(body)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("model=%s user=%s max=%d prompt=%q\n", req.Model, req.User, req.MaxTokens, req.Prompt)

	var s openai.StreamScanner
	_, _ = s.Write([]byte("data: {\"choices\":[{\"delta\":{\"content\":\"Hey\"}}]}\n\n"))
	_, _ = s.Write([]byte("data: {\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":1}}\n\ndata: [DONE]\n\n"))
	u, reported := s.Usage()
	fmt.Println(u.PromptTokens, u.CompletionTokens, reported, s.Done())
	// Output:
	// model=llama-3.1-8b user=alice max=16 prompt="You are terse. Hi!"
	// 9 1 true true
}
