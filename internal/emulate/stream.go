package emulate

import (
	"sync"

	"kvroute/sim"
	"kvroute/sim/engine"
)

// stream is one request's path from the engine loop to its HTTP handler. The loop publishes
// the number of tokens generated so far and, once, the result; the handler waits on notify
// and reads them. The loop never blocks on a stream: notify holds at most one wake-up.
type stream struct {
	req    engine.Request
	seed   uint64        // seeds the answer's words
	notify chan struct{} // capacity 1

	// Owned by the loop.
	arrival sim.Time // when the engine received the request
	sent    int      // tokens published
	ended   bool     // the engine reported the request's end

	mu     sync.Mutex
	tokens int
	done   bool
	result engine.Result
}

func newStream(prompt []int32, outputTokens int) *stream {
	s := &stream{seed: promptSeed(prompt), notify: make(chan struct{}, 1)}
	s.req = engine.Request{Prompt: prompt, OutputTokens: outputTokens, Tag: s}
	return s
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

// state returns the tokens generated so far, and the result once the request has ended.
func (s *stream) state() (tokens int, res engine.Result, done bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tokens, s.result, s.done
}
