package router

// activeSeqs is a router's own account of its active requests per endpoint (by interned id):
// the prompt tokens each still has to prefill, released at the first token or at the end,
// and the distinct full prompt blocks they hold, released at the end. Requests are keyed by
// ID, so a second release is a no-op. kv-router and predicted-ttft read it.
type activeSeqs struct {
	reqs map[string]activeReq
	eps  []activeEp
	refs map[uint64][]blockRef // block hash → endpoints holding it active, with counts

	freeRefs   [][]blockRef // emptied refs slices, reused so steady state does not allocate
	freeHashes [][]uint64   // released requests' hash slices, reused likewise
}

type activeReq struct {
	ep          int32
	prefill     int64
	prefillOpen bool
	hashes      []uint64
}

type activeEp struct {
	prefill  int64 // Σ prefill of requests whose first token has not come back
	distinct int   // distinct active blocks
	requests int
}

type blockRef struct{ ep, n int32 }

func newActiveSeqs() activeSeqs {
	return activeSeqs{reqs: map[string]activeReq{}, refs: map[uint64][]blockRef{}}
}

func (a *activeSeqs) at(id int32) activeEp {
	if int(id) < len(a.eps) {
		return a.eps[id]
	}
	return activeEp{}
}

// prefill returns endpoint id's active prefill tokens.
func (a *activeSeqs) prefill(id int32) int64 { return a.at(id).prefill }

// blocks returns endpoint id's distinct active blocks.
func (a *activeSeqs) blocks(id int32) int { return a.at(id).distinct }

// requests returns endpoint id's active requests.
func (a *activeSeqs) requests(id int32) int { return a.at(id).requests }

// add records request reqID on endpoint id with prefill tokens still to compute and its full
// prompt blocks hashes (copied). A second add of the same ID replaces the first.
func (a *activeSeqs) add(reqID string, id int32, prefill int64, hashes []uint64) {
	a.done(reqID)
	for len(a.eps) <= int(id) {
		a.eps = append(a.eps, activeEp{})
	}
	e := &a.eps[id]
	e.prefill += prefill
	e.requests++
	for _, h := range hashes {
		refs := a.refs[h]
		k := 0
		for k < len(refs) && refs[k].ep != id {
			k++
		}
		if k == len(refs) {
			if refs == nil && len(a.freeRefs) > 0 {
				refs = a.freeRefs[len(a.freeRefs)-1]
				a.freeRefs = a.freeRefs[:len(a.freeRefs)-1]
			}
			a.refs[h] = append(refs, blockRef{id, 1})
			e.distinct++
		} else {
			refs[k].n++
		}
	}
	var own []uint64
	if len(hashes) > 0 {
		if n := len(a.freeHashes); n > 0 {
			own, a.freeHashes = a.freeHashes[n-1][:0], a.freeHashes[:n-1]
		}
		own = append(own, hashes...)
	}
	a.reqs[reqID] = activeReq{ep: id, prefill: prefill, prefillOpen: true, hashes: own}
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
	a.prefillDone(reqID)
	r, ok := a.reqs[reqID]
	if !ok {
		return
	}
	delete(a.reqs, reqID)
	e := &a.eps[r.ep]
	e.requests--
	for _, h := range r.hashes {
		refs := a.refs[h]
		for k := range refs {
			if refs[k].ep != r.ep {
				continue
			}
			if refs[k].n--; refs[k].n == 0 {
				refs = append(refs[:k], refs[k+1:]...)
				e.distinct--
			}
			break
		}
		if len(refs) == 0 {
			delete(a.refs, h)
			a.freeRefs = append(a.freeRefs, refs[:0])
		} else {
			a.refs[h] = refs
		}
	}
	if r.hashes != nil {
		a.freeHashes = append(a.freeHashes, r.hashes[:0])
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
func (a *activeSeqs) sharedBlocks(hashes []uint64, out []int) {
	clear(out)
	for _, h := range hashes {
		refs := a.refs[h]
		if len(refs) == 0 {
			return
		}
		for _, r := range refs {
			if int(r.ep) < len(out) {
				out[r.ep]++
			}
		}
	}
}
