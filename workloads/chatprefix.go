package workloads

import (
	"fmt"
	"io"
)

// KindChatPrefixes is KubeAI's prefix-aware load-balancing benchmark (benchmarks/chat-py in
// substratusai/kubeai): every prefix of a ShareGPT-like conversation that ends with a user
// message is a prompt, the first Prompts of them are shuffled and sent Rounds times over by
// Concurrency closed-loop clients.
const KindChatPrefixes Kind = "chat-prefixes"

// Defaults of chat-prefixes: KubeAI's published 800-concurrency run (--max-conversations 800,
// which caps prompts, not conversations; --num-prompts 8000; --max-concurrency 800) on
// ShareGPT conversations with at least 16 messages. Only the request means are published
// (832 input and 76 generated tokens): the message means keep ShareGPT's 161:338 ratio of
// user message to answer and are scaled so that the mean prompt comes out near 832.
const (
	defaultPrefixPrompts      = 800
	defaultPrefixRounds       = 10
	defaultPrefixConcurrency  = 800
	defaultPrefixMinTurns     = 8 // 16 messages
	defaultPrefixUserTokens   = 50
	defaultPrefixAnswerTokens = 106
	defaultPrefixOutputTokens = 76
	defaultPrefixMaxPrompt    = 8192 // the script drops longer prompts
)

// Stream tags of chat-prefixes, apart from rng.go's (closedloop.go's tagClient follows them).
const (
	tagPrefixUser uint64 = 0x7072_6566_0001 + iota
	tagPrefixAnswer
	tagPrefixOutput
)

var _ source = (*chatPrefixes)(nil)

// chatPrefixes generates the prompt list of KubeAI's chat benchmark, which closed-loop
// clients send (newChatPrefixClients). Conversation c draws its turns (MinTurns−1 plus a
// geometric count with mean MeanTurns, so that the tail beyond MinTurns is ShareGPT's,
// capped at MaxTurns) and its message lengths from its own stream. Prompt k of c is user
// message 1, answer 1, …, user message k: the prompts of one conversation are nested
// prefixes, and the answers in them are the conversation's (the dataset's), not what the
// model generates. Prompts are listed conversation by conversation, cut at Prompts,
// shuffled once, stripped of prompts over MaxPromptTokens, and cycled: entry j of the
// requests is list[j mod len(list)]. Every request is a prompt of its own, not the client's
// history; its generated length is drawn per prompt.
type chatPrefixes struct {
	list   []*conversation // one turn each, its history the conversation so far
	cursor int             // entries of the cycled list taken so far
}

// newChatPrefixClients returns the benchmark's Concurrency closed-loop clients, each taking
// the next entry of the cycled list when its previous request finishes (the script's
// semaphore over one queue). A client has at most 8 times its share of the Rounds × Prompts
// requests; the stream's requests cap (the script's --num-prompts) ends the run.
func newChatPrefixClients(w WorkloadConfig, seed uint64, withText bool) *clients {
	src := &chatPrefixes{}
	list := prefixPrompts(w, seed, withText)
	newRand(seed, tagOrder).Shuffle(len(list), func(i, j int) { list[i], list[j] = list[j], list[i] })
	for _, p := range list {
		if p.tokens() <= w.MaxPromptTokens {
			src.list = append(src.list, p)
		}
	}
	total := w.Rounds * w.Prompts
	n := min(w.Concurrency, total)
	share := (total + n - 1) / n
	return newClients(src, n, min(total, 8*share+8), seed)
}

// prefixPrompts lists the first Prompts prompts, conversation by conversation.
func prefixPrompts(w WorkloadConfig, seed uint64, withText bool) []*conversation {
	user := lengthDist{kind: w.LengthDist, mean: float64(w.PromptTokens), sigma: w.PromptSigma, max: w.MaxMessageTokens}
	answer := lengthDist{kind: w.LengthDist, mean: float64(w.AnswerTokens), sigma: w.OutputSigma, max: w.MaxMessageTokens}
	output := lengthDist{kind: w.LengthDist, mean: float64(w.OutputTokens), sigma: w.OutputSigma, max: w.MaxMessageTokens}
	out := make([]*conversation, 0, w.Prompts)
	for c := 0; len(out) < w.Prompts; c++ {
		r := newRand(seed, tagConversation, uint64(c))
		turns := min(w.MinTurns-1+sampleGeometric(r, w.MeanTurns), w.MaxTurns)
		var history []segment
		for k := 0; k < turns && len(out) < w.Prompts; k++ {
			u := keyedSegment(deriveSeed(seed, tagPrefixUser, uint64(c), uint64(k)), user.sample(r), withText)
			out = append(out, &conversation{group: fmt.Sprintf("c%d", c), history: history[:len(history):len(history)],
				turns: []turn{{user: u, output: output.sample(newRand(seed, tagPrefixOutput, uint64(c), uint64(k)))}}})
			a := keyedSegment(deriveSeed(seed, tagPrefixAnswer, uint64(c), uint64(k)), answer.sample(r), withText)
			history = append(history, u, a)
		}
	}
	return out
}

