package engine

import (
	"errors"
	"time"

	"kvroute/sim"
)

// The replica's side of prefill/decode disaggregation, as vLLM's NixlConnector runs it
// (vllm-project/vllm@053da34b vllm/distributed/kv_transfer/kv_connector/v1/nixl/scheduler.py:
// request_finished on the prefill side, get_num_new_matched_tokens and
// update_state_after_alloc on the decode side; vllm-project/vllm@00024d31
// vllm/v1/core/sched/scheduler.py _update_waiting_for_remote_kv). The read itself (bytes,
// links, contention) is the caller's: the replica asks for it (Hooks.RemoteRead) and is told
// when it ended (RemoteKVDone).

// PDRole is a request's part in a disaggregated fleet.
type PDRole uint8

// The roles of a request.
const (
	// PDNone is a request run whole on one replica.
	PDNone PDRole = iota
	// PDPrefill is the prefill leg: it must ask for one output token (OutputTokens 1; other
	// values are Rejected), and when it completes its blocks stay referenced (cached, neither
	// free nor evictable) until ReleaseHeld or the abort timeout
	// (KVTransferConfig.AbortTimeout), as vLLM delays freeing a request finished with
	// do_remote_decode.
	PDPrefill
	// PDDecode is the decode leg: its prompt's KV is read from a prefill replica. When it is
	// first scheduled it takes blocks for its whole prompt (a local prefix hit is used as is),
	// Hooks.RemoteRead asks for the rest, and it waits (WAITING_FOR_REMOTE_KVS) until
	// RemoteKVDone; after a good read num_computed_tokens is len(Prompt) − 1, so its first step
	// computes the last prompt token and samples the first output token.
	PDDecode
)

// String names the role: "", "prefill" or "decode".
func (p PDRole) String() string {
	switch p {
	case PDPrefill:
		return "prefill"
	case PDDecode:
		return "decode"
	}
	return ""
}

// DefaultAbortTimeout is vLLM's VLLM_NIXL_ABORT_REQUEST_TIMEOUT (vllm/envs.py, "480").
const DefaultAbortTimeout = 480 * time.Second

// KVTransferConfig is a replica's side of the KV transfer between prefill and decode
// replicas. The zero value is vLLM's defaults.
type KVTransferConfig struct {
	// AbortTimeout is how long a prefill leg's blocks stay held when no decoder reads them
	// (VLLM_NIXL_ABORT_REQUEST_TIMEOUT); 0: DefaultAbortTimeout.
	AbortTimeout time.Duration
	// Recompute is kv_load_failure_policy "recompute": a decode leg whose read failed
	// computes its prompt itself. False is "fail" (vLLM's default): the request ends
	// Aborted.
	Recompute bool
}

// Validate reports a negative timeout.
func (c KVTransferConfig) Validate() error {
	if c.AbortTimeout < 0 {
		return errors.New("engine: kv transfer abort timeout must not be negative")
	}
	return nil
}

func (c KVTransferConfig) abortTimeout() sim.Time {
	if c.AbortTimeout > 0 {
		return sim.Time(c.AbortTimeout)
	}
	return sim.Time(DefaultAbortTimeout)
}

// The states of a decode leg's read (seq.pd).
const (
	pdUnread  uint8 = iota + 1 // not scheduled yet: its KV is on the prefill replica
	pdReading                  // blocks allocated, the read runs (seq.load is loadInFlight)
	pdRead                     // the read ended, well or not: from now on it computes locally
)

// heldKV is a finished prefill leg's blocks, waiting to be read, and its abort timeout.
type heldKV struct {
	blocks  []int32
	timeout sim.EventID
}

