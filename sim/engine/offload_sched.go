package engine

import (
	"fmt"

	"kvroute/sim"
)

// The replica's side of the CPU tier (offload.go): where vLLM's scheduler calls the
// OffloadingConnector (vllm-project/vllm@0072b0b7 vllm/distributed/kv_transfer/kv_connector/
// v1/offloading/scheduler.py, OffloadingConnectorScheduler; vllm-project/vllm@00024d31
// vllm/v1/core/sched/scheduler.py, Scheduler.schedule and _update_waiting_for_remote_kv).

// setupOffload gives r the CPU tier cfg asks for, if any.
func (r *Replica) setupOffload(cfg Config, rel Release) error {
	if cfg.Offload.Bytes == 0 {
		return nil
	}
	if rel.V0Scheduler {
		return fmt.Errorf("engine: a CPU KV tier needs vLLM V1, not %s", rel.Name)
	}
	o, err := newOffloader(cfg.Offload, cfg.Deployment)
	if err != nil {
		return err
	}
	r.off = o
	r.private = false // stores read each block's hash as it fills
	return nil
}

// scheduleWaitingOffload is scheduleWaiting with a CPU tier: a waiting request may hit
// offloaded blocks after its GPU hit, and then waits, its GPU blocks allocated, while they
// load (WAITING_FOR_REMOTE_KVS); the scheduler skips it, and those it cannot look up yet,
// and goes on with the requests behind them.
func (r *Replica) scheduleWaitingOffload(budget int) {
	for i := 0; i < len(r.waiting) && budget > 0 && len(r.running) < r.maxSeqs; {
		s := r.waiting[i]
		if s.arrival > r.cutoff {
			break // arrived after this batch was scheduled
		}
		var n int
		var ok bool
		switch s.load {
		case loadInFlight:
			i++
			continue
		case loadDone:
			n, ok = r.admitLoaded(s, budget)
		default:
			var skip bool
			n, ok, skip = r.admitWaiting(s, budget)
			if skip {
				i++
				continue
			}
		}
		if !ok {
			if len(r.running) == 0 && r.releaseLoaded() {
				continue // try s again
			}
			break
		}
		r.startRunningAt(i, n)
		budget -= n
	}
}

// releaseLoaded makes the waiting requests whose loads ended give their GPU blocks back and
// start over, as if preempted, recomputing instead of loading again (so that they cannot
// take the blocks back by loading again, for ever), and reports whether any did. The
// scheduler calls it before it preempts a running request for blocks, and when nothing runs
// and the request it must admit next does not fit: those blocks are then the only ones that
// can let it in. (vLLM would wait for ever or preempt in a loop here; a replica sized as
// vLLM is deployed hardly gets here, but a tiny simulated one would lose requests.)
func (r *Replica) releaseLoaded() bool {
	released := false
	for _, s := range r.waiting {
		if s.load != loadDone {
			continue
		}
		r.pool.release(s.blocks)
		s.blocks = s.blocks[:0]
		s.load, s.computed, s.reg, s.cpuHit, s.noLoad = loadNone, 0, 0, 0, true
		released = true
	}
	return released
}

// admitOrLoad looks up the GPU prefix cache, then the CPU tier past the GPU hit. On a CPU hit
// it allocates the blocks and starts the load (skip: s stays waiting); otherwise it admits s
// as admit does. skip is also true when the tier cannot answer yet (loads at their cap, or a
// hit block already being loaded).
func (r *Replica) admitOrLoad(s *seq, budget int) (n int, ok, skip bool) {
	o := r.off
	total := s.numTokens()
	freeHits := r.lookupHits(s, total)
	if o.noGPUHits {
		r.hits, freeHits = r.hits[:0], 0
	}
	hit := len(r.hits) * r.bs
	tokens, retry := r.matchCPU(s, total, hit)
	switch {
	case retry:
		return 0, false, true
	case tokens > 0:
		if !r.startLoad(s, total, hit, tokens, freeHits) {
			return 0, false, false
		}
		r.countExternal(s, total, tokens)
		return 0, false, true
	}
	n, ok = r.admitHits(s, budget, total, freeHits)
	if ok {
		r.countExternal(s, total, 0)
	}
	return n, ok, false
}

