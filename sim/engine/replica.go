package engine

import (
	"errors"
	"fmt"
	"math/bits"
	"time"

	"kvroute/gpumodel"
	"kvroute/sim"
)

// Config configures a replica.
type Config struct {
	// Deployment gives the KV capacity, the batch limits and the step pricing.
	Deployment gpumodel.Deployment
	// NumBlocks overrides the KV capacity in blocks when > 0 (vLLM's num_gpu_blocks_override).
	NumBlocks int
	// StepTime overrides step pricing when not nil (tests use fixed step times).
	StepTime func(gpumodel.Step) time.Duration
	// Stretch, when not nil, is applied to each step's duration once priced (the emulator's
	// injected slowdown); it sees the step start, so it may note when the step ends.
	Stretch func(time.Duration) time.Duration
	// Priority orders the replica's step events against other events at the same time.
	Priority sim.Prio
	// Release is the vLLM release whose semantics the replica follows; the zero value means
	// NewestRelease.
	Release Release
	// SchedulerSteps is vLLM V0's --num-scheduler-steps: a decode batch runs this many steps
	// per schedule (0 or 1: one). Only a release with Semantics.V0Scheduler takes it.
	SchedulerSteps int
	// Memo, when set, is a hash memo shared with other replicas on the same kernel; otherwise
	// the replica keeps its own. Sharing changes no result, only speed.
	Memo *HashMemo
	// Offload gives the replica a CPU KV tier (the zero value: none).
	Offload OffloadConfig
	// KVTransfer is the replica's side of prefill/decode disaggregation (pd.go): how long a
	// prefill leg's blocks wait for their reader, and what a failed read does.
	KVTransfer KVTransferConfig
}

// Hooks receive a replica's events. Nil hooks are skipped.
type Hooks struct {
	// FirstToken is called when a request emits its first output token.
	FirstToken func(r *Request, at sim.Time)
	// Done is called exactly once per submitted request, when it ends in any state.
	Done func(Result)
	// Step is called at the end of each step with its duration and its shape; every decoding
	// sequence's inter-token latency for that token is the step's duration.
	Step func(at sim.Time, d time.Duration, s gpumodel.Step)
	// KV, when set, hears the prefix cache change, as vLLM's KV events report it: a block
	// hash stored or removed, or the whole cache cleared (the replica failed).
	KV func(KVEvent)
	// Transfer, when set, hears each CPU-tier copy that ends: a store (toCPU) or a load, its
	// bytes over all the replica's GPUs and its duration (vLLM's offload metrics).
	Transfer func(toCPU bool, bytes int64, d time.Duration)
	// RemoteRead, when set, hears a decode leg (PDDecode) take its blocks: the caller reads
	// tokens prompt tokens (those it does not hold locally) from the prefill replica, then
	// calls RemoteKVDone from an event of its own.
	RemoteRead func(req *Request, tokens int)
}

// KVEvent is one change of a replica's prefix cache: BlockStored (Stored), BlockRemoved, or
// AllBlocksCleared (Cleared). Hash is the block's chained hash (BlockHash).
type KVEvent struct {
	Stored, Cleared bool
	Hash            uint64
	// Medium is where the block is stored or removed: the GPU's prefix cache, or the CPU
	// tier, whose events carry no tokens and no parent, and whose Hash is that of the last
	// GPU block of the offloaded block.
	Medium Medium
	// BlockSize is the block's size in tokens for a CPU event (the offloaded block size); 0
	// for a GPU event (the replica's block size).
	BlockSize int
	// For a stored block, what vLLM's BlockStored carries besides the hash: the block's
	// token ids (valid only during the call) and its parent's hash (HasParent false for a
	// request's first block, whose parent is the request's Salt).
	Tokens    []int32
	Parent    uint64
	HasParent bool
	// First marks a stored block that starts a BlockStored event: vLLM publishes the blocks
	// one request caches in one step as one event (block_pool.py cache_full_blocks).
	First bool
}

