package workloads

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"kvroute/internal/spares"
)

// Stream is a workload as a deterministic sequence of requests in arrival order. It merges
// open-loop session starts (from the arrival process or the trace) with closed-loop
// follow-up turns, which Done schedules when a turn finishes.
//
// A driver asks Peek for the earliest request, sends it at its Arrival after taking it with
// Next, and reports its end with Done. A discrete-event simulator does this in one goroutine
// on its virtual clock: after every Done it peeks again, because the follow-up may come
// before the request it was waiting for. An HTTP load generator maps Arrival to wall time;
// it must also re-peek after each Done (for instance by waking its dispatcher).
//
// When Peek reports nothing, InFlight tells the two endings apart: sessions still waiting
// for Done may yet produce turns; with none, the stream is over (check Err).
//
// All methods are safe for concurrent use; Peek followed by Next is not atomic, so one
// goroutine should dispatch while any goroutine may call Done.
type Stream struct {
	mu          sync.Mutex
	lanes       []*lane
	follow      followQueue
	waiting     map[string]*session
	tok         Tokenizer
	text        bool
	maxRequests int
	maxDuration time.Duration
	seq         uint64
	stopped     bool
	err         error
	stats       Stats
	tenants     []*tenant
	closed      bool
	staged      *stagedArrivals      // the top-level arrivals when they have stages
	gated       map[string]bool      // sessions of a draining stage not yet reported done
	spare       spares.List[session] // ended sessions, for takeSession
}

// Stats counts what a stream has done so far.
type Stats struct {
	// Requests is the number of requests Next returned.
	Requests int
	// Sessions is the number of first turns Next returned.
	Sessions int
	// Skipped is the number of dataset conversations the source's filters dropped.
	Skipped int
	// Aborted is the number of sessions ended by a failed request.
	Aborted int
	// Cut is the number of sessions ended early by the Duration or Requests cap.
	Cut int
}

// pending is a built request and the session it belongs to.
type pending struct {
	req  Request
	sess *session
}

// Peek returns the next request without taking it, or false when none is available now.
func (s *Stream) Peek() (Request, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, _ := s.best()
	if p == nil {
		return Request{}, false
	}
	return p.req, true
}

// PeekArrival returns the Arrival of the request Peek would return, without copying the
// request, or false when none is available now.
func (s *Stream) PeekArrival() (time.Duration, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, _ := s.best()
	if p == nil {
		return 0, false
	}
	return p.req.Arrival, true
}

// Next takes the next request, or returns false when none is available now.
func (s *Stream) Next() (Request, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, from := s.best()
	if p == nil {
		return Request{}, false
	}
	got := *p // copy: popping the heap moves its elements
	if from != nil {
		from.head, from.slot = nil, pending{}
	} else {
		s.follow.pop()
	}
	s.stats.Requests++
	if got.req.Turn == 0 {
		s.stats.Sessions++
	}
	if got.req.FollowUp {
		s.waiting[got.req.ID] = got.sess
	}
	if from != nil && from.staged != nil && from.staged.drain {
		if s.gated == nil {
			s.gated = map[string]bool{}
		}
		s.gated[got.req.ID] = true
	}
	if !got.req.FollowUp {
		s.end(got.sess) // its last turn
	}
	if s.maxRequests > 0 && s.stats.Requests >= s.maxRequests {
		s.stop()
	}
	return got.req, true
}

// Done reports that request id ended; for a request with FollowUp it schedules the
// session's next turn at c.At plus the think time (unless c.Failed, which ends the session).
// Done for any other id, or a second Done, does nothing. A completion before the request's
// arrival is an error and changes nothing.
func (s *Stream) Done(id string, c Completion) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gated[id] {
		delete(s.gated, id)
		s.staged.done(c.At)
	}
	sess, ok := s.waiting[id]
	if !ok {
		return nil
	}
	if c.At < sess.at {
		return fmt.Errorf("workloads: done for %s at %v, before its arrival at %v", id, c.At, sess.at)
	}
	delete(s.waiting, id)
	if c.Failed {
		s.stats.Aborted++
		s.end(sess)
		return nil
	}
	at := sess.complete(c, s.tok, s.text)
	if s.maxDuration > 0 && at >= s.maxDuration {
		s.stats.Cut++
		s.end(sess)
		return nil
	}
	if cl := sess.conv.clients; cl != nil && !cl.fetch() { // a closed-loop client with nothing left to send
		s.end(sess)
		if cl.err != nil {
			s.err = cl.err
			s.stop()
		}
		return nil
	}
	s.seq++
	s.follow.push(followItem{pending: pending{req: sess.next(at, s.text), sess: sess}, seq: s.seq})
	return nil
}

// takeSession returns an ended session to start a new one in, or a new one.
func (s *Stream) takeSession() *session {
	if sess := s.spare.Take(); sess != nil {
		return sess
	}
	return new(session)
}

