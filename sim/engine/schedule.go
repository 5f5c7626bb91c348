package engine

import "kvroute/gpumodel"

// schedule builds the next batch into r.batch, as vLLM V1's scheduler does, and returns its
// shape for pricing. Lazy decoders (lazy.go) are in the batch implicitly.
func (r *Replica) schedule() gpumodel.Step {
	if r.sem.V0Scheduler {
		return r.scheduleV0()
	}
	r.batch = r.batch[:0]
	if !r.prepareLazy() {
		r.materializeAll() // some request will not get all it needs: go one by one
	}
	budget, preempted := r.scheduleRunning()
	if !preempted || r.holdsWaiting() && len(r.running) == 0 {
		// With a CPU tier or decode legs, requests waiting for their loads hold blocks, so a step may
		// preempt every running request; vLLM's engine would schedule again at once.
		r.scheduleWaiting(budget)
	}
	step := r.batchStep()
	step.DecodeSeqs += r.lazyN
	step.DecodeContext += r.lazyCtx + int64(r.lazyN)*r.tick
	return step
}

// batchStep returns the shape of r.batch: a request whose next token is its only one to
// compute is a decode row (as is, under V0, a finished request holding its row to the end
// of its burst, which computes nothing); the others are prefill chunks.
func (r *Replica) batchStep() gpumodel.Step {
	var step gpumodel.Step
	for _, s := range r.batch {
		if s.scheduled <= 1 && s.generated > 0 && s.computed == s.numTokens()-1 {
			step.AddDecode(s.computed)
		} else {
			step.AddPrefill(s.scheduled, s.computed)
		}
	}
	return step
}

// scheduleRunning gives each running request, in order, its remaining tokens within the
// budget, preempting the newest when blocks run out. It returns the budget left and whether
// it preempted.
//
// It visits only the requests handled on their own (expl); the lazy decoders between them
// take one token each, their blocks in place. Unless every request was made explicit
// (materializeAll), prepareLazy found that the budget covers every running request, so the
// budget never runs out in between, and the lazy decoders' tokens are taken from it at the
// end: those still running then, r.lazyN.
func (r *Replica) scheduleRunning() (budget int, preempted bool) {
	budget = r.maxBatch
	for k := 0; k < len(r.expl) && budget > 0; k++ {
		i := int(r.expl[k])
		if i >= len(r.running) {
			break // preempted, and so are those after it
		}
		s := r.running[i]
		if s.lazy { // due only for blocks (prepareLazy)
			if r.advanceLazy(i, s) {
				continue
			}
			r.materialize(s) // the free queue is short: on its own, preempting
			r.due[i] = 0
		}
		n := min(s.numTokens()-s.computed, budget)
		total := s.computed + n
		if total <= len(s.blocks)*r.bs && !r.regFull(s, total) {
			// Fast path (most decode steps): the blocks exist and no block fills up.
			s.scheduled = n
			budget -= n
			r.batch = append(r.batch, s)
			continue
		}
		ok, pre := r.allocateOrPreempt(s, total)
		preempted = preempted || pre
		if !ok {
			break // s itself was preempted: it was the last
		}
		s.scheduled = n
		budget -= n
		r.batch = append(r.batch, s)
	}
	return budget - r.lazyN, preempted
}

// scheduleWaiting admits waiting requests, in order, while the budget, max_num_seqs and the
// free blocks allow, and (AsyncScheduling) only those that arrived by r.cutoff.
func (r *Replica) scheduleWaiting(budget int) {
	if r.holdsWaiting() {
		r.scheduleWaitingOffload(budget)
		return
	}
	for len(r.waiting) > 0 && budget > 0 && len(r.running) < r.maxSeqs {
		s := r.waiting[0]
		if s.arrival > r.cutoff {
			break // arrived after this batch was scheduled
		}
		n, ok := r.admit(s, budget)
		if !ok {
			break
		}
		r.startRunning(n)
		budget -= n
	}
}

// startRunning moves the head of the waiting queue, admitted with n tokens this step, to the
// end of running and into the batch.
func (r *Replica) startRunning(n int) {
	s := r.waiting[0]
	r.popWaiting()
	r.running = append(r.running, s)
	r.due = append(r.due, 0)
	r.expl = append(r.expl, int32(len(r.running)-1))
	s.scheduled = n
	r.batch = append(r.batch, s)
}

// allocateOrPreempt gives running request s blocks for its first total tokens, preempting
// the newest running requests while the free queue is too short. It is false when s itself
// was preempted (it was the newest left).
func (r *Replica) allocateOrPreempt(s *seq, total int) (ok, preempted bool) {
	for !r.allocate(s, total) {
		if r.holdsWaiting() && r.releaseLoaded() {
			continue // requests waiting with loaded blocks give them back first
		}
		victim := r.running[len(r.running)-1]
		r.preempt(victim)
		preempted = true
		if victim == s {
			return false, true
		}
	}
	return true, preempted
}

// allocate gives s blocks for its first total tokens, registering in the cache every block
// that will be full once they are computed. It fails, changing nothing, when the free queue is
// too short.
func (r *Replica) allocate(s *seq, total int) bool {
	need := r.blocksFor(total) - len(s.blocks)
	if need > r.pool.numFree {
		return false
	}
	if need > 1 {
		r.pool.touchFree(need)
	}
	if need > 0 {
		s.blocks = r.pool.popRun(s.blocks, need)
	}
	r.register(s, r.fullBlocks(total))
	return true
}