// Metrics is what the replica's vLLM /metrics endpoint would show.
type Metrics struct {
	// Running and Waiting are vllm:num_requests_running and vllm:num_requests_waiting.
	Running, Waiting int
	// KVUsage is vllm:kv_cache_usage_perc: blocks in use over all blocks, 0..1.
	KVUsage float64
	// NumGPUBlocks and BlockSize are from vllm:cache_config_info.
	NumGPUBlocks, BlockSize int
	// PrefixQueries and PrefixHits are vllm:prefix_cache_queries_total and _hits_total, in
	// tokens, counted when a request is admitted from the waiting queue.
	PrefixQueries, PrefixHits int64
	// Preemptions is vllm:num_preemptions_total.
	Preemptions int64
	// PromptTokens and GenerationTokens are vllm:prompt_tokens_total and
	// vllm:generation_tokens_total.
	PromptTokens, GenerationTokens int64
	// Completed counts requests that finished normally.
	Completed int64
	// ExternalQueries and ExternalHits are vllm:external_prefix_cache_queries and _hits, in
	// tokens: the CPU tier's lookups when requests are admitted (0 without a tier).
	ExternalQueries, ExternalHits int64
	// OffloadStores and OffloadLoads count the CPU tier's transfers that ended;
	// OffloadStoreBytes and OffloadLoadBytes the bytes they moved over all the replica's
	// GPUs (vllm:kv_offload_total_bytes for GPU_to_CPU and CPU_to_GPU), and
	// OffloadStoreTime and OffloadLoadTime their durations (vllm:kv_offload_total_time).
	OffloadStores, OffloadLoads         int64
	OffloadStoreBytes, OffloadLoadBytes int64
	OffloadStoreTime, OffloadLoadTime   time.Duration
}

// Replica is one simulated vLLM V1 engine.
type Replica struct {
	k        *sim.Kernel
	cfg      Config
	hooks    Hooks
	pricer   *gpumodel.Pricer
	gpu      *gpumodel.Pricer // pricer without the CPU overheads (AsyncScheduling)
	cpuStep  time.Duration    // CPU time per step and per scheduled request (AsyncScheduling)
	cpuReq   time.Duration
	sem      Semantics
	private  bool // defer caching generated blocks only the request can hit (see catchUp)
	pool     *blockPool
	bs       int
	bsShift  int // log2(bs) when bs is a power of two, else -1 (fullBlocks)
	maxBatch int
	maxSeqs  int

	storing      *seq    // the sequence whose blocks register is caching (KV hook only)
	storingBlock int     // and the block
	storingNew   bool    // no block of this register call was published yet
	kvTokens     []int32 // a stored block's tokens, handed to the KV hook

	waiting  []*seq  // FIFO; preempted requests go to the front
	waitBase []*seq  // the waiting queue's array from its start (see pushWaiting)
	running  []*seq  // admission order; the newest is preempted first
	due      []int64 // per running request: the step it must next be handled on its own (lazy.go)
	batch    []*seq  // the step's requests handled one by one; lazy decoders are implied
	gone     []int32 // the positions in running of the requests that ended this step (settle)
	// expl holds, in order, the positions in running of the requests handled on their own
	// this step (due by r.tick): prepareLazy finds them and admissions append theirs, so
	// that scheduleRunning and settle need not read due again. Positions past the end of
	// running (preempted) are ignored. scanAll (set by Abort) makes settle read due.
	expl    []int32
	scanAll bool
	spare   []*seq // ended requests' state, for Submit to reuse (recycle)
	scratch []int32
	memo    *HashMemo
	hits    []int32

	tick int64 // steps ended so far
	// burstLeft is how many steps of the V0 decode burst in flight remain, and outFirst and
	// outDone the requests whose first token or completion V0 reports as the next step ends
	// (schedule_v0.go).
	burstLeft int
	outFirst  []*seq
	outDone   []*seq
	lazyN     int   // lazy decoders
	lazyCtx   int64 // Σ over lazy decoders of computed − t0

	stepping  bool        // a step is in progress or about to start
	stepEnd   sim.EventID // the pending end-of-step event
	stepDur   time.Duration
	stepShape gpumodel.Step
	startFn   func(sim.Time) // r.kicked and r.endStep, bound once
	endFn     func(sim.Time)
	lastStart sim.Time // when the step in flight started
	cutoff    sim.Time // AsyncScheduling: the latest arrival the step being scheduled admits
	nonce     uint64   // requests submitted so far: seeds each one's generated tokens
	down      bool
	m         Metrics
	off       *offloader           // the CPU tier, or nil
	held      map[*Request]*heldKV // prefill legs' blocks waiting for their readers (pd.go)
	pdDecode  bool                 // a decode leg was submitted: waiting requests may hold blocks
}

