package workloads

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"time"
	"unsafe"
)

// segment is a piece of prompt content: token ids and, when text is wanted, their text.
type segment struct {
	tokens []int32
	text   string
}

// turn is one user message of a conversation script and the answer it asks for.
type turn struct {
	user segment
	// userKey and userLen, when userLen > 0, stand for a user message of userLen keyed
	// synthetic tokens (appendKeyedTokens) that is drawn only when the turn is built: into
	// the history's spare room when reserve made it, and not at all for a turn never sent.
	userKey   uint64
	userLen   int
	output    int     // answer length to request, tokens
	answer    segment // the dataset's answer (ShareGPT); synthesised when !hasAnswer
	hasAnswer bool
}

// conversation is a source's script of one session, before any timing is applied.
type conversation struct {
	at        time.Duration // trace timestamp from the first record; valid for trace sources
	group     string        // PrefixGroup of every turn
	system    segment
	hasSystem bool
	history   []segment // messages before the first turn, alternating user and assistant
	turns     []turn
	seed      uint64 // names the random streams of synthesised answers and think times
	// clients, when set, makes the conversation a closed-loop client's: every turn is the
	// next entry of the clients' shared queue (clients.take), and turns is unused.
	clients *clients
}

// tenant is one producer of conversations with its naming and think-time rules.
type tenant struct {
	name      string
	prefix    string // ID prefix: "" or name + "/"
	src       source
	multi     bool // conversations are sessions that may have follow-ups
	thinkTime time.Duration
	thinkExp  bool // exponential think time rather than constant
	count     int  // conversations started
	exhausted bool
	think     scratchRand // a turn's think-time stream
}

// session is the state of one conversation being replayed.
type session struct {
	id     string
	t      *tenant
	conv   *conversation
	turn   int           // index of the turn most recently built
	at     time.Duration // arrival of the turn most recently built
	tokens []int32       // history including the latest user message
	text   string        // textBuf as a string
	// textBuf holds the history's text. It is only ever appended to, so the strings already
	// handed out as Request.Text, which alias its prefix, never change.
	textBuf []byte
	msgs    []Message
	answer  segment // the expected answer of the latest turn
}

// newSession starts conversation c of tenant t in s, a new or an ended session (see
// Stream.end); withText keeps text and messages.
func newSession(s *session, t *tenant, c *conversation, withText bool) *session {
	n := t.count
	t.count++
	*s = session{t: t, conv: c, turn: -1}
	if t.multi {
		s.id = joinID(t.prefix, 's', n)
	} else {
		s.id = joinID(t.prefix, 'r', n)
	}
	s.reserve(withText)
	if c.hasSystem {
		s.appendSegment(RoleSystem, c.system, withText)
	}
	return s
}

// joinID returns prefix, then sep, then n in decimal, as one new string: one allocation
// where a concatenation with strconv.Itoa takes two.
func joinID(prefix string, sep byte, n int) string {
	var a [40]byte
	b := append(a[:0], prefix...)
	b = append(b, sep)
	return string(strconv.AppendInt(b, int64(n), 10))
}

// reserve sizes a conversation's history for all its turns (with synthetic answers at most
// 5 bytes of text per token), so that it is not copied as it grows turn by turn.
func (s *session) reserve(withText bool) {
	c := s.conv
	if len(c.turns) < 2 {
		return
	}
	tokens, text := len(c.system.tokens), len(c.system.text)
	for i, tr := range c.turns {
		if tr.userLen > 0 {
			tokens += tr.userLen
			text += 5 * tr.userLen
		} else {
			tokens += len(tr.user.tokens)
			text += len(tr.user.text)
		}
		switch {
		case i == len(c.turns)-1: // the last answer never joins the history
		case tr.hasAnswer:
			tokens += len(tr.answer.tokens)
			text += len(tr.answer.text)
		default:
			tokens += max(tr.output, 1)
			text += 5 * max(tr.output, 1)
		}
	}
	s.tokens = make([]int32, 0, tokens)
	if withText {
		s.textBuf = make([]byte, 0, text)
		s.msgs = make([]Message, 0, 1+2*len(c.turns))
	}
}

func (s *session) appendSegment(role Role, seg segment, withText bool) {
	switch {
	case s.tokens == nil:
		// Share the segment's ids; the full slice expression makes any later append copy.
		s.tokens = seg.tokens[:len(seg.tokens):len(seg.tokens)]
	case inSpare(s.tokens, seg.tokens):
		s.tokens = s.tokens[:len(s.tokens)+len(seg.tokens)] // drawn in place (expectedAnswer)
	default:
		s.tokens = append(doubling(s.tokens, len(seg.tokens)), seg.tokens...)
	}
	if withText {
		if len(s.msgs) > 0 { // messages are flattened joined by a space, as a router flattens them
			s.textBuf = append(doubling(s.textBuf, 1+len(seg.text)), ' ')
		}
		s.textBuf = append(doubling(s.textBuf, len(seg.text)), seg.text...)
		s.text = unsafe.String(unsafe.SliceData(s.textBuf), len(s.textBuf))
		s.msgs = append(s.msgs, Message{Role: role, Content: seg.text})
	}
}

