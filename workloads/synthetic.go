package workloads

import (
	"fmt"

	"kvroute/internal/spares"
)

var _ source = (*syntheticChat)(nil)

// syntheticChat generates ShareGPT-like conversations without the dataset. Conversation n
// draws everything from its own random stream: the number of turns (geometric with mean
// MeanTurns, capped at MaxTurns), each user message's length (mean PromptTokens) and each
// answer's length (mean OutputTokens), and, with SystemPrompts > 0, one of the shared
// system prompts chosen uniformly.
type syntheticChat struct {
	w      WorkloadConfig
	seed   uint64
	text   bool
	n      uint64
	prompt lengthDist
	output lengthDist
	system *promptCache
	nsys   int
	rng    scratchRand               // a conversation's stream
	spare  spares.List[conversation] // ended sessions' conversations, for next
}

func (s *syntheticChat) recycle(c *conversation) { s.spare.Put(c) }

// newConversation returns an empty conversation with seed and room for turns turns, an ended
// one when there is one.
func (s *syntheticChat) newConversation(seed uint64, turns int) *conversation {
	c := s.spare.Take()
	if c == nil {
		return &conversation{seed: seed, turns: make([]turn, turns)}
	}
	ts := c.turns[:0]
	if cap(ts) < turns {
		ts = make([]turn, 0, turns)
	}
	*c = conversation{seed: seed, turns: ts[:turns]}
	clear(c.turns)
	return c
}

func newSyntheticChat(w WorkloadConfig, seed uint64, withText bool) *syntheticChat {
	return &syntheticChat{
		w: w, seed: seed, text: withText,
		prompt: lengthDist{kind: w.LengthDist, mean: float64(w.PromptTokens), sigma: w.PromptSigma, max: w.MaxMessageTokens},
		output: lengthDist{kind: w.LengthDist, mean: float64(w.OutputTokens), sigma: w.OutputSigma, max: w.MaxMessageTokens},
		system: newPromptCache(seed, tagSystem, w.SystemPrompts, w.SystemPromptTokens, withText),
		nsys:   w.SystemPrompts,
	}
}

func (s *syntheticChat) next() (*conversation, error) {
	n := s.n
	s.n++
	r := s.rng.at(s.seed, tagConversation, n)
	sys := -1
	if s.nsys > 0 {
		sys = r.IntN(s.nsys)
	}
	turns := max(min(sampleGeometric(r, s.w.MeanTurns), s.w.MaxTurns), 0)
	c := s.newConversation(deriveSeed(s.seed, tagAnswer, n), turns)
	if sys >= 0 {
		c.group = fmt.Sprintf("sys%d", sys)
		c.system = s.system.get(sys)
		c.hasSystem = true
	}
	for i := range c.turns {
		c.turns[i].output = s.output.sample(r)
	}
	// The user messages' lengths; their tokens are drawn when each turn is built.
	for i := range c.turns {
		c.turns[i].userKey = deriveSeed(s.seed, tagQuestion, n, uint64(i))
		c.turns[i].userLen = s.prompt.sample(r)
	}
	return c, nil
}

func (s *syntheticChat) skipped() int { return 0 }
func (s *syntheticChat) Close() error { return nil }
