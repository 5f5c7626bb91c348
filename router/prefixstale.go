package router

import "kvroute/router/prefix"

// staleBlocks are the blocks GIE's approximate index keeps matching for an endpoint after the
// endpoint's LRU evicted them. Its indexer.Add (GIE v1.5.0
// pkg/epp/framework/plugins/requestcontrol/dataproducer/approximateprefix/indexer.go 51–83;
// llm-d-router v0.10.0 the same file 55–87) adds a request's hashes to the pod's LRU first,
// whose eviction callback takes the pod out of the hash → pods map, and to the map afterwards:
// a hash the LRU evicted while that same request's hashes went in (a request with more blocks
// than the LRU holds) is put back in the map, out of the LRU's reach, and matches until the
// endpoint adds it again (the LRU then tracks it); indexer.RemovePod (indexer.go 166–182)
// deletes a pod's map entries through its LRU's keys, so these outlive the pod's removal.
// prefix.Index keeps its map and LRUs together, so such blocks are kept here, beside it.
type staleBlocks struct {
	by []map[uint64]struct{} // per endpoint id
	n  int                   // blocks in all
}

// added records, after index.Add(hashes, ep), which of hashes the index no longer holds for
// ep (evicted by the same Add), and that those it holds are tracked by its LRU again.
func (s *staleBlocks) added(index *prefix.Index, hashes []uint64, ep int32) {
	if s.n == 0 && len(hashes) <= index.Capacity(ep) {
		return // no hash was evicted by its own Add, and none is stale
	}
	for len(s.by) <= int(ep) {
		s.by = append(s.by, nil)
	}
	m := s.by[ep]
	for _, h := range hashes {
		_, was := m[h]
		switch held := index.Holds(h, ep); {
		case !held && !was:
			if m == nil {
				m = map[uint64]struct{}{}
				s.by[ep] = m
			}
			m[h] = struct{}{}
			s.n++
		case held && was:
			delete(m, h)
			s.n--
		}
	}
}

// match is prefix.Index.Match with stale blocks counted as held: out[ep] is the number of
// blocks ep holds along the walk from the first block to the first one nobody holds
// (matchLongestPrefix, GIE v1.5.0 plugin.go 218–235).
func (p *PrefixScorer) match(hashes []uint64, out []int) {
	if p.stale.n == 0 {
		p.index.Match(hashes, out)
		return
	}
	clear(out)
	for _, h := range hashes {
		held := false
		for ep := range out {
			id := int32(ep)
			if p.index.Holds(h, id) || p.stale.holds(h, id) {
				out[ep]++
				held = true
			}
		}
		if !held {
			return
		}
	}
}

func (s *staleBlocks) holds(h uint64, ep int32) bool {
	if int(ep) >= len(s.by) {
		return false
	}
	_, ok := s.by[ep][h]
	return ok
}
