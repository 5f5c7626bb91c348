package engine

// This file is the engine as it was before its performance work, renamed (refReplica,
// refSeq, refPool), plus the release rules (Semantics) written the plain way: the oracle of
// the differential test in equivalence_test.go.

import (
	"errors"
	"fmt"
	"time"

	"kvroute/gpumodel"
	"kvroute/sim"
)

// refReplica is one simulated vLLM V1 engine.
type refReplica struct {
	k        *sim.Kernel
	cfg      Config
	hooks    Hooks
	pricer   *gpumodel.Pricer
	gpu      *gpumodel.Pricer
	sem      Semantics
	pool     *refPool
	bs       int
	maxBatch int
	maxSeqs  int

	waiting []*refSeq // FIFO; preempted requests go to the front
	running []*refSeq // admission order; the newest is preempted first
	batch   []*refSeq
	scratch []int32
	hits    []int32

	stepping bool        // a step is in progress or about to start
	stepEnd  sim.EventID // the pending end-of-step event
	down     bool
	start    sim.Time // when the step in flight started
	cutoff   sim.Time // latest arrival the step being scheduled admits
	nonce    uint64
	m        Metrics
	off      *refOffload           // the CPU tier (reference_offload_test.go), or nil
	held     map[*Request]*refHeld // prefill legs' blocks (reference_pd_test.go)
	pdDecode bool
}

