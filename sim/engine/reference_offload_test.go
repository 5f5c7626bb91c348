package engine

import (
	"math"
	"time"

	"kvroute/sim"
)

// The reference engine's CPU tier (see reference_test.go and offload.go), written the plain
// way: per-request state in refSeq, one function per connector call. It shares only the
// tier's bookkeeping (cpuTier, tested on its own) with the replica.

// refOffload is the reference's CPU tier.
type refOffload struct {
	cfg        OffloadConfig
	bs, factor int
	tokenBytes int64
	gpus       int64
	bw         float64
	timeout    sim.Time
	tier       *cpuTier
	linkFree   sim.Time
	epoch      int
	loads      int
	loading    map[*refSeq][]uint64 // the offloaded blocks each load in flight reads
	pending    []refStore
	noGPUHits  bool
}

type refStore struct {
	s        *refSeq
	from, to int
}

func newRefOffload(r *refReplica) *refOffload {
	c, d := r.cfg.Offload, r.cfg.Deployment
	o := &refOffload{cfg: c, bs: c.blockSize(d), tokenBytes: d.KVBytesPerTokenPerGPU(), gpus: int64(max(d.TP, 1)),
		bw: c.Bandwidth, timeout: sim.Time(c.LoadTimeout), tier: newCPUTier(int(c.capacity(d))),
		loading: map[*refSeq][]uint64{}, noGPUHits: c.IgnoreGPUHits}
	o.factor = o.bs / d.BlockSize
	if o.bw == 0 {
		o.bw = d.GPU.HostBandwidth
	}
	if o.timeout == 0 {
		o.timeout = sim.Time(DefaultLoadTimeout)
	}
	return o
}

// hashes returns the hashes of s's offloaded blocks from..to-1.
func (o *refOffload) hashes(s *refSeq, from, to int) []uint64 {
	var out []uint64
	for j := from; j < to; j++ {
		out = append(out, s.hashes[(j+1)*o.factor-1])
	}
	return out
}

// copyTime queues a copy of bytes per GPU and returns its duration and end.
func (o *refOffload) copyTime(now sim.Time, bytes int64) (time.Duration, sim.Time) {
	d := o.cfg.Latency + time.Duration(math.Ceil(float64(bytes)/o.bw*1e9))
	if o.linkFree < now {
		o.linkFree = now
	}
	o.linkFree += sim.Time(d)
	return d, o.linkFree
}

// scheduleWaitingOff admits waiting requests in order, skipping those loading or that the
// tier cannot answer yet.
func (r *refReplica) scheduleWaitingOff(budget int) int {
	for i := 0; i < len(r.waiting) && budget > 0 && len(r.running) < r.maxSeqs; {
		s := r.waiting[i]
		if s.arrival > r.cutoff {
			break
		}
		n, ok, skip := 0, false, false
		switch s.load {
		case loadInFlight:
			skip = true
		case loadDone:
			n, ok = r.admitLoadedOff(s, budget)
		default:
			n, ok, skip = r.admitAny(s, budget)
		}
		if skip {
			i++
			continue
		}
		if !ok {
			if len(r.running) == 0 && r.releaseLoadedOff() {
				continue
			}
			break
		}
		r.waiting = append(r.waiting[:i], r.waiting[i+1:]...)
		r.running = append(r.running, s)
		s.scheduled = n
		budget -= n
		r.batch = append(r.batch, s)
	}
	return budget
}

// admitOff looks up the GPU cache, then the tier; it starts a load on a CPU hit.
func (r *refReplica) admitOff(s *refSeq, budget int) (int, bool, bool) {
	o := r.off
	total := s.numTokens()
	known := s.hashUpTo((total-1)/r.bs, r.bs, &r.scratch)
	r.hits = r.hits[:0]
	freeHits := 0
	for j := 0; j < known && !o.noGPUHits; j++ {
		b, ok := r.pool.lookup(s.hashes[j])
		if !ok {
			break
		}
		r.hits = append(r.hits, b)
		if r.pool.ref[b] == 0 {
			freeHits++
		}
	}
	hit := len(r.hits) * r.bs
	tokens, retry := r.matchOff(s, total, hit)
	if retry {
		return 0, false, true
	}
	if tokens == 0 {
		n, ok := r.allocAdmit(s, budget, total, hit, freeHits)
		if ok {
			r.countExternalOff(s, total, 0)
		}
		return n, ok, false
	}
	fit := (hit+tokens+r.bs-1)/r.bs - len(r.hits)
	if r.sem.ReserveFullPrompt {
		fit = r.blocksFor(total) - len(r.hits)
	}
	if fit > r.pool.numFree-freeHits {
		return 0, false, false
	}
	for _, b := range r.hits {
		r.pool.touch(b)
	}
	s.blocks = append(s.blocks[:0], r.hits...)
	for len(s.blocks) < r.blocksFor(hit+tokens) {
		s.blocks = append(s.blocks, r.pool.popFree())
	}
	s.computed, s.reg = hit, len(r.hits)
	if s.preemptions == 0 || !r.sem.SkipPreemptedStats {
		r.m.PrefixQueries += int64(total)
		r.m.PrefixHits += int64(hit)
	}
	r.countExternalOff(s, total, tokens)
	r.loadOff(s, hit, tokens)
	return 0, false, true
}

// matchOff is the tier's answer: the tokens s can load past hit, or retry.
func (r *refReplica) matchOff(s *refSeq, total, hit int) (int, bool) {
	o := r.off
	if s.noLoad {
		return 0, false
	}
	nb := min(total/o.bs, s.hashUpTo(total/o.bs*o.factor, r.bs, &r.scratch)/o.factor)
	all := o.hashes(s, 0, nb)
	o.tier.touch(all)
	if nb*o.bs-hit < o.bs {
		return 0, false
	}
	if o.loads >= r.maxSeqs {
		return 0, true
	}
	start := hit / o.bs
	n := o.tier.lookup(all[start:])
	if n == 0 {
		return 0, false
	}
	if o.tier.loading(all[start : start+n]) {
		return 0, true
	}
	if t := o.bs*(start+n) - hit; t >= o.bs {
		return t, false
	}
	return 0, false
}