// hold keeps finished prefill leg s's blocks referenced until ReleaseHeld or the abort
// timeout.
func (r *Replica) hold(s *seq) {
	h := &heldKV{blocks: append([]int32(nil), s.blocks...)}
	if r.held == nil {
		r.held = make(map[*Request]*heldKV)
	}
	r.held[s.req] = h
	req := s.req
	h.timeout = r.k.Schedule(r.k.Now()+r.cfg.KVTransfer.abortTimeout(), r.cfg.Priority, func(now sim.Time) {
		r.releaseHeld(req, h, now)
	})
}

// ReleaseHeld frees the blocks prefill leg req kept for its decoder (the read ended), at the
// kernel's current time. It does nothing when req holds none (never a prefill leg, released
// already, timed out, or the replica failed since). It reports whether req held blocks: a
// read of them succeeds only then.
func (r *Replica) ReleaseHeld(req *Request) bool {
	h := r.held[req]
	if h != nil {
		r.releaseHeld(req, h, r.k.Now())
	}
	return h != nil
}

func (r *Replica) releaseHeld(req *Request, h *heldKV, now sim.Time) {
	r.k.Cancel(h.timeout) // a no-op when the timeout is what fired
	delete(r.held, req)
	r.pool.release(h.blocks)
	if len(r.waiting) > 0 {
		r.kick(now)
	}
}

// dropHeld forgets every prefill leg's held blocks and cancels their timeouts (the replica
// failed: its blocks are gone).
func (r *Replica) dropHeld() {
	for _, h := range r.held {
		r.k.Cancel(h.timeout)
	}
	r.held = nil
}

// Held returns how many prefill legs hold blocks for their decoders.
func (r *Replica) Held() int { return len(r.held) }

// admitRemote schedules decode leg s for the first time: it takes its local prefix hit and
// blocks for the rest of its prompt, then asks for the read (skip: s stays waiting). It is
// false, changing nothing, when the free queue is too short.
func (r *Replica) admitRemote(s *seq) (ok bool) {
	total := s.numTokens()
	freeHits := r.lookupHits(s, total)
	hit := len(r.hits) * r.bs
	need := r.blocksFor(total) - len(r.hits)
	if need > r.pool.numFree-freeHits {
		return false
	}
	r.claimBlocks(s, total, hit, need)
	r.countExternal(s, total, total-hit)
	s.load, s.pd = loadInFlight, pdReading
	if r.hooks.RemoteRead != nil {
		r.hooks.RemoteRead(s.req, total-hit)
	}
	return true
}

// RemoteKVDone tells the replica, at the kernel's current time, that decode leg req's read
// ended: ok, its prompt's KV is in its blocks; not ok, kv_load_failure_policy applies
// (KVTransferConfig.Recompute). It does nothing when req is not reading here (it was aborted,
// or the replica failed since). It must not be called from inside a hook.
func (r *Replica) RemoteKVDone(req *Request, ok bool) {
	for i, s := range r.waiting {
		if s.req != req || s.pd != pdReading {
			continue
		}
		now := r.k.Now()
		s.pd = pdRead
		switch {
		case ok:
			hit := s.computed
			s.computed = s.numTokens() - 1
			s.remote = int32(s.computed - hit)
		case !r.cfg.KVTransfer.Recompute:
			r.abortWaiting(i, now)
			r.kick(now)
			return
		}
		s.load = loadDone
		r.kick(now)
		return
	}
}

// admitWaiting admits waiting request s, not loading: a decode leg's first schedule asks for
// its read; with a CPU tier the tier is looked up; otherwise as admit.
func (r *Replica) admitWaiting(s *seq, budget int) (n int, ok, skip bool) {
	switch {
	case s.pd == pdUnread:
		ok = r.admitRemote(s)
		return 0, ok, ok
	case r.off != nil:
		return r.admitOrLoad(s, budget)
	}
	n, ok = r.admit(s, budget)
	return n, ok, false
}

// holdsWaiting reports whether waiting requests may hold blocks (a CPU tier's loads, or
// decode legs' reads), so that the scheduler must look past them.
func (r *Replica) holdsWaiting() bool { return r.off != nil || r.pdDecode }
