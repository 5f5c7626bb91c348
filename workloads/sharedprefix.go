package workloads

import (
	"fmt"
	"io"
	"math/rand/v2"
)

var _ source = (*sharedPrefix)(nil)

// sharedPrefix generates SGLang's generated-shared-prefix workload (and inference-perf's
// shared_prefix): Groups system prompts, PromptsPerGroup questions per group. Without
// Repeat every (group, question) pair is one session, in a seeded shuffled order, as SGLang
// shuffles its request list; with Repeat a pair is drawn uniformly for every session,
// forever, so questions recur as they do in inference-perf; with Cycle as well, the shuffled
// list is sent in order, over and over, from its head at every arrival stage. Content is a pure function of
// the seed and (group, question, turn), so repeats hit the prefix cache exactly.
type sharedPrefix struct {
	w      WorkloadConfig
	seed   uint64
	text   bool
	rng    *rand.Rand
	order  []int32 // shuffled pair indices, without Repeat
	pos    int
	system *promptCache // per group
}

func newSharedPrefix(w WorkloadConfig, seed uint64, withText bool) *sharedPrefix {
	s := &sharedPrefix{w: w, seed: seed, text: withText, rng: newRand(seed, tagOrder),
		system: newPromptCache(seed, tagSystem, w.Groups, w.SystemPromptTokens, withText)}
	if !*w.Repeat || w.Cycle {
		n := w.Groups * w.PromptsPerGroup
		s.order = make([]int32, n)
		for i := range s.order {
			s.order[i] = int32(i)
		}
		s.rng.Shuffle(n, func(i, j int) { s.order[i], s.order[j] = s.order[j], s.order[i] })
	}
	return s
}

func (s *sharedPrefix) next() (*conversation, error) {
	var k int
	switch {
	case s.w.Cycle:
		k = int(s.order[s.pos%len(s.order)])
		s.pos++
	case *s.w.Repeat:
		k = s.rng.IntN(s.w.Groups * s.w.PromptsPerGroup)
	default:
		if s.pos == len(s.order) {
			return nil, io.EOF
		}
		k = int(s.order[s.pos])
		s.pos++
	}
	g, q := k/s.w.PromptsPerGroup, k%s.w.PromptsPerGroup
	c := &conversation{
		group:     fmt.Sprintf("g%d", g),
		system:    s.system.get(g),
		hasSystem: true,
		seed:      deriveSeed(s.seed, tagConversation, uint64(g), uint64(q)),
	}
	for t := range s.w.Turns {
		key := deriveSeed(s.seed, tagQuestion, uint64(g), uint64(q), uint64(t))
		c.turns = append(c.turns, turn{user: keyedSegment(key, s.w.QuestionTokens, s.text), output: s.w.OutputTokens})
	}
	return c, nil
}

// restart goes back to the head of the list when prompts cycle (a new arrival stage).
func (s *sharedPrefix) restart() {
	if s.w.Cycle {
		s.pos = 0
	}
}

func (s *sharedPrefix) skipped() int { return 0 }
func (s *sharedPrefix) Close() error { return nil }
