package engine

import "kvroute/sim"

// The reference engine's side of prefill/decode disaggregation (see pd.go), written the
// plain way: held blocks in a map, one function per connector call.

// refHeld is a prefill leg's held blocks and its abort timeout.
type refHeld struct {
	blocks  []int32
	timeout sim.EventID
}

// holdRef keeps finished prefill leg s's blocks until releaseHeldRef or the abort timeout.
func (r *refReplica) holdRef(s *refSeq) {
	if r.held == nil {
		r.held = map[*Request]*refHeld{}
	}
	h := &refHeld{blocks: append([]int32(nil), s.blocks...)}
	r.held[s.req] = h
	req := s.req
	h.timeout = r.k.Schedule(r.k.Now()+r.cfg.KVTransfer.abortTimeout(), r.cfg.Priority, func(now sim.Time) {
		r.freeHeldRef(req, now)
	})
}

// ReleaseHeld frees what prefill leg req holds, if anything.
func (r *refReplica) ReleaseHeld(req *Request) bool {
	held := r.held[req] != nil
	if held {
		r.freeHeldRef(req, r.k.Now())
	}
	return held
}

func (r *refReplica) freeHeldRef(req *Request, now sim.Time) {
	h := r.held[req]
	r.k.Cancel(h.timeout)
	r.pool.release(h.blocks)
	delete(r.held, req)
	if len(r.waiting) > 0 {
		r.kick(now)
	}
}

// admitAny admits waiting request s, which is not loading.
func (r *refReplica) admitAny(s *refSeq, budget int) (int, bool, bool) {
	if s.pd == pdUnread {
		ok := r.readRef(s)
		return 0, ok, ok
	}
	if r.off != nil {
		return r.admitOff(s, budget)
	}
	n, ok := r.admit(s, budget)
	return n, ok, false
}

// readRef takes decode leg s's local hit and blocks for the rest of its prompt, and asks for
// the read.
func (r *refReplica) readRef(s *refSeq) bool {
	total := s.numTokens()
	known := s.hashUpTo((total-1)/r.bs, r.bs, &r.scratch)
	var hits []int32
	freeHits := 0
	for j := 0; j < known; j++ {
		b, ok := r.pool.lookup(s.hashes[j])
		if !ok {
			break
		}
		hits = append(hits, b)
		if r.pool.ref[b] == 0 {
			freeHits++
		}
	}
	need := r.blocksFor(total) - len(hits)
	if need > r.pool.numFree-freeHits {
		return false
	}
	for _, b := range hits {
		r.pool.touch(b)
	}
	s.blocks = append(s.blocks[:0], hits...)
	for range need {
		s.blocks = append(s.blocks, r.pool.popFree())
	}
	hit := len(hits) * r.bs
	s.computed, s.reg = hit, len(hits)
	if s.preemptions == 0 || !r.sem.SkipPreemptedStats {
		r.m.PrefixQueries += int64(total)
		r.m.PrefixHits += int64(hit)
		r.m.ExternalQueries += int64(total)
		r.m.ExternalHits += int64(total - hit)
	}
	s.load, s.pd = loadInFlight, pdReading
	if r.hooks.RemoteRead != nil {
		r.hooks.RemoteRead(s.req, total-hit)
	}
	return true
}

// RemoteKVDone ends decode leg req's read.
func (r *refReplica) RemoteKVDone(req *Request, ok bool) {
	for i, s := range r.waiting {
		if s.req != req || s.pd != pdReading {
			continue
		}
		now := r.k.Now()
		s.pd = pdRead
		if ok {
			hit := s.computed
			s.computed = s.numTokens() - 1
			s.remote = s.computed - hit
		} else if !r.cfg.KVTransfer.Recompute {
			r.waiting = append(r.waiting[:i], r.waiting[i+1:]...)
			r.pool.release(s.blocks)
			s.blocks = nil
			r.end(s, Aborted, now)
			r.kick(now)
			return
		}
		s.load = loadDone
		r.kick(now)
		return
	}
}