// New returns an idle replica on kernel k.
func New(k *sim.Kernel, cfg Config, hooks Hooks) (*Replica, error) {
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
	if err := rel.CheckSchedulerSteps(cfg.SchedulerSteps); err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	usable := n
	if rel.NullBlock {
		usable-- // block 0 is vLLM's null block
	}
	if usable <= 0 {
		return nil, errors.New("engine: the deployment leaves no memory for KV cache")
	}
	if usable > maxBlocks {
		return nil, fmt.Errorf("engine: %d KV blocks, more than the %d a replica's tables index", usable, maxBlocks)
	}
	r := &Replica{k: k, cfg: cfg, hooks: hooks, pricer: pricer, pool: newBlockPool(usable, rel.Semantics),
		bs: d.BlockSize, maxBatch: d.MaxNumBatchedTokens, maxSeqs: d.MaxNumSeqs, sem: rel.Semantics}
	r.m.NumGPUBlocks, r.m.BlockSize = n, d.BlockSize
	r.bsShift = -1
	if r.bs&(r.bs-1) == 0 {
		r.bsShift = bits.TrailingZeros(uint(r.bs))
	}
	if rel.AsyncScheduling {
		if err := r.splitCPU(d); err != nil {
			return nil, err
		}
	}
	if r.memo = cfg.Memo; r.memo == nil {
		r.memo = NewHashMemo(memoSlots)
	}
	r.startFn, r.endFn = r.kicked, r.endStep
	r.private = rel.HashOutput && hooks.KV == nil
	if err := r.setupOffload(cfg, rel); err != nil {
		return nil, err
	}
	if err := cfg.KVTransfer.Validate(); err != nil {
		return nil, err
	}
	if hooks.KV != nil {
		r.pool.events = func(stored bool, h uint64) {
			ev := KVEvent{Stored: stored, Hash: h}
			if stored && r.storing != nil {
				ev.Tokens, ev.Parent, ev.HasParent = r.blockOf(r.storing, r.storingBlock)
				ev.First, r.storingNew = r.storingNew, false
			}
			hooks.KV(ev)
		}
	}
	return r, nil
}

// Metrics returns the replica's current metrics.
func (r *Replica) Metrics() Metrics {
	m := r.m
	m.Running, m.Waiting = len(r.running), len(r.waiting)
	m.KVUsage = float64(r.pool.used()) / float64(r.pool.size())
	return m
}

// Down reports whether the replica has failed and not recovered.
func (r *Replica) Down() bool { return r.down }

// CPUBlocks returns the CPU tier's capacity in offloaded blocks (vLLM's num_cpu_blocks), 0
// without a tier.
func (r *Replica) CPUBlocks() int {
	if r.off == nil {
		return 0
	}
	return r.off.tier.size()
}

// Submit hands a request to the replica at the kernel's current time. A request that can never
// fit in the KV cache, or that reaches a failed replica, ends at once (Rejected or Aborted).
func (r *Replica) Submit(req *Request) {
	now := r.k.Now()
	r.nonce++
	s := r.newSeq(r.blocksFor(len(req.Prompt) + req.OutputTokens))
	*s = seq{req: req, arrival: now, hashable: -1, nonce: r.nonce, private: r.private, blocks: s.blocks[:0],
		promptLen: len(req.Prompt), outputLen: req.OutputTokens, knownLen: len(req.Prompt) + len(req.Answer)}
	if r.sem.HashOutput && !s.private {
		s.knownLen = max(s.knownLen, s.promptLen+s.outputLen) // every generated token has a hash
	}
	switch {
	case r.down:
		r.end(s, Aborted, now)
		return
	case req.OutputTokens < 1 || len(req.Prompt) == 0 || r.blocksFor(len(req.Prompt)+req.OutputTokens) > r.pool.size(),
		req.PD != PDNone && r.sem.V0Scheduler, req.PD == PDPrefill && req.OutputTokens != 1:
		r.end(s, Rejected, now)
		return
	}
	if req.PD == PDDecode {
		s.pd, r.pdDecode = pdUnread, true
	}
	r.pushWaiting(s)
	r.kick(now)
}

// kick starts a step at now unless one is running.
func (r *Replica) kick(now sim.Time) {
	if r.stepping {
		return
	}
	r.stepping = true
	r.k.Schedule(now, r.cfg.Priority, r.startFn)
}

// blocksFor returns how many blocks tokens occupy, the last one possibly in part.
func (r *Replica) blocksFor(tokens int) int { return r.fullBlocks(tokens + r.bs - 1) }

