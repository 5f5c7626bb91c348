package emulate

import (
	"bytes"
	"errors"
	"fmt"
	"io"
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
	body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, r.cfg.MaxBodyBytes))
	if err != nil {
		status := http.StatusBadRequest
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			status = http.StatusRequestEntityTooLarge
		}
		openai.WriteError(w, &openai.Error{Status: status, Type: openai.TypeInvalidRequest, Message: "emulate: reading the request body: " + err.Error()})
		return
	}
	chat := bytes.Contains(body, []byte(`"messages"`))
	parse := openai.ParseCompletion
	if chat {
		parse = openai.ParseChat
	}
	o, err := parse(body)
	if err != nil {
		e := &openai.Error{Status: http.StatusBadRequest, Type: openai.TypeInvalidRequest, Message: err.Error()}
		if re, ok := errors.AsType[*openai.RequestError](err); ok {
			e.Param = re.Param
		}
		openai.WriteError(w, e)
		return
	}
	if o.Model != "" && !r.accepted[normalizeModel(o.Model)] {
		openai.WriteError(w, &openai.Error{Status: http.StatusNotFound, Type: openai.TypeInvalidRequest, Param: "model",
			Code: "model_not_found", Message: fmt.Sprintf("The model `%s` does not exist.", o.Model)})
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
