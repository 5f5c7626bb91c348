package engine

import (
	"kvroute/gpumodel"
	"kvroute/sim"
)

// vLLM's V0 scheduler with chunked prefill off (Semantics.V0Scheduler), as
// Scheduler._schedule_default in vllm/core/scheduler.py (vllm-project/vllm @0dce2b29, August
// 2024) runs it, with multi-step scheduling as LLMEngine.step in vllm/engine/llm_engine.py
// (V0, 2025) runs it:
//
//   - Waiting prompts are admitted first, whole and in order (_schedule_prefills), while
//     their tokens fit max_num_batched_tokens, the running requests and they fit
//     max_num_seqs, and their blocks leave the watermark free (can_allocate in
//     vllm/core/block_manager_v1.py: free − required ≥ 1% of num_gpu_blocks). A prompt
//     longer than the token budget (the prompt limit, min(max_model_len,
//     max_num_batched_tokens)) or whose blocks can never leave the watermark free is ignored:
//     it ends Rejected.
//   - A step that admitted prompts runs only them: the running requests decode only in
//     steps that admit none ("Don't schedule decodes if prefills are scheduled").
//   - A decode batch takes its requests in order, preempting the newest by recompute when
//     blocks run out (_schedule_running, _preempt), and runs SchedulerSteps steps with no
//     scheduling in between (_has_remaining_steps): each request gets blocks for all of
//     them up front (_get_num_lookahead_slots: steps − 1 lookahead slots for decodes, none
//     for prompts, so a prompt's step is a single step). A request that ends inside the
//     burst keeps its place and its blocks, and its row in the batch, until the burst ends,
//     when its tokens are handed on (and reported a step later, below): the published runs'
//     median ITL is about ten steps (243.76 ms against a 25.57 ms TPOT, LambdaLabsML/vllm-benchmark
//     benchmark_v0.md).
//   - Outputs reach the client one step late (async output processing, on by default): a
//     step's outputs go to the output queue and are processed while the next step runs, and
//     that step returns them (LLMEngine.step: ctx.output_queue with allow_async_output_proc,
//     the async callback passed to the next execute_model); when nothing is left to run, the
//     queue is drained at once. So a first token or a completion is reported when the step
//     after the one that produced it ends.
//
// Lazy decoders (lazy.go) are off under V0: every running request is handled each step.

// scheduleV0 builds the next batch as V0 does and returns its shape.
func (r *Replica) scheduleV0() gpumodel.Step {
	r.batch = r.batch[:0]
	r.expl = r.expl[:0]
	for i := range r.running {
		r.expl = append(r.expl, int32(i))
	}
	switch {
	case r.burstLeft > 0 && len(r.running) > 0:
		r.burstLeft--
		for _, s := range r.running {
			s.scheduled = 1
			if s.generated >= s.outputLen {
				s.scheduled = 0 // held to the burst's end (holdV0): its row runs, computing nothing
			}
			r.batch = append(r.batch, s)
		}
	default:
		r.burstLeft = 0
		if !r.schedulePromptsV0() {
			r.scheduleDecodesV0()
		}
	}
	return r.batchStep()
}

// schedulePromptsV0 admits waiting prompts whole and reports whether it admitted any.
func (r *Replica) schedulePromptsV0() bool {
	budget, admitted := r.maxBatch, false
	watermark := r.m.NumGPUBlocks / 100 // int(0.01 × num_gpu_blocks)
	for len(r.waiting) > 0 && len(r.running) < r.maxSeqs {
		s := r.waiting[0]
		total := s.numTokens() // a recomputed request's prompt includes its output so far
		need := r.blocksFor(total)
		if total > r.maxBatch || need > r.pool.size()-watermark {
			r.popWaiting() // ignored (FINISHED_IGNORED)
			r.end(s, Rejected, r.k.Now())
			r.recycle(s, false)
			continue
		}
		if total > budget || need > r.pool.numFree-watermark {
			break
		}
		n, ok := r.admit(s, total)
		if !ok {
			break
		}
		r.startRunning(n)
		budget -= total
		admitted = true
	}
	return admitted
}

// scheduleDecodesV0 schedules every running request's next SchedulerSteps tokens, in order,
// preempting the newest when blocks run out, and starts the burst.
func (r *Replica) scheduleDecodesV0() {
	steps := max(r.cfg.SchedulerSteps, 1)
	for i := 0; i < len(r.running); i++ {
		s := r.running[i]
		// Blocks for the burst's tokens, but none past the request's last token (vLLM
		// allocates the lookahead regardless: at most one block more near the end).
		total := min(s.computed+steps, s.promptLen+s.outputLen)
		if ok, _ := r.allocateOrPreempt(s, total); !ok {
			break // s itself was preempted: it was the last
		}
		s.scheduled = 1
		r.batch = append(r.batch, s)
	}
	if len(r.batch) > 0 {
		r.burstLeft = steps - 1
	}
}

// holdV0 reports whether a request that has just generated its last token stays, with its
// row and blocks, until the burst in flight ends (endBurstV0). A held request is one in
// running whose generated count, not yet negated by finish, has reached its output length.
func (r *Replica) holdV0() bool { return r.sem.V0Scheduler && r.burstLeft > 0 }

// endBurstV0 finishes the requests held to the end of the burst that just ended.
func (r *Replica) endBurstV0() {
	if !r.sem.V0Scheduler || r.burstLeft > 0 {
		return
	}
	for _, s := range r.running {
		if s.generated >= s.outputLen {
			r.finish(s)
		}
	}
}

// flushV0 reports, at now, the first tokens and completions of the step before the one
// ending now (or of the last step, when the replica goes idle or fails).
func (r *Replica) flushV0(now sim.Time) {
	if !r.sem.V0Scheduler {
		return
	}
	for i, s := range r.outFirst {
		s.firstToken = now
		if r.hooks.FirstToken != nil {
			r.hooks.FirstToken(s.req, now)
		}
		r.outFirst[i] = nil
	}
	r.outFirst = r.outFirst[:0]
	for i, s := range r.outDone {
		r.complete(s, now)
		r.outDone[i] = nil
	}
	r.outDone = r.outDone[:0]
}