// register caches s's first full blocks, up to full, whose tokens are known.
func (r *Replica) register(s *seq, full int) {
	if s.reg >= full {
		if r.off != nil {
			r.off.noteStore(r, s) // the blocks of a GPU hit are offered to the CPU tier too
		}
		return // every full block is offered already (they all have hashes)
	}
	known := min(r.hashUpTo(s, full), len(s.blocks))
	if r.hooks.KV != nil && s.reg < known {
		r.storing = s // for the BlockStored events' tokens and parents
		r.storingNew = true
	}
	for ; s.reg < known; s.reg++ {
		r.storingBlock = s.reg
		r.pool.cache(s.blocks[s.reg], keyOf(s.hashes, s.reg))
	}
	r.storing = nil
	if r.off != nil {
		r.off.noteStore(r, s)
	}
}

// admit looks up the prefix cache for waiting request s and allocates what its first chunk
// needs within budget. It returns the tokens scheduled, or false (changing nothing) when the
// blocks are not there.
func (r *Replica) admit(s *seq, budget int) (int, bool) {
	total := s.numTokens()
	return r.admitHits(s, budget, total, r.lookupHits(s, total))
}

// lookupHits finds the blocks of waiting request s, with total tokens, cached in the prefix
// cache (r.hits) and returns how many of them are free.
func (r *Replica) lookupHits(s *seq, total int) int {
	maxHit := r.fullBlocks(total - 1) // a full hit still recomputes the last token
	known := r.hashUpTo(s, maxHit)
	// Bring in the table slots of the blocks to look up and register, all misses at once.
	r.pool.sink += r.pool.cached.touchChain(s.hashes[:min(len(s.hashes), r.blocksFor(total))])
	r.hits = r.hits[:0]
	freeHits := 0
	for j := 0; j < known; j++ {
		b, ok := r.pool.lookup(keyOf(s.hashes, j))
		if !ok {
			break
		}
		r.hits = append(r.hits, b)
		if r.pool.refCount(b) == 0 {
			freeHits++
		}
	}
	return freeHits
}

// admitHits allocates what the first chunk of waiting request s, with total tokens, needs
// within budget beyond its hits (r.hits, freeHits of them free). It returns the tokens
// scheduled, or false (changing nothing) when the blocks are not there.
func (r *Replica) admitHits(s *seq, budget, total, freeHits int) (int, bool) {
	hit := len(r.hits) * r.bs
	n := min(total-hit, budget)
	need := r.blocksFor(hit+n) - len(r.hits)
	fit := need
	if r.sem.ReserveFullPrompt {
		fit = r.blocksFor(total) - len(r.hits) // the whole sequence must fit, not the chunk
	}
	if fit > r.pool.numFree-freeHits {
		return 0, false
	}
	for _, b := range r.hits {
		r.pool.touch(b)
	}
	if need := r.blocksFor(s.promptLen + s.outputLen); cap(s.blocks) < need {
		// Room for every block s can ever hold, so that decoding never regrows it.
		s.blocks = make([]int32, 0, need)
	}
	s.blocks = append(s.blocks[:0], r.hits...)
	s.computed = hit
	s.reg = len(r.hits)
	if need > 1 {
		r.pool.touchFree(need)
	}
	s.blocks = r.pool.popRun(s.blocks, need)
	r.register(s, r.fullBlocks(hit+n))
	r.countPrefix(s, total, hit)
	if !s.cachedOnce {
		s.scheduledAt = r.k.Now()
		s.cachedOnce, s.cached = true, hit
		r.m.PromptTokens += int64(len(s.req.Prompt))
	}
	return n, true
}

// countPrefix records a lookup of the prefix cache in vllm:prefix_cache_queries and _hits.
func (r *Replica) countPrefix(s *seq, total, hit int) {
	if s.preemptions == 0 || !r.sem.SkipPreemptedStats {
		r.m.PrefixQueries += int64(total)
		r.m.PrefixHits += int64(hit)
	}
}

// preempt frees the newest running request's blocks and puts it at the front of the queue, to
// be recomputed (vLLM V1 preempts by recompute only).
func (r *Replica) preempt(v *seq) {
	if v.lazy {
		r.materialize(v)
	}
	r.running[len(r.running)-1] = nil
	r.running = r.running[:len(r.running)-1]
	r.due = r.due[:len(r.running)]
	r.catchUp(v)
	r.pool.release(v.blocks)
	v.blocks = v.blocks[:0]
	v.computed = 0
	v.reg = 0
	v.preemptions++
	r.m.Preemptions++
	r.pushWaiting(nil)
	copy(r.waiting[1:], r.waiting)
	r.waiting[0] = v
}

// pushWaiting appends s to the waiting queue. The queue is popped from the front by
// reslicing, so when it empties it goes back to the start of its array (waitBase) instead of
// reallocating a little array for each request that arrives at an idle replica.
func (r *Replica) pushWaiting(s *seq) {
	grown := len(r.waiting) == cap(r.waiting)
	r.waiting = append(r.waiting, s)
	if grown {
		r.waitBase = r.waiting[:0]
	}
}

// popWaiting removes the head of the waiting queue.
func (r *Replica) popWaiting() {
	r.waiting[0] = nil
	r.waiting = r.waiting[1:]
	if len(r.waiting) == 0 {
		r.waiting = r.waitBase[:0]
	}
}
