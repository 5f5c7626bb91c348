package cluster

import (
	"kvroute/router"
	"kvroute/sim"
	"kvroute/sim/engine"
)

// kvBatch is one BlockStored event of a replica as vLLM publishes it: the blocks one request
// cached in one step (engine.KVEvent.First starts one). Routers whose policy takes events
// whole (router.KVEventBatchObserver) hear it once the step that stored it is done,
// Routers.EventDelay later; the others hear each block as it is stored.
type kvBatch struct {
	rep       int
	hashes    []uint64
	parent    uint64
	hasParent bool
}

// batchStored adds stored block ev of replica i to its open event, or opens one, when some
// router takes events whole.
func (s *Sim) batchStored(i int, ev engine.KVEvent) {
	if !s.batching {
		return
	}
	if s.open == nil {
		s.open = make([]*kvBatch, len(s.reps))
	}
	b := s.open[i]
	if ev.First || b == nil {
		b = &kvBatch{rep: i, parent: ev.Parent, hasParent: ev.HasParent}
		s.open[i] = b
		s.k.Schedule(s.k.Now()+sim.Time(s.cfg.Routers.EventDelay), -1, func(sim.Time) { s.deliverBatch(b) })
	}
	b.hashes = append(b.hashes, ev.Hash)
}

// deliverBatch closes b and reports it to the routers that take events whole.
func (s *Sim) deliverBatch(b *kvBatch) {
	if s.open[b.rep] == b {
		s.open[b.rep] = nil
	}
	id := s.ids[b.rep]
	for _, ri := range s.rt {
		if ri := s.observers(ri, b.rep); ri.batch != nil {
			ri.batch.BlocksStored(id, b.hashes, b.parent, b.hasParent, router.MediumGPU)
		}
	}
}
