package workloads

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"
)

var _ source = (*shareGPTSource)(nil)

// shareGPTSource replays ShareGPT conversations.
//
// Single mode follows `vllm bench serve --dataset-name sharegpt`: conversations with fewer
// than two messages are dropped, the rest shuffled with the seed; the prompt is the first
// human message and the output length is the token count of the first gpt message after it
// (or OutputTokens). (vllm takes messages 0 and 1 whatever their roles; the two agree unless
// a conversation starts with a system or gpt message.) A pair is skipped when prompt < MinTokens, output < MinTokens (unless OutputTokens is set),
// prompt > MaxPromptTokens or prompt + output > MaxTotalTokens.
//
// Multi-turn mode replays whole conversations: a leading system message becomes the system
// prompt, consecutive messages of one role are joined with a newline, and every user message
// followed by an assistant answer is a turn whose output length is the answer's token count
// and whose answer goes into the history. The conversation is cut before the first turn
// whose history prompt exceeds MaxPromptTokens, whose prompt plus answer exceeds
// MaxTotalTokens, or whose answer is shorter than MinTokens, and after MaxTurns turns; it is
// skipped when no turn remains or its first prompt is shorter than MinTokens.
//
// Shuffling indexes the file in one streaming pass (16 bytes per conversation kept) and then
// reads conversations at their offsets; without shuffling the file is read once, in order.
type shareGPTSource struct {
	w     WorkloadConfig
	tok   Tokenizer
	seed  uint64
	file  io.ReadCloser
	rd    *ShareGPTReader // in-order mode
	ra    io.ReaderAt     // shuffled mode
	size  int64
	index []shareGPTEntry
	pos   int
	skip  int
}

type shareGPTEntry struct {
	offset int64
	record int
}

func newShareGPTSource(w WorkloadConfig, seed uint64, o *options) (*shareGPTSource, error) {
	f, err := o.open(w.Path)
	if err != nil {
		return nil, fmt.Errorf("workloads: open sharegpt dataset: %w", err)
	}
	s := &shareGPTSource{w: w, tok: o.tok, seed: seed, file: f}
	if !*w.Shuffle {
		s.rd = NewShareGPTReader(bufio.NewReaderSize(f, 1<<20), w.Path)
		return s, nil
	}
	if err := s.buildIndex(); err != nil {
		return nil, errors.Join(err, f.Close())
	}
	return s, nil
}

// buildIndex records where every conversation with at least two messages starts, and
// shuffles that list.
func (s *shareGPTSource) buildIndex() error {
	ra, okAt := s.file.(io.ReaderAt)
	sk, okSeek := s.file.(io.Seeker)
	if !okAt || !okSeek {
		return fmt.Errorf("workloads: sharegpt %s: %w; set shuffle: false to stream it in order", s.w.Path, ErrNotSeekable)
	}
	size, err := sk.Seek(0, io.SeekEnd)
	if err != nil {
		return fmt.Errorf("workloads: sharegpt %s: %w", s.w.Path, err)
	}
	s.ra, s.size = ra, size
	rd := NewShareGPTReader(bufio.NewReaderSize(io.NewSectionReader(ra, 0, size), 1<<20), s.w.Path)
	for {
		c, err := rd.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if len(c.Conversations) < 2 {
			s.skip++
			continue
		}
		s.index = append(s.index, shareGPTEntry{offset: rd.Offset(), record: rd.record})
	}
	r := newRand(s.seed, tagOrder)
	r.Shuffle(len(s.index), func(i, j int) { s.index[i], s.index[j] = s.index[j], s.index[i] })
	return nil
}

// read returns the next raw conversation and its record number.
func (s *shareGPTSource) read() (ShareGPTConversation, int, error) {
	if s.rd != nil {
		c, err := s.rd.Next()
		return c, s.rd.record, err
	}
	if s.pos == len(s.index) {
		return ShareGPTConversation{}, 0, io.EOF
	}
	e := s.index[s.pos]
	s.pos++
	c, err := readShareGPTAt(s.ra, s.size, e.offset, s.w.Path, e.record)
	return c, e.record, err
}

func (s *shareGPTSource) next() (*conversation, error) {
	for {
		c, record, err := s.read()
		if err != nil {
			return nil, err
		}
		var conv *conversation
		if s.w.Mode == ModeMultiTurn {
			conv = s.multiTurn(c)
		} else {
			conv = s.single(c)
		}
		if conv != nil {
			conv.seed = deriveSeed(s.seed, tagConversation, uint64(record))
			return conv, nil
		}
		s.skip++
	}
}

