package emulate

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"kvroute/internal/vllm"
	"kvroute/sim"
	"kvroute/sim/engine"
	"kvroute/workloads"
)

// stream is one request's path from the engine loop to its HTTP handler. The loop publishes
// the number of tokens generated so far and, once, the result; the handler waits on notify
// and reads them. The loop never blocks on a stream: notify holds at most one wake-up.
type stream struct {
	req    engine.Request
	seed   uint64        // seeds the answer's words
	text   string        // a chat answer's text (workloads.Words of req.Answer); empty for completions
	ends   []int         // ends[i]: the byte offset in text where token i ends
	notify chan struct{} // capacity 1

	// Owned by the loop.
	arrival sim.Time // when the engine received the request
	lastTok sim.Time // when its latest token was generated (the step's end)
	sent    int      // tokens published
	ended   bool     // the engine reported the request's end

	mu         sync.Mutex
	tokens     int
	done       bool
	result     engine.Result
	engineTTFT time.Duration // virtual time from the engine's receipt to the first token

	// P/D: a decode leg's params, set before it is submitted; a prefill leg's held blocks,
	// set by the loop before its result is published.
	pdParams   vllm.KVTransferParams
	heldBlocks []int32
}

// newStream prepares a request to generate outputTokens after prompt. A chat answer's
// tokens are synthetic-vocabulary words (chatAnswer) and are passed to the engine as its Answer, so a
// conversation's next turn hits the answer's blocks in the prefix cache; a completion's
// tokens are one word each and unique, as before.
func newStream(prompt []int32, outputTokens int, chat bool) *stream {
	s := &stream{seed: promptSeed(prompt), notify: make(chan struct{}, 1)}
	s.req = engine.Request{Prompt: prompt, OutputTokens: outputTokens, Tag: s}
	if chat {
		s.req.Answer = chatAnswer(s.seed, outputTokens)
		s.ends = make([]int, outputTokens)
		buf := make([]byte, 0, 6*outputTokens)
		for i := range s.req.Answer {
			buf = workloads.AppendWords(buf, s.req.Answer[i:i+1])
			s.ends[i] = len(buf)
		}
		s.text = string(buf)
	}
	return s
}

// answer returns the text of generated tokens [from, to).
func (s *stream) answer(from, to int) string {
	if s.req.Answer != nil {
		start := 0
		if from > 0 {
			start = s.ends[from-1]
		}
		if to == 0 {
			return ""
		}
		return s.text[start:s.ends[to-1]]
	}
	return answer(s.seed, from, to)
}

// publish announces n more tokens, and the result when res is not nil.
func (s *stream) publish(n int, res *engine.Result) {
	s.sent += n
	s.mu.Lock()
	s.tokens = s.sent
	if res != nil {
		s.done, s.result = true, *res
	}
	s.mu.Unlock()
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// first publishes the first token, produced ttft of virtual time after the engine received
// the request.
func (s *stream) first(ttft time.Duration) {
	s.mu.Lock()
	s.engineTTFT = ttft
	s.mu.Unlock()
	s.publish(1, nil)
}

// HeaderEngineTTFT is the response header that carries a request's time to first token on
// the engine's clock: from the engine receiving the request to its first token, in seconds
// of virtual time (the modelled GPU's time, what the simulator reports as TTFT; neither
// Speed nor the host's HTTP and scheduling delays are in it). Every successful completion,
// streamed or not, carries it; cmd/loadgen records it as Result.EngineTTFT.
const HeaderEngineTTFT = "X-Kvroute-Engine-Ttft"

// setEngineTTFT sets HeaderEngineTTFT on h once the first token is out.
func (s *stream) setEngineTTFT(h http.Header) {
	s.mu.Lock()
	d, ok := s.engineTTFT, s.tokens > 0
	s.mu.Unlock()
	if ok {
		h.Set(HeaderEngineTTFT, strconv.FormatFloat(d.Seconds(), 'f', 6, 64))
	}
}

// state returns the tokens generated so far, and the result once the request has ended.
func (s *stream) state() (tokens int, res engine.Result, done bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tokens, s.result, s.done
}