// fullBlocks returns how many full blocks tokens (≥ 0) fill: a shift for a block size that is
// a power of two, as vLLM's are by default, where a 64-bit division would take several times
// as long on the scheduler's every step.
func (r *Replica) fullBlocks(tokens int) int {
	if r.bsShift >= 0 {
		return tokens >> (r.bsShift & 63)
	}
	return tokens / r.bs
}

// kicked starts a step on an idle replica.
func (r *Replica) kicked(now sim.Time) { r.startStep(now, false) }

// startStep schedules a batch and arranges its end. behind says the step follows another at
// once: with AsyncScheduling its batch was scheduled when that one started (the batch queue
// holds two), so it admits only requests that had arrived by then, and its CPU work
// overlapped that step's GPU work. A step on an idle replica is scheduled at once and pays
// its CPU time in full, as vLLM's engine does with an empty batch queue.
func (r *Replica) startStep(now sim.Time, behind bool) {
	if r.down {
		r.stepping = false
		return
	}
	r.cutoff = now
	if behind && r.sem.AsyncScheduling {
		r.cutoff = r.lastStart
	}
	step := r.schedule()
	if len(r.batch) == 0 && r.lazyN == 0 && r.cutoff < now {
		// The queue held no batch behind the one that ended: schedule now, as vLLM does.
		r.cutoff, behind = now, false
		step = r.schedule()
	}
	if len(r.batch) == 0 && r.lazyN == 0 {
		r.stepping = false
		r.flushV0(now)
		return
	}
	d := r.stepTime(step, behind)
	if r.cfg.Stretch != nil {
		d = r.cfg.Stretch(d)
	}
	d = max(d, time.Nanosecond) // time must advance
	r.stepDur, r.stepShape, r.lastStart = d, step, now
	r.stepEnd = r.k.Schedule(now+sim.Time(d), r.cfg.Priority, r.endFn)
}

// stepTime prices a step. With AsyncScheduling, a step that follows another at once takes
// the longer of its GPU time and its CPU time (per step and per scheduled request), which
// overlapped the previous step; otherwise their sum.
func (r *Replica) stepTime(step gpumodel.Step, behind bool) time.Duration {
	if r.cfg.StepTime != nil {
		return r.cfg.StepTime(step)
	}
	if !behind || r.gpu == nil {
		return r.pricer.StepTime(step) + r.sem.HostStep
	}
	cpu := r.cpuStep + time.Duration(step.PrefillChunks+step.DecodeSeqs)*r.cpuReq
	return max(r.gpu.StepTime(step), cpu)
}

// splitCPU prepares stepTime's split of a deployment's overheads: the per-step and
// per-request ones are the engine's CPU work (scheduling, input preparation, output
// processing); the per-layer one is kernel launches, on the GPU's side.
func (r *Replica) splitCPU(d gpumodel.Deployment) error {
	g := d
	g.Overheads.PerStep, g.Overheads.PerRequest = 0, 0
	gpu, err := gpumodel.NewPricer(g)
	if err != nil {
		return fmt.Errorf("engine: %w", err)
	}
	r.gpu, r.cpuStep, r.cpuReq = gpu, d.Overheads.PerStep, d.Overheads.PerRequest
	return nil
}

// endStep applies the batch's tokens, then starts the next step at once.
func (r *Replica) endStep(now sim.Time) {
	r.stepEnd = 0
	if r.off != nil {
		r.flushStores(now)
	}
	r.flushV0(now)
	// Every lazy decoder computed its token. They are counted before the requests handled one
	// by one, as vLLM counts in running order: a request still prefilling has only prefilling
	// requests after it (it took the whole budget, or the ones after it were admitted in the
	// step it finished), so the hooks below see the counts they would.
	r.tick++
	r.m.GenerationTokens += int64(r.lazyN)
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
			if r.sem.V0Scheduler {
				r.outFirst = append(r.outFirst, s) // reported as the next step ends (flushV0)
			} else if r.hooks.FirstToken != nil {
				r.hooks.FirstToken(s.req, now)
			}
		}
		if s.generated >= s.outputLen && !r.holdV0() {
			r.finish(s)
		}
	}
	r.endBurstV0()
	if r.hooks.Step != nil {
		r.hooks.Step(now, r.stepDur, r.stepShape)
	}
	r.settle(now)
	r.batch = r.batch[:0]
	r.startStep(now, true)
}

