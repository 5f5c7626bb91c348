package router

import "kvroute/router/prefix"

// preciseKeys turns an endpoint's KV events, keyed by engine block, into the entries of
// precise-prefix's index, keyed by index block, as llm-d's event pool does in front of its
// in-memory index (llm-d/llm-d-router v0.10.0 pkg/kvevents/pool.go processEventBatch
// 430–676, event_dedup_filter.go; pkg/kvcache/kvblock/in_memory.go, index.go):
//
//   - An index block is k engine blocks. Each BlockStored event is cut into index blocks from
//     its first block on; a remainder of fewer than k blocks is dropped (token_processor.go
//     chunkTokens 183–197), and an event with no whole index block adds nothing (pool.go
//     573–577). The chain continues from the index key the event's parent maps to (the last
//     one, in_memory.go GetRequestKey 346–355); an event whose parent maps to none is
//     skipped (pool.go 496–510).
//   - Each engine block of an event maps to one of its index keys in proportion (index.go
//     engineToRequestMapping 199–216), in one map shared by every endpoint, replaced by the
//     next event that stores the engine block anywhere.
//   - Stores are counted per endpoint, engine block and tier (event_dedup_filter.go
//     122–180): a removal while another store is outstanding is ignored; otherwise the
//     endpoint's entry goes from the index key the block maps to, and the mapping goes once
//     that key has no entry left (in_memory.go Evict 231–262).
//
// kvroute's keys are its own chained hashes of the engine blocks (router/prefix), so an index
// block whose chain starts where a request's does — at the prompt's start, or right after
// another such index block — is keyed by the hash of its last engine block, which is what a
// request's index key is (every k-th block hash). Upstream hashes the index block's tokens
// onto the parent's index key; when the event's parent lies inside an index block, that chain
// is cut at other places than a request's and never matches one: kvroute keys it by mixing
// the parent's index key into the hash, with the same effect.
type preciseKeys struct {
	k    int                 // engine blocks per index block
	e2r  map[uint64]uint64   // engine block → index key
	refs []map[tierRef]int32 // per endpoint: stores not yet removed, per engine block and tier
	rks  []uint64            // scratch
}

// tierRef is one engine block in one tier (a Holder tag: confirmedGPU or a lower tier's).
type tierRef struct {
	ek  uint64
	tag uint8
}

func newPreciseKeys(k int) preciseKeys {
	return preciseKeys{k: k, e2r: map[uint64]uint64{}}
}

// requestKeys appends to dst the index keys of a request whose engine block hashes are
// hashes: every k-th, a partial index block dropped.
func (d *preciseKeys) requestKeys(dst, hashes []uint64) []uint64 {
	for i := d.k - 1; i < len(hashes); i += d.k {
		dst = append(dst, hashes[i])
	}
	return dst
}

// stored applies one BlockStored event of endpoint ep: engine blocks eks, the first chained
// to parent (hasParent false: none).
func (d *preciseKeys) stored(kv kvHolders, ep int32, eks []uint64, parent uint64, hasParent bool) {
	prev, aligned := uint64(0), true
	if hasParent && parent != 0 {
		rk, ok := d.e2r[parent]
		if !ok {
			return
		}
		prev, aligned = rk, rk == parent
	}
	n := len(eks) / d.k
	if n == 0 {
		return
	}
	d.rks = d.rks[:0]
	for j := range n {
		rk := eks[(j+1)*d.k-1]
		if !aligned {
			rk = mixKey(prev, rk)
		}
		d.rks = append(d.rks, rk)
		prev = rk
	}
	for i, ek := range eks {
		d.e2r[ek] = d.rks[i*n/len(eks)]
	}
	for _, rk := range d.rks {
		kv.stored(ep, rk)
	}
	refs := d.endpointRefs(ep)
	for _, ek := range eks {
		refs[tierRef{ek, confirmedGPU}]++
	}
}

// tierStored applies the store of engine block ek in a lower tier (Holder tag tag) of
// endpoint ep, announced without tokens as vLLM's CPU offloading does: the block resolves
// through the engine block → index key map to the index key its GPU store gave it, and ep
// gains an entry of that tier there; an unmapped block adds nothing (llm-d/llm-d-router
// v0.10.0 pkg/kvevents/pool.go:383-427, handleDeviceTierUpdate). Stores count per (endpoint,
// tier) (pool.go:610-627).
func (d *preciseKeys) tierStored(kv kvHolders, ep int32, ek uint64, tag uint8) {
	rk, ok := d.e2r[ek]
	if !ok {
		return
	}
	kv.x.Store(rk, prefix.Holder{Endpoint: ep, Tag: tag})
	d.endpointRefs(ep)[tierRef{ek, tag}]++
}

// removed applies a BlockRemoved of engine block ek on endpoint ep in the tier of tag.
func (d *preciseKeys) removed(kv kvHolders, ep int32, ek uint64, tag uint8) {
	if int(ep) < len(d.refs) {
		refs, r := d.refs[ep], tierRef{ek, tag}
		if c := refs[r]; c > 1 {
			refs[r] = c - 1
			return
		}
		delete(refs, r)
	}
	rk, ok := d.e2r[ek]
	if !ok {
		return
	}
	kv.x.Remove(rk, prefix.Holder{Endpoint: ep, Tag: tag})
	if !kv.x.Held(rk) {
		delete(d.e2r, ek)
	}
}

// cleared forgets ep's store counts (its entries go with kvHolders.cleared; the mapping
// stays, as upstream's Clear leaves it).
func (d *preciseKeys) cleared(ep int32) {
	if int(ep) < len(d.refs) {
		d.refs[ep] = nil
	}
}

func (d *preciseKeys) endpointRefs(ep int32) map[tierRef]int32 {
	for len(d.refs) <= int(ep) {
		d.refs = append(d.refs, nil)
	}
	if d.refs[ep] == nil {
		d.refs[ep] = map[tierRef]int32{}
	}
	return d.refs[ep]
}

// mixKey is the index key of an index block whose chain is cut off a request's: its last
// engine block h chained onto the parent's index key.
func mixKey(parent, h uint64) uint64 {
	return prefix.TokenBlockHash(parent, []int32{int32(h), int32(h >> 32)})
}