// single converts a conversation the way vllm bench serve does, or returns nil.
func (s *shareGPTSource) single(c ShareGPTConversation) *conversation {
	prompt, answer, ok := firstExchange(c.Conversations)
	if !ok {
		return nil
	}
	tokens := s.tok.Encode(prompt)
	out := s.w.OutputTokens
	if out == 0 {
		out = len(s.tok.Encode(answer))
	}
	w := s.w
	if len(tokens) < w.MinTokens || (w.OutputTokens == 0 && out < w.MinTokens) ||
		len(tokens) > w.MaxPromptTokens || len(tokens)+out > w.MaxTotalTokens {
		return nil
	}
	return &conversation{turns: []turn{{user: segment{tokens: tokens, text: prompt}, output: out}}}
}

// firstExchange returns the first human message and the first gpt message after it.
func firstExchange(msgs []ShareGPTMessage) (prompt, answer string, ok bool) {
	i := 0
	for i < len(msgs) && !isRole(msgs[i].From, RoleUser) {
		i++
	}
	for j := i + 1; j < len(msgs); j++ {
		if isRole(msgs[j].From, RoleAssistant) {
			return msgs[i].Value, msgs[j].Value, true
		}
	}
	return "", "", false
}

func isRole(from string, want Role) bool {
	r, ok := shareGPTRole(from)
	return ok && r == want
}

// multiTurn converts a whole conversation, or returns nil.
func (s *shareGPTSource) multiTurn(c ShareGPTConversation) *conversation {
	system, pairs, ok := chatPairs(c.Conversations)
	if !ok {
		return nil
	}
	conv := &conversation{}
	history := 0
	if system != "" {
		conv.system = segment{tokens: s.tok.Encode(system), text: system}
		conv.hasSystem = true
		history = len(conv.system.tokens)
	}
	w := s.w
	for i, p := range pairs {
		if w.MaxTurns > 0 && i == w.MaxTurns {
			break
		}
		user := segment{tokens: s.tok.Encode(p[0]), text: p[0]}
		answer := segment{tokens: s.tok.Encode(p[1]), text: p[1]}
		prompt := history + len(user.tokens)
		if len(user.tokens) == 0 || len(answer.tokens) < w.MinTokens || prompt > w.MaxPromptTokens ||
			prompt+len(answer.tokens) > w.MaxTotalTokens || (i == 0 && prompt < w.MinTokens) {
			break
		}
		conv.turns = append(conv.turns, turn{user: user, output: len(answer.tokens), answer: answer, hasAnswer: true})
		history = prompt + len(answer.tokens)
	}
	if len(conv.turns) == 0 {
		return nil
	}
	return conv
}

// chatPairs normalises ShareGPT messages into an optional leading system prompt and
// (user, assistant) pairs. Consecutive messages of one role are joined with a newline,
// leading assistant messages and a trailing unanswered user message are dropped. It reports
// false for an unknown role.
func chatPairs(msgs []ShareGPTMessage) (system string, pairs [][2]string, ok bool) {
	var roles []Role
	var texts []string
	for _, m := range msgs {
		role, known := shareGPTRole(m.From)
		if !known {
			return "", nil, false
		}
		if n := len(roles); n > 0 && roles[n-1] == role {
			texts[n-1] += "\n" + m.Value
			continue
		}
		roles, texts = append(roles, role), append(texts, m.Value)
	}
	i := 0
	if len(roles) > 0 && roles[0] == RoleSystem {
		system, i = texts[0], 1
	}
	for ; i+1 < len(roles); i++ {
		if roles[i] == RoleUser && roles[i+1] == RoleAssistant {
			pairs = append(pairs, [2]string{texts[i], texts[i+1]})
			i++
		}
	}
	return system, pairs, true
}

// shareGPTRole maps a ShareGPT "from" value to a chat role.
func shareGPTRole(from string) (Role, bool) {
	switch strings.ToLower(from) {
	case "human", "user":
		return RoleUser, true
	case "gpt", "chatgpt", "bing", "bard", "assistant", "model":
		return RoleAssistant, true
	case "system":
		return RoleSystem, true
	}
	return "", false
}

func (s *shareGPTSource) skipped() int { return s.skip }
func (s *shareGPTSource) Close() error { return s.file.Close() }