// tokens returns the length of the prompt that sends c's only turn.
func (c *conversation) tokens() int {
	n := len(c.turns[0].user.tokens)
	for _, h := range c.history {
		n += len(h.tokens)
	}
	return n
}

// next returns the next entry of the cycled list.
func (s *chatPrefixes) next() (*conversation, error) {
	if len(s.list) == 0 {
		return nil, io.EOF
	}
	c := s.list[s.cursor%len(s.list)]
	s.cursor++
	return c, nil
}

func (s *chatPrefixes) skipped() int { return 0 }
func (s *chatPrefixes) Close() error { return nil }

func (w WorkloadConfig) resolveChatPrefixes() WorkloadConfig {
	setDefault(&w.Prompts, defaultPrefixPrompts)
	setDefault(&w.Rounds, defaultPrefixRounds)
	setDefault(&w.Concurrency, defaultPrefixConcurrency)
	setDefault(&w.MinTurns, defaultPrefixMinTurns)
	setDefault(&w.MeanTurns, defaultMeanTurns)
	setDefault(&w.MaxTurns, defaultMaxTurns)
	setDefault(&w.PromptTokens, defaultPrefixUserTokens)
	setDefault(&w.AnswerTokens, defaultPrefixAnswerTokens)
	setDefault(&w.OutputTokens, defaultPrefixOutputTokens)
	w = w.resolveMessageLengths()
	setDefault(&w.MaxPromptTokens, defaultPrefixMaxPrompt)
	return w
}

// chatPrefixesFields lists the YAML fields chat-prefixes uses.
func chatPrefixesFields(r WorkloadConfig) []string {
	f := []string{"prompts", "rounds", "concurrency", "min_turns", "mean_turns", "max_turns",
		"prompt_tokens", "answer_tokens", "output_tokens", "length_dist", "max_message_tokens",
		"max_prompt_tokens"}
	if r.LengthDist == DistLogNormal {
		f = append(f, "prompt_sigma", "output_sigma")
	}
	return f
}

func (p *problems) chatPrefixes(path string, r WorkloadConfig) {
	p.intRange(path+".prompts", r.Prompts, 1, maxPrompts)
	p.intRange(path+".rounds", r.Rounds, 1, maxTurnsLimit)
	if r.Prompts > 0 && r.Rounds > maxPrompts/r.Prompts {
		p.add(path+".rounds", "prompts × rounds must be at most %d", maxPrompts)
	}
	p.intRange(path+".concurrency", r.Concurrency, 1, maxConcurrency)
	p.intRange(path+".max_turns", r.MaxTurns, 1, maxTurnsLimit)
	p.intRange(path+".min_turns", r.MinTurns, 1, max(r.MaxTurns, 1))
	p.floatRange(path+".mean_turns", r.MeanTurns, 1, float64(max(r.MaxTurns, 1)))
	p.intRange(path+".max_message_tokens", r.MaxMessageTokens, 1, maxSegmentTokens)
	for _, f := range []struct {
		name string
		v    int
	}{{"prompt_tokens", r.PromptTokens}, {"answer_tokens", r.AnswerTokens}, {"output_tokens", r.OutputTokens}} {
		p.intRange(path+"."+f.name, f.v, 1, max(r.MaxMessageTokens, 1))
	}
	p.intRange(path+".max_prompt_tokens", r.MaxPromptTokens, 1, maxSegmentTokens)
	p.oneOf(path+".length_dist", r.LengthDist, DistLogNormal, DistExponential, DistConstant)
	if r.LengthDist == DistLogNormal {
		p.floatRange(path+".prompt_sigma", r.PromptSigma, 1e-6, 4)
		p.floatRange(path+".output_sigma", r.OutputSigma, 1e-6, 4)
	}
}