// loadOff pins what s loads and schedules the load's end (or its timeout).
func (r *refReplica) loadOff(s *refSeq, hit, tokens int) {
	o := r.off
	start, end := hit/o.bs, (hit+tokens)/o.bs
	hs := o.hashes(s, start, end)
	o.tier.pin(hs)
	o.loading[s] = hs
	o.loads++
	s.load, s.offNext = loadInFlight, end
	now, epoch := r.k.Now(), o.epoch
	bytes := int64(tokens) * o.tokenBytes
	d, at := o.copyTime(now, bytes)
	ok := at-now <= o.timeout
	if !ok {
		at = now + o.timeout
	}
	r.k.Schedule(at, r.cfg.Priority, func(t sim.Time) {
		if o.epoch != epoch || o.loading[s] == nil {
			return
		}
		delete(o.loading, s)
		o.loads--
		o.tier.unpin(hs)
		s.load = loadDone
		if ok {
			r.m.OffloadLoads++
			r.m.OffloadLoadBytes += bytes * o.gpus
			r.m.OffloadLoadTime += d
			s.computed = min(hit+tokens, s.numTokens()-1)
			r.register(s, (hit+tokens)/r.bs)
			s.cpuHit = s.computed - hit
		} else {
			s.noLoad, s.cpuHit = true, 0
		}
		r.kick(t)
	})
}

// admitLoadedOff admits s, whose load ended, with the tokens left within budget.
func (r *refReplica) admitLoadedOff(s *refSeq, budget int) (int, bool) {
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
	for range need {
		s.blocks = append(s.blocks, r.pool.popFree())
	}
	r.register(s, (s.computed+n)/r.bs)
	s.load = loadNone
	if !s.cachedOnce {
		s.cachedOnce, s.cached = true, s.computed
		r.m.PromptTokens += int64(len(s.req.Prompt))
	}
	return n, true
}

// releaseLoadedOff makes the loaded waiting requests give their blocks back (nothing runs
// and the next request does not fit).
func (r *refReplica) releaseLoadedOff() bool {
	released := false
	for _, s := range r.waiting {
		if s.load == loadDone {
			r.pool.release(s.blocks)
			s.blocks = nil
			s.load, s.computed, s.reg, s.cpuHit, s.noLoad = loadNone, 0, 0, 0, true
			released = true
		}
	}
	return released
}

func (r *refReplica) countExternalOff(s *refSeq, total, hit int) {
	if s.preemptions == 0 || !r.sem.SkipPreemptedStats {
		r.m.ExternalQueries += int64(total)
		r.m.ExternalHits += int64(hit)
	}
}

// noteStoreOff notes s's offloaded blocks complete once this step ends.
func (r *refReplica) noteStoreOff(s *refSeq) {
	o := r.off
	full := s.reg
	if !o.cfg.Decode {
		full = min(full, len(s.req.Prompt)/r.bs)
	}
	if n := full / o.factor; n > s.offNext {
		o.pending = append(o.pending, refStore{s: s, from: s.offNext, to: n})
		s.offNext = n
	}
}

// flushOff offers the tier the blocks noted this step, at its end.
func (r *refReplica) flushOff(now sim.Time) {
	o := r.off
	for _, p := range o.pending {
		s := p.s
		hs := o.hashes(s, p.from, p.to)
		toStore, evicted, ok := o.tier.prepareStore(hs, nil, nil)
		r.cpuEvents(evicted, false)
		if !ok {
			continue
		}
		o.tier.touch(o.hashes(s, 0, p.to))
		if len(toStore) == 0 {
			continue
		}
		var blocks []int32
		for j, h := range hs {
			if containsHash(toStore, h) {
				blocks = append(blocks, s.blocks[(p.from+j)*o.factor:(p.from+j+1)*o.factor]...)
			}
		}
		for _, b := range blocks {
			r.pool.ref[b]++ // held by the request too: never free here
		}
		bytes := int64(len(blocks)*r.bs) * o.tokenBytes
		d, at := o.copyTime(now, bytes)
		epoch, stored := o.epoch, append([]uint64(nil), toStore...)
		r.k.Schedule(at, r.cfg.Priority, func(t sim.Time) {
			if o.epoch != epoch {
				return
			}
			r.cpuEvents(o.tier.completeStore(stored, nil), true)
			r.pool.release(blocks)
			r.m.OffloadStores++
			r.m.OffloadStoreBytes += bytes * o.gpus
			r.m.OffloadStoreTime += d
			if len(r.waiting) > 0 {
				r.kick(t)
			}
		})
	}
	o.pending = nil
}

func (r *refReplica) cpuEvents(hashes []uint64, stored bool) {
	if r.hooks.KV == nil {
		return
	}
	for _, h := range hashes {
		r.hooks.KV(KVEvent{Stored: stored, Hash: h, Medium: MediumCPU, BlockSize: r.off.bs})
	}
}

// resetOff forgets the tier (the replica failed).
func (r *refReplica) resetOff(now sim.Time) {
	o := r.off
	o.epoch++
	o.tier = newCPUTier(o.tier.capacity)
	o.loading, o.loads, o.pending, o.linkFree = map[*refSeq][]uint64{}, 0, nil, now
}

func containsHash(hs []uint64, h uint64) bool {
	for _, x := range hs {
		if x == h {
			return true
		}
	}
	return false
}
