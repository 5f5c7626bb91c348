package engine

import "kvroute/sim"

// Abort ends req at the kernel's current time, as vLLM aborts a request whose client went
// away. A waiting request leaves the queue at once. A running request ends when the step in
// flight does, since vLLM applies aborts between steps: it keeps the token that step gives it,
// unless that token is its last, in which case it completes normally. Its blocks go back to
// the free queue with their hashes, so what it computed stays cached. The Done hook reports
// it Aborted. Abort reports whether req was queued or running here.
func (r *Replica) Abort(req *Request) bool {
	for i, s := range r.waiting {
		if s.req == req {
			r.abortWaiting(i, r.k.Now())
			return true
		}
	}
	for i, s := range r.running {
		if s.req == req && s.generated >= 0 && !s.aborted {
			s.aborted = true
			r.due[i] = 0 // settle handles it at the end of the step in flight, even if lazy
			r.scanAll = true
			return true
		}
	}
	return false
}

// abortWaiting takes waiting request i out of the queue, lets go of what it holds for a
// load or a read, and ends it Aborted.
func (r *Replica) abortWaiting(i int, now sim.Time) {
	s := r.waiting[i]
	copy(r.waiting[i:], r.waiting[i+1:])
	r.waiting[len(r.waiting)-1] = nil
	r.waiting = r.waiting[:len(r.waiting)-1]
	r.dropLoad(s)
	r.end(s, Aborted, now)
}

// dropAborted brings aborted request s up to date and frees its blocks at the end of a step;
// compactFinished then reports it.
func (r *Replica) dropAborted(s *seq) {
	if s.lazy {
		r.materialize(s)
	}
	r.park(s)
	r.pool.release(s.blocks)
	s.blocks = s.blocks[:0]
}
