package emulate

import (
	"encoding/json"
	"fmt"
	"net/http"

	"kvroute/internal/openai"
	"kvroute/internal/vllm"
	"kvroute/sim/engine"
)

// The response wire types follow vLLM's OpenAI server.
type (
	wireResponse struct {
		ID      string       `json:"id"`
		Object  string       `json:"object"`
		Created int64        `json:"created"`
		Model   string       `json:"model"`
		Choices []wireChoice `json:"choices"`
		Usage   *wireUsage   `json:"usage,omitempty"`
		// KVTransferParams is a prefill leg's answer: where its blocks wait.
		KVTransferParams *vllm.KVTransferParams `json:"kv_transfer_params,omitempty"`
	}
	wireChoice struct {
		Index        int          `json:"index"`
		Message      *wireMessage `json:"message,omitempty"`
		Delta        *wireMessage `json:"delta,omitempty"`
		Text         *string      `json:"text,omitempty"`
		Logprobs     *struct{}    `json:"logprobs"`
		FinishReason *string      `json:"finish_reason"`
	}
	wireMessage struct {
		Role    string  `json:"role,omitempty"`
		Content *string `json:"content,omitempty"`
	}
	wireUsage struct {
		PromptTokens        int         `json:"prompt_tokens"`
		TotalTokens         int         `json:"total_tokens"`
		CompletionTokens    int         `json:"completion_tokens"`
		PromptTokensDetails wireDetails `json:"prompt_tokens_details"`
	}
	wireDetails struct {
		CachedTokens int `json:"cached_tokens"`
	}
)

// finishLength is the finish reason of every completed request: it generated max_tokens.
const finishLength = "length"

func usageOf(res engine.Result) *wireUsage {
	return &wireUsage{PromptTokens: res.PromptTokens, CompletionTokens: res.OutputTokens,
		TotalTokens: res.PromptTokens + res.OutputTokens, PromptTokensDetails: wireDetails{CachedTokens: res.CachedTokens}}
}

// envelope returns a response or chunk without choices.
func (r *Replica) envelope(p pending, chunk bool) wireResponse {
	obj := "text_completion"
	switch {
	case p.chat && chunk:
		obj = "chat.completion.chunk"
	case p.chat:
		obj = "chat.completion"
	}
	return wireResponse{ID: p.id, Object: obj, Created: p.created, Model: r.served, Choices: []wireChoice{}}
}

// choice returns a choice carrying text: a message, a delta or a completion text.
func choice(p pending, text string, chunk bool, finish *string) wireChoice {
	c := wireChoice{FinishReason: finish}
	switch {
	case !p.chat:
		c.Text = &text
	case chunk:
		c.Delta = &wireMessage{Content: &text}
	default:
		c.Message = &wireMessage{Role: "assistant", Content: &text}
	}
	return c
}

// appendEvent appends v as one server-sent event.
func appendEvent(dst []byte, v wireResponse) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("emulate: marshal chunk: %v", err)) // our own wire types always marshal
	}
	dst = append(dst, "data: "...)
	dst = append(dst, b...)
	return append(dst, "\n\n"...)
}

// wait blocks until the request ends or the client leaves; it reports false for the latter.
func wait(req *http.Request, st *stream) (engine.Result, bool) {
	for {
		if _, res, done := st.state(); done {
			return res, true
		}
		select {
		case <-st.notify:
		case <-req.Context().Done():
			return engine.Result{}, false
		}
	}
}

// failEarly answers a request the engine did not complete: a rejection (the prompt cannot fit)
// is a 400, an abort (the replica failed or stopped) drops the connection mid-response.
func failEarly(w http.ResponseWriter, res engine.Result, started bool) {
	if res.Status == engine.Rejected && !started {
		openai.WriteError(w, &openai.Error{Status: http.StatusBadRequest, Type: openai.TypeInvalidRequest,
			Message: fmt.Sprintf("emulate: a prompt of %d tokens cannot fit in the KV cache", res.PromptTokens)})
		return
	}
	panic(http.ErrAbortHandler)
}

// writeWhole writes a non-streamed response once the request completes.
func (r *Replica) writeWhole(w http.ResponseWriter, req *http.Request, p pending) {
	res, ok := wait(req, p.st)
	if !ok {
		return
	}
	if res.Status != engine.Completed {
		failEarly(w, res, false)
		return
	}
	finish := finishLength
	v := r.envelope(p, false)
	v.Choices = append(v.Choices, choice(p, p.st.answer(0, res.OutputTokens), false, &finish))
	v.Usage = usageOf(res)
	if p.pd.role == engine.PDPrefill {
		v.KVTransferParams = r.prefillParams(p, p.st.heldBlocks)
	}
	p.st.setEngineTTFT(w.Header())
	writeJSON(w, http.StatusOK, v)
}

// writeStream writes a streamed response: nothing until the first token, then one event per
// token as the engine produces it (the last with the finish reason), the usage event when
// asked for, and "data: [DONE]".
func (r *Replica) writeStream(w http.ResponseWriter, req *http.Request, p pending) {
	rc := http.NewResponseController(w)
	written, started := 0, false
	var buf []byte
	for {
		select {
		case <-p.st.notify:
		case <-req.Context().Done():
			return
		}
		n, res, done := p.st.state()
		if done && res.Status != engine.Completed {
			failEarly(w, res, started)
			return
		}
		buf = buf[:0]
		if !started {
			h := w.Header()
			h.Set("Content-Type", "text/event-stream")
			h.Set("Cache-Control", "no-cache")
			p.st.setEngineTTFT(h)
			w.WriteHeader(http.StatusOK)
			if p.chat {
				empty, v := "", r.envelope(p, true)
				v.Choices = append(v.Choices, wireChoice{Delta: &wireMessage{Role: "assistant", Content: &empty}})
				buf = appendEvent(buf, v)
			}
			started = true
		}
		buf = r.appendTokens(buf, p, written, n, done)
		written = n
		if done {
			if p.includeUsage {
				v := r.envelope(p, true)
				v.Usage = usageOf(res)
				buf = appendEvent(buf, v)
			}
			buf = append(buf, "data: [DONE]\n\n"...)
		}
		if _, err := w.Write(buf); err != nil {
			return // the client left
		}
		if err := rc.Flush(); err != nil || done {
			return
		}
	}
}

// appendTokens appends one event for each of tokens [from, to); the last carries the finish
// reason when the request is done.
func (r *Replica) appendTokens(buf []byte, p pending, from, to int, done bool) []byte {
	finish := finishLength
	for i := from; i < to; i++ {
		var f *string
		if done && i == to-1 {
			f = &finish
		}
		v := r.envelope(p, true)
		v.Choices = append(v.Choices, choice(p, p.st.answer(i, i+1), true, f))
		buf = appendEvent(buf, v)
	}
	if done && from >= to { // the last token went out before the end was known
		v := r.envelope(p, true)
		c := choice(p, "", true, &finish)
		if p.chat {
			c.Delta.Content = nil
		}
		v.Choices = append(v.Choices, c)
		buf = appendEvent(buf, v)
	}
	return buf
}