// end takes back session sess, which builds no more turns and which nothing else refers to:
// its struct, and its conversation when the source reuses conversations, are reused. Its
// history is not: the requests handed out slice it, and their readers may keep them (a
// simulator's hash memo compares later prompts with them).
func (s *Stream) end(sess *session) {
	if r, ok := sess.t.src.(recycler); ok {
		r.recycle(sess.conv)
	}
	*sess = session{}
	s.spare.Put(sess)
}

// recycler is a source that reuses the conversations of ended sessions.
type recycler interface {
	// recycle takes back c, which no session reads any more.
	recycle(c *conversation)
}

// InFlight returns the number of requests whose Done the stream waits for before it can go
// on: sessions before their next turn, and the requests of a draining arrival stage.
func (s *Stream) InFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.waiting)
	for id := range s.gated {
		if s.waiting[id] == nil {
			n++
		}
	}
	return n
}

// Stages returns the stages of a staged arrival process begun so far, in order (nil
// without stages). A stage's Start is known before its first request arrives.
func (s *Stream) Stages() []StageSpan {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.staged == nil {
		return nil
	}
	return append([]StageSpan(nil), s.staged.spans...)
}

// StageAt returns the index of the arrival stage running at t (a request's Arrival), or -1
// without stages or before the first.
func (s *Stream) StageAt(t time.Duration) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.staged == nil {
		return -1
	}
	return stageAt(s.staged.spans, t)
}

// Err returns the error that ended the stream early (a malformed dataset record), if any.
func (s *Stream) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Stats returns the counts so far.
func (s *Stream) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	for _, t := range s.tenants {
		st.Skipped += t.src.skipped()
	}
	return st
}

// Close releases the files the stream reads; the stream then ends. Close is idempotent.
func (s *Stream) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopped = true
	return s.closeSources()
}

func (s *Stream) closeSources() error {
	if s.closed {
		return nil
	}
	s.closed = true
	var errs []error
	for _, t := range s.tenants {
		if err := t.src.Close(); err != nil {
			errs = append(errs, fmt.Errorf("workloads: close tenant %q: %w", t.name, err))
		}
	}
	return errors.Join(errs...)
}

// stop ends the stream: queued and waiting sessions are cut.
func (s *Stream) stop() {
	s.stopped = true
	s.stats.Cut += len(s.waiting) + len(s.follow)
	clear(s.waiting)
	clear(s.gated)
	s.follow = nil
	_ = s.closeSources() // read-only files: nothing to lose on a close error
}

// best returns the earliest pending request and the lane holding it (nil for the
// follow-up queue). Follow-ups win ties, then lanes in order.
func (s *Stream) best() (*pending, *lane) {
	if s.stopped {
		return nil, nil
	}
	var p *pending
	var from *lane
	if len(s.follow) > 0 {
		p = &s.follow[0].pending
	}
	for _, l := range s.lanes {
		if err := l.fill(s); err != nil {
			s.err = err
			s.stop()
			return nil, nil
		}
		if l.head != nil && (p == nil || l.head.req.Arrival < p.req.Arrival) {
			p, from = l.head, l
		}
	}
	return p, from
}

// followItem is a follow-up turn waiting for its arrival time.
type followItem struct {
	pending
	seq uint64
}

// followQueue is a binary min-heap of follow-ups by (arrival, seq), a total order. It sifts
// as container/heap does, on the items themselves: boxing each item in an interface to push
// and pop it allocated twice per follow-up.
type followQueue []followItem

func (q followQueue) less(i, j int) bool {
	if q[i].req.Arrival != q[j].req.Arrival {
		return q[i].req.Arrival < q[j].req.Arrival
	}
	return q[i].seq < q[j].seq
}

// push adds it to the queue.
func (q *followQueue) push(it followItem) {
	*q = append(*q, it)
	h := *q
	for j := len(h) - 1; j > 0; {
		i := (j - 1) / 2 // parent
		if !h.less(j, i) {
			break
		}
		h[i], h[j] = h[j], h[i]
		j = i
	}
}

// pop removes the first follow-up; the queue is not empty.
func (q *followQueue) pop() {
	h := *q
	n := len(h) - 1
	h[0], h[n] = h[n], h[0]
	for i := 0; ; {
		j := 2*i + 1
		if j >= n {
			break
		}
		if j2 := j + 1; j2 < n && h.less(j2, j) {
			j = j2
		}
		if !h.less(j, i) {
			break
		}
		h[i], h[j] = h[j], h[i]
		i = j
	}
	h[n] = followItem{} // drop the references
	*q = h[:n]
}

// source produces the conversations of one workload in order.
type source interface {
	// next returns the next conversation, or io.EOF when there are no more.
	next() (*conversation, error)
	// skipped returns how many dataset conversations the filters dropped so far.
	skipped() int
	io.Closer
}