// matchCPU returns how many tokens past hit (the GPU hit) s can load from the tier
// (OffloadingConnectorScheduler.get_num_new_matched_tokens): whole offloaded blocks from the
// one holding token hit, consecutive and ready, at least one block's worth; 0 otherwise.
// retry says the tier cannot answer this step.
func (r *Replica) matchCPU(s *seq, total, hit int) (tokens int, retry bool) {
	o := r.off
	if s.noLoad {
		return 0, false
	}
	nb := min(total/o.bs, r.hashUpTo(s, total/o.bs*o.factor)/o.factor)
	all := o.cpuHashes(s, 0, nb, o.buf[:0])
	o.buf = all
	o.tier.touch(all)
	if nb*o.bs-hit < o.bs {
		return 0, false
	}
	if o.loads >= r.maxSeqs {
		return 0, true
	}
	start := hit / o.bs
	hits := o.tier.lookup(all[start:])
	if hits == 0 {
		return 0, false
	}
	if o.tier.loading(all[start : start+hits]) {
		return 0, true
	}
	if tokens = o.bs*(start+hits) - hit; tokens < o.bs {
		return 0, false
	}
	return tokens, false
}

// startLoad allocates GPU blocks for s's GPU hit plus the tokens it loads, as admit would
// for a chunk of that size, and starts the load. It is false, changing nothing, when the
// free queue is too short.
func (r *Replica) startLoad(s *seq, total, hit, tokens, freeHits int) bool {
	need := r.blocksFor(hit+tokens) - len(r.hits)
	fit := need
	if r.sem.ReserveFullPrompt {
		fit = r.blocksFor(total) - len(r.hits)
	}
	if fit > r.pool.numFree-freeHits {
		return false
	}
	r.claimBlocks(s, total, hit, need)
	r.off.startLoad(r, s, hit, tokens)
	return true
}

// claimBlocks gives s, whose KV arrives from elsewhere (a CPU tier, a prefill replica), the
// GPU blocks of its prefix hit (r.hits, hit tokens) and need free ones after them, and counts
// the hit; the caller checked that need blocks are free.
func (r *Replica) claimBlocks(s *seq, total, hit, need int) {
	for _, b := range r.hits {
		r.pool.touch(b)
	}
	if c := r.blocksFor(s.promptLen + s.outputLen); cap(s.blocks) < c {
		s.blocks = make([]int32, 0, c)
	}
	s.blocks = append(s.blocks[:0], r.hits...)
	s.computed, s.reg = hit, len(r.hits)
	s.blocks = r.pool.popRun(s.blocks, need)
	r.countPrefix(s, total, hit)
}

// startLoad pins the offloaded blocks s loads and queues their copy; the request waits for
// it (or for the load timeout).
func (o *offloader) startLoad(r *Replica, s *seq, hit, tokens int) {
	start, end := hit/o.bs, (hit+tokens)/o.bs
	job := &loadJob{s: s, gpuHit: hit, tokens: tokens, epoch: o.epoch, hashes: o.cpuHashes(s, start, end, nil)}
	o.tier.pin(job.hashes)
	o.jobs[s] = job
	o.loads++
	s.load, s.offNext = loadInFlight, int32(end) // what it loads is in the tier already
	now := r.k.Now()
	bytes := int64(tokens) * o.tokenBytes
	d, at := o.transfer(now, bytes)
	if at-now > o.timeout {
		r.k.Schedule(now+o.timeout, r.cfg.Priority, func(t sim.Time) { r.loadEnded(job, t, false) })
		return
	}
	r.k.Schedule(at, r.cfg.Priority, func(t sim.Time) {
		if job.epoch == o.epoch && !job.cancelled {
			r.m.OffloadLoads++
			r.m.OffloadLoadBytes += bytes * o.gpus
			r.m.OffloadLoadTime += d
			if r.hooks.Transfer != nil {
				r.hooks.Transfer(false, bytes*o.gpus, d)
			}
		}
		r.loadEnded(job, t, true)
	})
}

