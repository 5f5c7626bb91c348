package router

import "kvroute/router/prefix"

// activeSeqs is a router's own account of its active requests per endpoint (by interned id):
// the prompt tokens each still has to prefill, released at the first token or at the end,
// and the distinct full prompt blocks they hold (prefix.ActiveBlocks), released at the end.
// Requests are keyed by ID, so a second release is a no-op. kv-router, predicted-ttft and
// token-load read it.
type activeSeqs struct {
	reqs   map[string]activeReq
	eps    []activeEp
	blocks *prefix.ActiveBlocks

	freeHandles [][]int32 // released requests' handle slices, reused so steady state does not allocate
}

type activeReq struct {
	ep          int32
	prefill     int64
	prefillOpen bool
	handles     []int32 // its blocks in blocks
}

type activeEp struct {
	prefill int64 // Σ prefill of requests whose first token has not come back
}

func newActiveSeqs() activeSeqs {
	return activeSeqs{reqs: map[string]activeReq{}, blocks: prefix.NewActiveBlocks()}
}

// newActiveSeqsIn returns an account whose blocks share the KV-event index kv's slab, so a
// prompt's blocks, cached and active, are indexed once.
func newActiveSeqsIn(kv kvHolders) activeSeqs {
	return activeSeqs{reqs: map[string]activeReq{}, blocks: prefix.NewActiveBlocksIn(kv.x)}
}

func (a *activeSeqs) at(id int32) activeEp {
	if int(id) < len(a.eps) {
		return a.eps[id]
	}
	return activeEp{}
}

// prefill returns endpoint id's active prefill tokens.
func (a *activeSeqs) prefill(id int32) int64 { return a.at(id).prefill }

// blockCount returns endpoint id's distinct active blocks.
func (a *activeSeqs) blockCount(id int32) int { return a.blocks.Distinct(id) }

// add records request reqID on endpoint id with prefill tokens still to compute and its full
// prompt blocks hashes; found are the slots sharedBlocks found for them, or nil. A second add
// of the same ID replaces the first.
func (a *activeSeqs) add(reqID string, id int32, prefill int64, hashes []uint64, found []int32) {
	a.done(reqID)
	for len(a.eps) <= int(id) {
		a.eps = append(a.eps, activeEp{})
	}
	e := &a.eps[id]
	e.prefill += prefill
	var handles []int32
	if len(hashes) > 0 {
		if n := len(a.freeHandles); n > 0 {
			handles, a.freeHandles = a.freeHandles[n-1][:0], a.freeHandles[:n-1]
		}
		handles = a.blocks.Add(hashes, id, found, handles)
	}
	a.reqs[reqID] = activeReq{ep: id, prefill: prefill, prefillOpen: true, handles: handles}
}

// prefillDone releases reqID's prefill tokens.
func (a *activeSeqs) prefillDone(reqID string) {
	r, ok := a.reqs[reqID]
	if !ok || !r.prefillOpen {
		return
	}
	a.eps[r.ep].prefill -= r.prefill
	r.prefillOpen = false
	a.reqs[reqID] = r
}

// done releases everything reqID holds.
func (a *activeSeqs) done(reqID string) {
	r, ok := a.reqs[reqID]
	if !ok {
		return
	}
	if r.prefillOpen {
		a.eps[r.ep].prefill -= r.prefill
	}
	delete(a.reqs, reqID)
	if r.handles != nil {
		a.blocks.Release(r.handles, r.ep)
		a.freeHandles = append(a.freeHandles, r.handles[:0])
	}
}

// drop releases every request on endpoint id.
func (a *activeSeqs) drop(id int32) {
	var ids []string
	for k, r := range a.reqs {
		if r.ep == id {
			ids = append(ids, k)
		}
	}
	for _, k := range ids { // release order does not change the sums
		a.done(k)
	}
}

// sharedBlocks sets out[ep] to how many of hashes are already active on ep. hashes are a
// chain (each commits to the blocks before it) and every active request holds its whole
// chain, so once no endpoint holds a block none holds a later one: the walk stops there.
// It appends the slots of the blocks walked to found, for add.
func (a *activeSeqs) sharedBlocks(hashes []uint64, out []int, found []int32) []int32 {
	return a.blocks.Shared(hashes, out, found)
}
