package emulate

import (
	"bytes"
	"net/http"

	"kvroute/internal/openai"
)

// tokenizeResponse is vLLM's TokenizeResponse (vllm/entrypoints/openai/protocol.py):
// count, max_model_len, tokens.
type tokenizeResponse struct {
	Count       int     `json:"count"`
	MaxModelLen int     `json:"max_model_len"`
	Tokens      []int32 `json:"tokens"`
}

// tokenizeHandler serves POST /tokenize as vLLM does: a body with "messages" is a
// TokenizeChatRequest and gets the ids the chat completion would prefill (the template's
// generation prompt included); one with "prompt" is a TokenizeCompletionRequest. A router
// that asks here gets exactly the engine's prompt tokens.
func (r *Replica) tokenizeHandler(w http.ResponseWriter, req *http.Request) {
	body, e := r.readBody(w, req)
	if e != nil {
		openai.WriteError(w, e)
		return
	}
	chat := bytes.Contains(body, []byte(`"messages"`))
	o, e := r.parseBody(body, chat)
	if e != nil {
		openai.WriteError(w, e)
		return
	}
	ids := r.promptIDs(o, chat)
	writeJSON(w, http.StatusOK, tokenizeResponse{Count: len(ids), MaxModelLen: r.capacity, Tokens: ids})
}

// promptIDs returns the token ids the engine prefills for a parsed request.
func (r *Replica) promptIDs(o openai.Request, chat bool) []int32 {
	switch {
	case chat:
		return tokenizeChat(o.Messages)
	case len(o.PromptTokens) > 0:
		return o.PromptTokens
	}
	return tokenize(o.Prompt)
}