// loadEnded ends job: loaded (ok) its blocks are cached and count as computed, as
// _update_waiting_for_remote_kv does (a load of the whole sequence still recomputes its
// last token); abandoned (the timeout) the request recomputes them. Either way it goes
// back to waiting with its blocks.
func (r *Replica) loadEnded(job *loadJob, now sim.Time, ok bool) {
	o := r.off
	if job.cancelled || job.epoch != o.epoch {
		return
	}
	delete(o.jobs, job.s)
	o.loads--
	o.tier.unpin(job.hashes)
	s := job.s
	s.load = loadDone
	if ok {
		s.computed = min(job.gpuHit+job.tokens, s.numTokens()-1)
		r.register(s, r.fullBlocks(job.gpuHit+job.tokens))
		s.cpuHit = int32(s.computed - job.gpuHit)
	} else {
		s.noLoad, s.cpuHit = true, 0
	}
	r.kick(now)
}

// admitLoaded admits waiting request s, whose load ended: it schedules the tokens left
// within budget, allocating what they need beyond the blocks s holds.
func (r *Replica) admitLoaded(s *seq, budget int) (int, bool) {
	total := s.numTokens()
	n := min(total-s.computed, budget)
	need := r.blocksFor(s.computed+n) - len(s.blocks)
	fit := need
	if r.sem.ReserveFullPrompt {
		fit = r.blocksFor(total) - len(s.blocks)
	}
	if fit > r.pool.numFree {
		return 0, false
	}
	if need > 0 {
		s.blocks = r.pool.popRun(s.blocks, need)
	}
	r.register(s, r.fullBlocks(s.computed+n))
	s.load = loadNone
	if !s.cachedOnce {
		s.scheduledAt = r.k.Now()
		s.cachedOnce, s.cached = true, s.computed
		r.m.PromptTokens += int64(len(s.req.Prompt))
	}
	return n, true
}

// startRunningAt moves waiting request i, admitted with n tokens, to running, as
// startRunning does the head.
func (r *Replica) startRunningAt(i, n int) {
	if i == 0 {
		r.startRunning(n)
		return
	}
	s := r.waiting[i]
	copy(r.waiting[i:], r.waiting[i+1:])
	r.waiting[len(r.waiting)-1] = nil
	r.waiting = r.waiting[:len(r.waiting)-1]
	r.running = append(r.running, s)
	r.due = append(r.due, 0)
	r.expl = append(r.expl, int32(len(r.running)-1))
	s.scheduled = n
	r.batch = append(r.batch, s)
}

// countExternal records a lookup of the tier in vllm:external_prefix_cache_queries and
// _hits (the connector's prefix cache stats), under the rule admit applies to its own.
func (r *Replica) countExternal(s *seq, total, hit int) {
	if s.preemptions == 0 || !r.sem.SkipPreemptedStats {
		r.m.ExternalQueries += int64(total)
		r.m.ExternalHits += int64(hit)
	}
}

// noteStore notes the offloaded blocks of s that are complete once this step's tokens are
// computed (its registered blocks; prompt blocks only unless Decode) and not yet offered to
// the tier (_get_reqs_to_store). They are offered when the step ends.
func (o *offloader) noteStore(r *Replica, s *seq) {
	limit := s.reg
	if !o.decode {
		limit = min(limit, r.fullBlocks(s.promptLen))
	}
	n := limit / o.factor
	if n <= int(s.offNext) {
		return
	}
	o.pending = append(o.pending, storeReq{s: s, from: int(s.offNext), to: n})
	s.offNext = int32(n)
}

