package engine

// Lazy decoders. Most of a replica's work is running requests that decode one token per step
// with nothing else happening to them: their blocks are in place, no block fills up, they do
// not finish. Handling each of them each step costs O(batch) per step, for nothing. A request
// in such a stretch is a lazy decoder: its computed and generated counts are kept as of step
// t0 and advance implicitly with r.tick, the count of steps ended; the step shape adds them in
// bulk (lazyN, lazyCtx); and due (parallel to running) says at which step the request next
// needs handling on its own: a new block, a block to register in the prefix cache, or its
// last token. Before that step it is brought up to date (materialize) and handled exactly as
// any other, except when all it needs is a block registered or a new block: then it stays
// lazy and the scheduler allocates and registers at its place in running order
// (advanceLazy), which is all the handling on its own would change. A lazy decoder is also
// brought up to date when it is preempted, when the free queue is too short for its new
// block, when the replica
// fails, and whenever a step's token budget would not cover every running request (then
// the scheduler goes one by one, as vLLM's does). The result is the same, step for step, as
// handling every request every step; equivalence_test.go checks it against the reference.

// prepareLazy lists the running requests due this step (expl), brings those due for more
// than blocks up to date (the others stay lazy: advanceLazy), and reports whether the budget
// covers every running request's remaining tokens, so that every lazy decoder is certain to
// get its token.
//
// On the way it reads what the requests handled on their own will touch: the table slot of
// the next block each registers and the free-queue heads of the blocks they will take, so
// that the cache misses overlap here instead of stalling the scheduler one after another.
// The reads change nothing.
func (r *Replica) prepareLazy() bool {
	need, blocks := 0, 0
	var sink uint64
	tick, due, running := r.tick, r.due, r.running
	expl := r.expl[:0]
	for i, d := range due { // a tight loop of its own: this one reads every running request
		if d <= tick {
			expl = append(expl, int32(i))
		}
	}
	r.expl = expl
	for _, i := range expl {
		s := running[i]
		if s.lazy {
			if total, ok := r.blocksOnly(s); ok { // stays lazy; its token is in lazyN
				if total > len(s.blocks)*r.bs { // one token more: at most one block
					blocks++
				}
				sink += r.touchReg(s, total)
				continue
			}
			r.materialize(s)
			due[i] = 0
		}
		total := s.numTokens()
		need += total - s.computed
		blocks += max(r.blocksFor(total)-len(s.blocks), 0)
		sink += r.touchReg(s, total)
	}
	if blocks > 1 {
		r.pool.touchFree(blocks)
	}
	r.pool.sink += sink
	return need+r.lazyN <= r.maxBatch
}

// touchReg reads the table line that block reg of s will be cached in, when s has its hash
// and the block is full at total tokens (see prefixTable.touch).
func (r *Replica) touchReg(s *seq, total int) uint64 {
	if s.reg < len(s.hashes) && r.regFull(s, total) {
		return r.pool.cached.touch(s.hashes[s.reg&^(groupBlocks-1)])
	}
	return 0
}

// blocksOnly reports whether lazy decoder s, due this step, needs nothing this step but
// blocks allocated or registered: its token is not its last. It returns the tokens s has
// once this step's is computed.
func (r *Replica) blocksOnly(s *seq) (int, bool) {
	k := int(r.tick - s.t0)
	return s.numTokens() + k, !s.aborted && s.generated+k < s.outputLen-1
}

// advanceLazy allocates and registers what lazy decoder s, at position i of running, needs
// for this step's token (blocksOnly), as scheduling it on its own would, and sets the step
// it is next due: the one lazify would find once the step has ended. It is false, changing
// nothing, when the free queue is too short: s must then be handled on its own.
func (r *Replica) advanceLazy(i int, s *seq) bool {
	k := int(r.tick - s.t0)
	c, g := s.computed+k+1, s.generated+k+1 // once this step's token is computed
	if !r.allocate(s, c) {
		return false
	}
	r.due[i] = r.tick + 1 + int64(max(r.untilDue(s, c, g), 0))
	return true
}

// untilDue returns how many steps decoding request s, with c tokens computed and g generated,
// can take before it needs handling on its own: before its token needs a new block, before
// block reg, whose tokens are known, fills up and is cached, or before its last token.
func (r *Replica) untilDue(s *seq, c, g int) int {
	k := len(s.blocks)*r.bs - c
	if r.regFull(s, s.knownLen) { // block reg's tokens are known
		k = min(k, (s.reg+1)*r.bs-1-c)
	}
	return min(k, s.outputLen-1-g)
}

// regFull reports whether block reg, the next to register, is full at tokens tokens: a
// product, not a division by the block size.
func (r *Replica) regFull(s *seq, tokens int) bool { return tokens >= (s.reg+1)*r.bs }

// materialize brings lazy decoder s up to date and makes it an ordinary request. The caller
// resets its due.
func (r *Replica) materialize(s *seq) {
	k := int(r.tick - s.t0)
	r.lazyN--
	r.lazyCtx -= int64(s.computed) - s.t0
	s.computed += k
	s.generated += k
	s.lazy = false
}

// materializeAll brings every lazy decoder up to date; every running request is then
// handled on its own (expl).
func (r *Replica) materializeAll() {
	r.expl = r.expl[:0]
	for i := range r.running {
		r.expl = append(r.expl, int32(i))
	}
	if r.lazyN == 0 {
		return
	}
	for i, s := range r.running {
		if s.lazy {
			r.materialize(s)
			r.due[i] = 0
		}
	}
}

// lazify makes running request s a lazy decoder when it is decoding and its next event is at
// least one step away, and returns the step it is due (0: it is not lazy).
func (r *Replica) lazify(s *seq) int64 {
	c, g := s.computed, s.generated
	if g <= 0 || c != s.numTokens()-1 || r.sem.V0Scheduler {
		return 0 // still prefilling, or V0, which handles every request every step
	}
	k := r.untilDue(s, c, g)
	if k <= 0 {
		return 0
	}
	s.lazy, s.t0 = true, r.tick
	r.lazyN++
	r.lazyCtx += int64(c) - r.tick
	return r.tick + int64(k)
}
