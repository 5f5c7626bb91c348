package workloads

import (
	"errors"
	"io"
)

// tagClient names the random stream of a closed-loop client (its synthesised answers); its
// value is chat-prefixes' first, kept so that its streams stay as they were.
const tagClient uint64 = 0x7072_6566_0004

var _ source = (*clients)(nil)

// clients turns a source of single-turn conversations into a fixed number of closed-loop
// clients: each client is a session that sends one of the source's conversations, and when
// its request finishes takes the next one from the queue they all share, so that exactly
// n requests are in flight once every client has started and until the source runs out,
// as a benchmark holding a constant concurrency does (inference-perf's concurrent load,
// KubeAI's script's semaphore over one queue). The arrival process says when each client
// starts; a client's later requests follow its previous one at once. The entries are
// taken in the source's order, each when the request that sends it is built. A client
// ends when the source has nothing for it or after perClient requests.
type clients struct {
	src       source
	n         int // clients to start
	perClient int // requests per client; 0: no limit
	seed      uint64
	started   int
	held      *conversation // the entry fetched for the request about to be built
	err       error         // the source's error
}

// newClients returns n closed-loop clients over src; seed names their random streams.
func newClients(src source, n, perClient int, seed uint64) *clients {
	return &clients{src: src, n: n, perClient: perClient, seed: seed}
}

// next starts the next client, holding the entry of its first request, or returns io.EOF
// when every client has started or the source has run out.
func (c *clients) next() (*conversation, error) {
	if c.started >= c.n || !c.fetch() {
		if c.err != nil {
			return nil, c.err
		}
		return nil, io.EOF
	}
	w := c.started
	c.started++
	return &conversation{seed: deriveSeed(c.seed, tagClient, uint64(w)), clients: c}, nil
}

// fetch holds the source's next entry for the request about to be built, reporting false
// when there is none (the source ran out or failed: see err).
func (c *clients) fetch() bool {
	if c.held != nil {
		return true
	}
	if c.err != nil {
		return false
	}
	conv, err := c.src.next()
	if err != nil {
		if !errors.Is(err, io.EOF) {
			c.err = err
		}
		return false
	}
	c.held = conv
	return true
}

// take gives session s, one of the clients, the entry held for it: its history is
// replaced by the entry's and the entry's turn is returned. more reports whether the client
// may send another request after this one (it is under perClient); whether it does depends
// on the source having an entry when this one finishes (fetch).
func (c *clients) take(s *session, withText bool) (tr turn, more bool) {
	if !c.fetch() {
		panic("workloads: a closed-loop client built a request without an entry") // next and Done fetch first
	}
	e := c.held
	c.held = nil
	s.conv.group = e.group
	s.restart(e, withText)
	return e.turns[0], c.perClient == 0 || s.turn+1 < c.perClient
}

func (c *clients) skipped() int { return c.src.skipped() }
func (c *clients) Close() error { return c.src.Close() }

// restart replaces the session's history with e's: its system prompt, then its history,
// alternating user and assistant messages, for a request that is a prompt of its own. The
// text already handed out stays valid: the old buffer is dropped, not overwritten.
func (s *session) restart(e *conversation, withText bool) {
	s.tokens, s.text, s.textBuf, s.msgs = nil, "", nil, nil
	if e.hasSystem {
		s.appendSegment(RoleSystem, e.system, withText)
	}
	for i, h := range e.history {
		role := RoleUser
		if i%2 == 1 {
			role = RoleAssistant
		}
		s.appendSegment(role, h, withText)
	}
}
