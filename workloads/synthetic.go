package workloads

import "fmt"

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
	rng    scratchRand // a conversation's stream
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
	c := &conversation{seed: deriveSeed(s.seed, tagAnswer, n)}
	if s.nsys > 0 {
		k := r.IntN(s.nsys)
		c.group = fmt.Sprintf("sys%d", k)
		c.system = s.system.get(k)
		c.hasSystem = true
	}
	turns := min(sampleGeometric(r, s.w.MeanTurns), s.w.MaxTurns)
	if turns > 0 {
		c.turns = make([]turn, turns)
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