// flushStores offers the tier the blocks noted this step, which the step ending at now has
// computed: each request's new blocks are one store, skipped when the tier cannot make
// room.
func (r *Replica) flushStores(now sim.Time) {
	o := r.off
	for _, p := range o.pending {
		r.store(p, now)
	}
	clear(o.pending)
	o.pending = o.pending[:0]
}

// store offers the tier p's blocks (prepare_store) and queues the copy of those it lacks,
// holding their GPU blocks until it ends.
func (r *Replica) store(p storeReq, now sim.Time) {
	o, s := r.off, p.s
	hashes := o.cpuHashes(s, p.from, p.to, o.buf[:0])
	o.buf = hashes
	toStore, evicted, ok := o.tier.prepareStore(hashes, o.toStore, o.evicted)
	o.toStore, o.evicted = toStore, evicted
	r.announceCPU(evicted, false)
	if !ok {
		return // skipped: vLLM offers these blocks again at the request's next step; here they are given up
	}
	o.buf2 = o.cpuHashes(s, 0, p.to, o.buf2[:0])
	o.tier.touch(o.buf2)
	if len(toStore) == 0 {
		return
	}
	job := &storeJob{hashes: append([]uint64(nil), toStore...), epoch: o.epoch}
	k := 0
	for j, h := range hashes {
		if k < len(toStore) && toStore[k] == h {
			job.blocks = append(job.blocks, s.blocks[(p.from+j)*o.factor:(p.from+j+1)*o.factor]...)
			k++
		}
	}
	for _, b := range job.blocks {
		r.pool.touch(b)
	}
	job.bytes = int64(len(job.blocks)*r.bs) * o.tokenBytes
	var at sim.Time
	job.dur, at = o.transfer(now, job.bytes)
	r.k.Schedule(at, r.cfg.Priority, func(t sim.Time) { r.storeEnded(job, t) })
}

// storeEnded makes job's blocks ready in the tier (complete_store, a BlockStored event with
// medium CPU) and lets go of its GPU blocks.
func (r *Replica) storeEnded(job *storeJob, now sim.Time) {
	o := r.off
	if job.epoch != o.epoch {
		return
	}
	o.stored = o.tier.completeStore(job.hashes, o.stored)
	r.announceCPU(o.stored, true)
	r.pool.release(job.blocks)
	r.m.OffloadStores++
	r.m.OffloadStoreBytes += job.bytes * o.gpus
	r.m.OffloadStoreTime += job.dur
	if r.hooks.Transfer != nil {
		r.hooks.Transfer(true, job.bytes*o.gpus, job.dur)
	}
	if len(r.waiting) > 0 {
		r.kick(now)
	}
}

// announceCPU publishes a KV event for each of hashes in the CPU tier, as the connector's
// take_events does: token-less, no parent, the offloaded block size.
func (r *Replica) announceCPU(hashes []uint64, stored bool) {
	if r.hooks.KV == nil {
		return
	}
	for _, h := range hashes {
		r.hooks.KV(KVEvent{Stored: stored, Hash: h, Medium: MediumCPU, BlockSize: r.off.bs})
	}
}

// loadJob returns waiting request s's load from the CPU tier, nil when it has none (no tier,
// or a decode leg's read, which RemoteKVDone will find gone).
func (r *Replica) loadJob(s *seq) *loadJob {
	if r.off == nil {
		return nil
	}
	return r.off.jobs[s]
}

// dropLoad lets go of what waiting request s holds for a load or a read (it was aborted):
// the pinned offloaded blocks and its GPU blocks.
func (r *Replica) dropLoad(s *seq) {
	if s.load == loadNone {
		return
	}
	if job := r.loadJob(s); job != nil {
		job.cancelled = true
		delete(r.off.jobs, s)
		r.off.loads--
		r.off.tier.unpin(job.hashes)
	}
	r.pool.release(s.blocks)
	s.blocks = s.blocks[:0]
	s.load = loadNone
}