// doubling returns b with room for extra more elements, at least doubling its capacity when
// it must grow: a history grows turn by turn, and append's gentler growth for large slices
// would copy it several times over.
func doubling[T any](b []T, extra int) []T {
	if cap(b)-len(b) >= extra {
		return b
	}
	return slices.Grow(b, max(extra, cap(b)))
}

// next builds the session's next turn, arriving at at.
func (s *session) next(at time.Duration, withText bool) Request {
	s.turn++
	s.at = at
	var tr turn
	more := s.turn+1 < len(s.conv.turns)
	if c := s.conv.clients; c != nil {
		tr, more = c.take(s, withText)
	} else {
		tr = s.conv.turns[s.turn]
	}
	if tr.userLen > 0 {
		tr.user = s.keyed(tr.userKey, tr.userLen, withText)
	}
	s.appendSegment(RoleUser, tr.user, withText)
	req := Request{
		ID:           s.id,
		Arrival:      at,
		Tenant:       s.t.name,
		Turn:         s.turn,
		PrefixGroup:  s.conv.group,
		Tokens:       s.tokens[:len(s.tokens):len(s.tokens)],
		OutputTokens: max(tr.output, 1),
	}
	if s.t.multi {
		req.Session = s.id
		req.ID = joinID(s.id, '.', s.turn)
	}
	if withText {
		req.Text = s.text
		req.Messages = s.msgs[:len(s.msgs):len(s.msgs)]
	}
	if more {
		s.answer = s.expectedAnswer(tr, withText)
		req.FollowUp = true
		req.AnswerTokens = s.answer.tokens
	}
	return req
}

// expectedAnswer is the dataset's answer, or OutputTokens synthetic tokens drawn from the
// turn's own random stream. Without text, synthetic tokens are drawn straight into the
// history's spare room (reserve made it), where complete appends them without a copy.
func (s *session) expectedAnswer(tr turn, withText bool) segment {
	if tr.hasAnswer {
		return tr.answer
	}
	key, n := deriveSeed(s.conv.seed, tagAnswer, uint64(s.turn)), max(tr.output, 1)
	if withText {
		return keyedSegment(key, n, withText)
	}
	return s.keyed(key, n, false)
}

// keyed returns n tokens of key's sequence (and their text when withText is set), drawn
// straight into the history's spare room when it has room for them, where appendSegment
// takes them without a copy.
func (s *session) keyed(key uint64, n int, withText bool) segment {
	if s.tokens == nil || cap(s.tokens)-len(s.tokens) < n {
		return keyedSegment(key, n, withText)
	}
	spare := appendKeyedTokens(s.tokens, key, n)[len(s.tokens):] // fits: no new array
	seg := segment{tokens: spare[:n:n]}
	if withText {
		seg.text = Words(seg.tokens)
	}
	return seg
}

// inSpare reports whether seg starts right after the end of history, in its spare room.
func inSpare(history, seg []int32) bool {
	return len(seg) > 0 && cap(history)-len(history) >= len(seg) &&
		&history[:len(history)+1][len(history)] == &seg[0]
}

// complete appends the latest turn's answer to the history: the one the Completion reports
// or else the expected one. It returns when the next turn arrives.
func (s *session) complete(c Completion, tok Tokenizer, withText bool) time.Duration {
	ans := s.answer
	if (c.Text != "" || c.Tokens != nil) && inSpare(s.tokens, ans.tokens) {
		// The answer received replaces the expected one, which was handed out as
		// AnswerTokens: move the history rather than overwrite it.
		s.tokens = append(make([]int32, 0, cap(s.tokens)), s.tokens...)
	}
	switch {
	case c.Text != "":
		ans = segment{tokens: c.Tokens, text: c.Text}
		if ans.tokens == nil {
			ans.tokens = tok.Encode(c.Text)
		}
	case c.Tokens != nil:
		ans = segment{tokens: c.Tokens}
		if withText {
			ans.text = Words(c.Tokens)
		}
	}
	s.appendSegment(RoleAssistant, ans, withText)
	s.answer = segment{}
	return c.At + s.think()
}

// think draws the pause before the next turn from the turn's own random stream.
func (s *session) think() time.Duration {
	d := s.t.thinkTime
	if d <= 0 || !s.t.thinkExp {
		return d
	}
	return exponentialDuration(s.t.think.at(s.conv.seed, tagThink, uint64(s.turn)), d)
}

// exponentialDuration draws an exponential duration with the given mean.
func exponentialDuration(r *rand.Rand, mean time.Duration) time.Duration {
	return time.Duration(r.ExpFloat64() * float64(mean))
}