// finish frees the blocks of s, which has generated its last token, and marks it finished
// until running is compacted (settle).
func (r *Replica) finish(s *seq) {
	r.park(s)
	if s.req.PD == PDPrefill {
		r.hold(s)
	} else {
		r.pool.release(s.blocks)
	}
	s.blocks = s.blocks[:0]
	s.generated = -s.generated
}

// settle makes the requests handled one by one this step lazy decoders when they can, then
// removes finished requests from running, in order, and reports them.
func (r *Replica) settle(now sim.Time) {
	if r.scanAll {
		r.scanAll = false
		r.expl = r.expl[:0]
		for i, d := range r.due {
			if d < r.tick {
				r.expl = append(r.expl, int32(i))
			}
		}
	}
	due, running := r.due, r.running
	r.gone = r.gone[:0]
	for _, i := range r.expl {
		if int(i) >= len(running) {
			break // preempted
		}
		if due[i] >= r.tick {
			continue // a lazy decoder that only took or registered blocks (advanceLazy)
		}
		switch s := running[i]; {
		case s.generated < 0:
			r.gone = append(r.gone, int32(i))
		case s.aborted:
			r.dropAborted(s)
			r.gone = append(r.gone, int32(i))
		default:
			due[i] = r.lazify(s)
		}
	}
	if len(r.gone) > 0 {
		r.compactFinished(now)
	}
}

// compactFinished reports the requests settle found finished (r.gone, in running order),
// then removes them from running, keeping the order of the others.
func (r *Replica) compactFinished(now sim.Time) {
	for _, i := range r.gone {
		// Reported while running still has its length, as vLLM's stats would show.
		s := r.running[i]
		if s.generated < 0 {
			s.generated = -s.generated
			r.m.Completed++
			if r.sem.V0Scheduler {
				r.outDone = append(r.outDone, s) // reported by flushV0
				continue
			}
			r.complete(s, now)
			continue
		}
		r.end(s, Aborted, now) // settle freed its blocks
		r.recycle(s, false)
	}
	n, kept := len(r.running), int(r.gone[0])
	for k, i := range r.gone {
		next := n
		if k+1 < len(r.gone) {
			next = int(r.gone[k+1])
		}
		copy(r.due[kept:], r.due[i+1:next])
		kept += copy(r.running[kept:], r.running[i+1:next])
	}
	clear(r.running[kept:n])
	r.running, r.due = r.running[:kept], r.due[:kept]
}

// complete reports completed request s, which has left running, and recycles it.
func (r *Replica) complete(s *seq, now sim.Time) {
	kept := r.memo.remember(s, r.bs)
	r.end(s, Completed, now)
	r.recycle(s, kept)
}

// end reports a request's result.
func (r *Replica) end(s *seq, st Status, now sim.Time) {
	if r.hooks.Done == nil {
		return
	}
	sched := s.arrival
	if s.cachedOnce {
		sched = s.scheduledAt
	}
	r.hooks.Done(Result{
		Request: s.req, Status: st, Arrival: s.arrival, FirstToken: s.firstToken, Finish: now, Scheduled: sched,
		PromptTokens: len(s.req.Prompt), CachedTokens: s.cached, CPUCachedTokens: int(s.cpuHit),
		RemoteTokens: int(s.remote), OutputTokens: max(s.generated, 0), Preemptions: s.preemptions,
	})
}

// Fail takes the replica down at the kernel's current time: every queued and running request
// ends Aborted, the KV cache is cleared, and new requests are aborted until Recover.
func (r *Replica) Fail() {
	now := r.k.Now()
	r.flushV0(now)
	if r.stepEnd != 0 {
		r.k.Cancel(r.stepEnd)
		r.stepEnd = 0
	}
	r.down, r.stepping, r.burstLeft = true, false, 0
	r.materializeAll()
	all := append(append([]*seq(nil), r.running...), r.waiting...)
	r.running, r.due, r.waiting, r.waitBase, r.batch = nil, nil, nil, nil, r.batch[:0]
	r.pool.clearAll()
	r.dropHeld()
	if r.off != nil {
		r.off.reset(now)
	}
	if r.hooks.KV != nil {
		r.hooks.KV(KVEvent{Cleared: true})
	}
	for _, s := range all {
		s.generated = max(s.generated, -s.generated)
		r.end(s, Aborted, now)
	}
}

// Recover brings a failed replica back, empty.
func (r *Replica) Recover() { r.down = false }