// New returns an idle replica on kernel k.
func newRef(k *sim.Kernel, cfg Config, hooks Hooks) (*refReplica, error) {
	d := cfg.Deployment
	if err := d.Validate(); err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	pricer, err := gpumodel.NewPricer(d)
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	n := cfg.NumBlocks
	if n <= 0 {
		n = d.KVBlocks()
	}
	rel := cfg.Release
	if rel.Name == "" {
		rel = NewestRelease
	}
	usable := n
	if rel.NullBlock {
		usable--
	}
	if usable <= 0 {
		return nil, errors.New("engine: the deployment leaves no memory for KV cache")
	}
	r := &refReplica{k: k, cfg: cfg, hooks: hooks, pricer: pricer, pool: newRefPool(usable, rel.Semantics),
		bs: d.BlockSize, maxBatch: d.MaxNumBatchedTokens, maxSeqs: d.MaxNumSeqs, sem: rel.Semantics}
	r.m.NumGPUBlocks, r.m.BlockSize = n, d.BlockSize
	if cfg.Offload.Enabled() {
		r.off = newRefOffload(r)
	}
	if rel.AsyncScheduling {
		g := d
		g.Overheads.PerStep, g.Overheads.PerRequest = 0, 0
		if r.gpu, err = gpumodel.NewPricer(g); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Metrics returns the replica's current metrics.
func (r *refReplica) Metrics() Metrics {
	m := r.m
	m.Running, m.Waiting = len(r.running), len(r.waiting)
	m.KVUsage = float64(r.pool.used()) / float64(r.pool.size())
	return m
}

// Down reports whether the replica has failed and not recovered.
func (r *refReplica) Down() bool { return r.down }

// Submit hands a request to the replica at the kernel's current time. A request that can never
// fit in the KV cache, or that reaches a failed replica, ends at once (Rejected or Aborted).
func (r *refReplica) Submit(req *Request) {
	now := r.k.Now()
	r.nonce++
	s := &refSeq{req: req, arrival: now, hashable: -1, nonce: r.nonce, hashOutput: r.sem.HashOutput}
	switch {
	case r.down:
		r.end(s, Aborted, now)
		return
	case req.OutputTokens < 1 || len(req.Prompt) == 0 || r.blocksFor(len(req.Prompt)+req.OutputTokens) > r.pool.size(),
		req.PD == PDPrefill && req.OutputTokens != 1:
		r.end(s, Rejected, now)
		return
	}
	if req.PD == PDDecode {
		s.pd, r.pdDecode = pdUnread, true
	}
	r.waiting = append(r.waiting, s)
	r.kick(now)
}

// kick starts a step at now unless one is running.
func (r *refReplica) kick(now sim.Time) {
	if r.stepping {
		return
	}
	r.stepping = true
	r.k.Schedule(now, r.cfg.Priority, func(now sim.Time) { r.startStep(now, false) })
}

func (r *refReplica) blocksFor(tokens int) int { return (tokens + r.bs - 1) / r.bs }

// startStep schedules a batch and arranges its end.
func (r *refReplica) startStep(now sim.Time, behind bool) {
	if r.down {
		r.stepping = false
		return
	}
	r.cutoff = now
	if behind && r.sem.AsyncScheduling {
		r.cutoff = r.start // the batch queue scheduled this batch when the last one started
	}
	step := r.schedule()
	if len(r.batch) == 0 && r.cutoff < now {
		r.cutoff, behind = now, false
		step = r.schedule()
	}
	if len(r.batch) == 0 {
		r.stepping = false
		return
	}
	var d time.Duration
	switch {
	case r.cfg.StepTime != nil:
		d = r.cfg.StepTime(step)
	case behind && r.gpu != nil:
		o := r.cfg.Deployment.Overheads
		cpu := o.PerStep + time.Duration(step.PrefillChunks+step.DecodeSeqs)*o.PerRequest
		d = max(r.gpu.StepTime(step), cpu)
	default:
		d = r.pricer.StepTime(step)
	}
	d = max(d, time.Nanosecond) // time must advance
	r.start = now
	r.stepEnd = r.k.Schedule(now+sim.Time(d), r.cfg.Priority, func(at sim.Time) { r.endStep(at, d, step) })
}

// endStep applies the batch's tokens, then starts the next step at once.
func (r *refReplica) endStep(now sim.Time, d time.Duration, step gpumodel.Step) {
	r.stepEnd = 0
	if r.off != nil {
		r.flushOff(now)
	}
	finished := false
	for _, s := range r.batch {
		s.computed += s.scheduled
		s.scheduled = 0
		if s.computed < s.numTokens() {
			continue // a prefill chunk: no token yet
		}
		s.generated++
		r.m.GenerationTokens++
		if s.generated == 1 && s.firstToken == 0 {
			s.firstToken = now
			if r.hooks.FirstToken != nil {
				r.hooks.FirstToken(s.req, now)
			}
		}
		if s.generated >= s.req.OutputTokens {
			if s.req.PD == PDPrefill {
				r.holdRef(s)
			} else {
				r.pool.release(s.blocks)
			}
			s.blocks = nil
			s.generated = -s.generated // mark finished until running is compacted
			finished = true
		}
	}
	if r.hooks.Step != nil {
		r.hooks.Step(now, d, step)
	}
	if finished {
		r.compactFinished(now)
	}
	r.batch = r.batch[:0]
	r.startStep(now, true)
}

// compactFinished removes finished requests from running, in order, and reports them.
func (r *refReplica) compactFinished(now sim.Time) {
	kept := r.running[:0]
	for _, s := range r.running {
		if s.generated >= 0 {
			kept = append(kept, s)
			continue
		}
		s.generated = -s.generated
		r.m.Completed++
		r.end(s, Completed, now)
	}
	clear(r.running[len(kept):])
	r.running = kept
}

// end reports a request's result.
func (r *refReplica) end(s *refSeq, st Status, now sim.Time) {
	if r.hooks.Done == nil {
		return
	}
	r.hooks.Done(Result{
		Request: s.req, Status: st, Arrival: s.arrival, FirstToken: s.firstToken, Finish: now,
		PromptTokens: len(s.req.Prompt), CachedTokens: s.cached, CPUCachedTokens: s.cpuHit,
		RemoteTokens: s.remote, OutputTokens: max(s.generated, 0), Preemptions: s.preemptions,
	})
}

// Fail takes the replica down at the kernel's current time: every queued and running request
// ends Aborted, the KV cache is cleared, and new requests are aborted until Recover.
func (r *refReplica) Fail() {
	now := r.k.Now()
	if r.stepEnd != 0 {
		r.k.Cancel(r.stepEnd)
		r.stepEnd = 0
	}
	r.down, r.stepping = true, false
	all := append(append([]*refSeq(nil), r.running...), r.waiting...)
	r.running, r.waiting, r.batch = nil, nil, r.batch[:0]
	r.pool.clearAll()
	for _, h := range r.held {
		r.k.Cancel(h.timeout)
	}
	r.held = nil
	if r.off != nil {
		r.resetOff(now)
	}
	for _, s := range all {
		s.generated = max(s.generated, -s.generated)
		r.end(s, Aborted, now)
	}
}

// Recover brings a failed replica back, empty.
func (r *refReplica) Recover() { r.down = false }

// schedule builds the next batch into r.batch, as vLLM V1's scheduler does, and returns its
// shape for pricing.
func (r *refReplica) schedule() gpumodel.Step {
	budget := r.maxBatch
	r.batch = r.batch[:0]
	preempted := false
	for i := 0; i < len(r.running) && budget > 0; {
		s := r.running[i]
		n := min(s.numTokens()-s.computed, budget)
		total := s.computed + n
		if total <= len(s.blocks)*r.bs && total/r.bs <= s.reg {
			// Fast path (most decode steps): the blocks exist and no block fills up.
			s.scheduled = n
			budget -= n
			r.batch = append(r.batch, s)
			i++
			continue
		}
		ok := r.allocate(s, total)
		for !ok {
			if r.holdsWaiting() && r.releaseLoadedOff() {
				ok = r.allocate(s, total)
				continue
			}
			victim := r.running[len(r.running)-1]
			r.preempt(victim)
			preempted = true
			if victim == s {
				break
			}
			ok = r.allocate(s, total)
		}
		if !ok {
			continue // s itself was preempted; running shrank
		}
		s.scheduled = n
		budget -= n
		r.batch = append(r.batch, s)
		i++
	}
	if r.holdsWaiting() && (!preempted || len(r.running) == 0) {
		budget = r.scheduleWaitingOff(budget)
	}
	for !r.holdsWaiting() && !preempted && len(r.waiting) > 0 && budget > 0 && len(r.running) < r.maxSeqs {
		s := r.waiting[0]
		if s.arrival > r.cutoff {
			break
		}
		n, ok := r.admit(s, budget)
		if !ok {
			break
		}
		r.waiting[0] = nil
		r.waiting = r.waiting[1:]
		r.running = append(r.running, s)
		s.scheduled = n
		budget -= n
		r.batch = append(r.batch, s)
	}
	var step gpumodel.Step
	for _, s := range r.batch {
		if s.scheduled == 1 && s.generated > 0 && s.computed == s.numTokens()-1 {
			step.AddDecode(s.computed)
		} else {
			step.AddPrefill(s.scheduled, s.computed)
		}
	}
	return step
}

// allocate gives s blocks for its first total tokens, registering in the cache every block
// that will be full once they are computed. It fails, changing nothing, when the free queue is
// too short.
func (r *refReplica) allocate(s *refSeq, total int) bool {
	need := r.blocksFor(total) - len(s.blocks)
	if need > r.pool.numFree {
		return false
	}
	for range need {
		s.blocks = append(s.blocks, r.pool.popFree())
	}
	r.register(s, total/r.bs)
	return true
}

// register caches s's first full blocks, up to full, whose tokens are known.
func (r *refReplica) register(s *refSeq, full int) {
	known := min(s.hashUpTo(full, r.bs, &r.scratch), len(s.blocks))
	for ; s.reg < known; s.reg++ {
		r.pool.cache(s.blocks[s.reg], s.hashes[s.reg])
	}
	if r.off != nil {
		r.noteStoreOff(s)
	}
}

// admit looks up the prefix cache for waiting request s and allocates what its first chunk
// needs within budget. It returns the tokens scheduled, or false (changing nothing) when the
// blocks are not there.
func (r *refReplica) admit(s *refSeq, budget int) (int, bool) {
	total := s.numTokens()
	maxHit := (total - 1) / r.bs // a full hit still recomputes the last token
	known := s.hashUpTo(maxHit, r.bs, &r.scratch)
	r.hits = r.hits[:0]
	freeHits := 0
	for j := 0; j < known; j++ {
		b, ok := r.pool.lookup(s.hashes[j])
		if !ok {
			break
		}
		r.hits = append(r.hits, b)
		if r.pool.ref[b] == 0 {
			freeHits++
		}
	}
	return r.allocAdmit(s, budget, total, len(r.hits)*r.bs, freeHits)
}

// allocAdmit allocates what s's first chunk needs beyond its hits (r.hits, hit tokens,
// freeHits of them free) within budget.
func (r *refReplica) allocAdmit(s *refSeq, budget, total, hit, freeHits int) (int, bool) {
	n := min(total-hit, budget)
	need := r.blocksFor(hit+n) - len(r.hits)
	fit := need
	if r.sem.ReserveFullPrompt {
		fit = r.blocksFor(total) - len(r.hits)
	}
	if fit > r.pool.numFree-freeHits {
		return 0, false
	}
	for _, b := range r.hits {
		r.pool.touch(b)
	}
	s.blocks = append(s.blocks[:0], r.hits...)
	s.computed = hit
	s.reg = len(r.hits)
	for range need {
		s.blocks = append(s.blocks, r.pool.popFree())
	}
	r.register(s, (hit+n)/r.bs)
	if s.preemptions == 0 || !r.sem.SkipPreemptedStats {
		r.m.PrefixQueries += int64(total)
		r.m.PrefixHits += int64(hit)
	}
	if !s.cachedOnce {
		s.cachedOnce, s.cached = true, hit
		r.m.PromptTokens += int64(len(s.req.Prompt))
	}
	return n, true
}

// preempt frees the newest running request's blocks and puts it at the front of the queue, to
// be recomputed (vLLM V1 preempts by recompute only).
func (r *refReplica) preempt(v *refSeq) {
	r.running[len(r.running)-1] = nil
	r.running = r.running[:len(r.running)-1]
	r.pool.release(v.blocks)
	v.blocks = v.blocks[:0]
	v.computed = 0
	v.reg = 0
	v.preemptions++
	r.m.Preemptions++
	r.waiting = append(r.waiting, nil)
	copy(r.waiting[1:], r.waiting)
	r.waiting[0] = v
}

// refSeq is the replica's state for one request.
type refSeq struct {
	req         *Request
	arrival     sim.Time
	firstToken  sim.Time
	blocks      []int32  // block table
	hashes      []uint64 // hashes of the full blocks known so far (prompt, then answer)
	computed    int      // tokens whose KV is computed
	generated   int      // output tokens emitted
	cachedOnce  bool     // CachedTokens has been recorded
	cached      int
	preemptions int
	scheduled   int // tokens scheduled in the current step
	reg         int // leading blocks whose hashes were offered to the cache
	hashable    int // full blocks whose tokens are known; -1 until the first unknown token
	nonce       uint64
	hashOutput  bool
	offNext     int   // the next offloaded block to store
	cpuHit      int   // tokens loaded from the CPU tier
	load        uint8 // loadNone, loadInFlight or loadDone
	noLoad      bool  // a load timed out
	pd          uint8 // a decode leg's read (pd.go)
	remote      int   // tokens a decode leg read
}

// holdsWaiting reports whether waiting requests may hold blocks.
func (r *refReplica) holdsWaiting() bool { return r.off != nil || r.pdDecode }

// numTokens is the prompt plus the tokens generated so far.
func (s *refSeq) numTokens() int { return len(s.req.Prompt) + s.generated }

// token returns token i of the sequence (prompt, then generated), and whether it is known.
func (s *refSeq) token(i int) (int32, bool) {
	if i < len(s.req.Prompt) {
		return s.req.Prompt[i], true
	}
	j := i - len(s.req.Prompt)
	if j < len(s.req.Answer) {
		return s.req.Answer[j], true
	}
	if s.hashOutput && j < s.req.OutputTokens {
		return OutputToken(s.nonce, i), true
	}
	return 0, false
}

// hashUpTo extends the block hashes to cover the first n full blocks when their tokens are
// known (prompt tokens always; generated ones only with an Answer). It returns how many
// full-block hashes are available.
func (s *refSeq) hashUpTo(n, blockSize int, scratch *[]int32) int {
	if s.hashable >= 0 && n > s.hashable {
		n = s.hashable
	}
	for len(s.hashes) < n {
		j := len(s.hashes)
		buf := (*scratch)[:0]
		for i := j * blockSize; i < (j+1)*blockSize; i++ {
			t, ok := s.token(i)
			if !ok {
				*scratch = buf
				s.hashable = len(s.hashes) // generated tokens without an Answer are never known
				return len(s.hashes)
			}
			buf = append(buf, t)
		}
		*scratch = buf
		parent := s.req.Salt
		if j > 0 {
			parent = s.hashes[j-1]
		}
		s.hashes = append(s.hashes, BlockHash(parent, buf))
	}
	return n
}
