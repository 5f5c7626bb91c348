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

// Stream tags of chat-prefixes, apart from rng.go's.
const (
	tagPrefixUser uint64 = 0x7072_6566_0001 + iota
	tagPrefixAnswer
	tagPrefixOutput
	tagPrefixClient
)

var _ source = (*chatPrefixes)(nil)

// chatPrefixes generates KubeAI's chat benchmark. Conversation c draws its turns (MinTurns−1
// plus a geometric count with mean MeanTurns, so that the tail beyond MinTurns is ShareGPT's,
// capped at MaxTurns) and its message lengths from its own stream. Prompt k of c is user
// message 1, answer 1, …, user message k: the prompts of one conversation are nested
// prefixes, and the answers in them are the conversation's (the dataset's), not what the
// model generates. Prompts are listed conversation by conversation, cut at Prompts,
// shuffled once, stripped of prompts over MaxPromptTokens, and cycled: entry j of the
// Rounds × Prompts requests is list[j mod len(list)]. Concurrency closed-loop clients send
// them, each taking the next entry when its previous request finishes (the script's
// semaphore over one queue). Every request is a prompt of its own, not the client's
// history; its generated length is drawn per prompt.
type chatPrefixes struct {
	w       WorkloadConfig
	seed    uint64
	list    []prefixPrompt
	total   int // requests: Rounds × Prompts
	clients int
	started int
	cursor  int    // entries of the cycled list taken so far
	turns   []turn // every client's script: Rounds × Prompts / clients turns and then some
}

// prefixPrompt is one entry of the shuffled list.
type prefixPrompt struct {
	group   string    // "c" and the conversation's index
	history []segment // user 1, answer 1, …, answer k−1
	user    segment   // user message k
	output  int       // tokens to generate
}

func newChatPrefixes(w WorkloadConfig, seed uint64, withText bool) *chatPrefixes {
	s := &chatPrefixes{w: w, seed: seed, total: w.Rounds * w.Prompts}
	list := s.prompts(withText)
	newRand(seed, tagOrder).Shuffle(len(list), func(i, j int) { list[i], list[j] = list[j], list[i] })
	for _, p := range list {
		if p.tokens() <= w.MaxPromptTokens {
			s.list = append(s.list, p)
		}
	}
	s.clients = min(w.Concurrency, s.total)
	return s
}

// prompts lists the first Prompts prompts, conversation by conversation.
func (s *chatPrefixes) prompts(withText bool) []prefixPrompt {
	w := s.w
	user := lengthDist{kind: w.LengthDist, mean: float64(w.PromptTokens), sigma: w.PromptSigma, max: w.MaxMessageTokens}
	answer := lengthDist{kind: w.LengthDist, mean: float64(w.AnswerTokens), sigma: w.OutputSigma, max: w.MaxMessageTokens}
	output := lengthDist{kind: w.LengthDist, mean: float64(w.OutputTokens), sigma: w.OutputSigma, max: w.MaxMessageTokens}
	out := make([]prefixPrompt, 0, w.Prompts)
	for c := 0; len(out) < w.Prompts; c++ {
		r := newRand(s.seed, tagConversation, uint64(c))
		turns := min(w.MinTurns-1+sampleGeometric(r, w.MeanTurns), w.MaxTurns)
		var history []segment
		for k := 0; k < turns && len(out) < w.Prompts; k++ {
			u := keyedSegment(deriveSeed(s.seed, tagPrefixUser, uint64(c), uint64(k)), user.sample(r), withText)
			out = append(out, prefixPrompt{group: fmt.Sprintf("c%d", c), history: history[:len(history):len(history)], user: u,
				output: output.sample(newRand(s.seed, tagPrefixOutput, uint64(c), uint64(k)))})
			a := keyedSegment(deriveSeed(s.seed, tagPrefixAnswer, uint64(c), uint64(k)), answer.sample(r), withText)
			history = append(history, u, a)
		}
	}
	return out
}

func (p prefixPrompt) tokens() int {
	n := len(p.user.tokens)
	for _, h := range p.history {
		n += len(h.tokens)
	}
	return n
}

// next returns the script of the next client: turns that each take the next entry of the
// cycled list when they are built, that is when the client's previous request finished, as
// the script's clients share one queue. A client has at most 8 times its share of the
// requests; the stream's requests cap (prompts × rounds, the script's --num-prompts) ends
// the run.
func (s *chatPrefixes) next() (*conversation, error) {
	if s.started >= s.clients || len(s.list) == 0 {
		return nil, io.EOF
	}
	w := s.started
	s.started++
	if s.turns == nil {
		share := (s.total + s.clients - 1) / s.clients
		s.turns = make([]turn, min(s.total, 8*share+8)) // shared by every client: read-only
		for i := range s.turns {
			s.turns[i] = turn{fresh: s.take}
		}
	}
	return &conversation{seed: deriveSeed(s.seed, tagPrefixClient, uint64(w)), turns: s.turns}, nil
}

// take replaces sess's history with the next entry of the cycled list and returns the turn
// that sends it; the session's prefix group becomes the entry's conversation.
func (s *chatPrefixes) take(sess *session, withText bool) turn {
	p := s.list[s.cursor%len(s.list)]
	s.cursor++
	sess.conv.group = p.group
	sess.restart(p.history, withText)
	return turn{user: p.user, output: p.output}
}

func (s *chatPrefixes) skipped() int { return 0 }
func (s *chatPrefixes) Close() error { return nil }

// restart replaces the session's history with history, alternating user and assistant
// messages, for a turn that is a prompt of its own. The text already handed out stays
// valid: the old buffer is dropped, not overwritten.
func (s *session) restart(history []segment, withText bool) {
	s.tokens, s.text, s.textBuf, s.msgs = nil, "", nil, nil
	for i, h := range history {
		role := RoleUser
		if i%2 == 1 {
			role = RoleAssistant
		}
		s.appendSegment(role, h, withText)
	}
}

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
	p.intRange(path+".concurrency", r.Concurrency, 1, 1_000_000)
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
