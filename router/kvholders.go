package router

import "slices"

// kvHolders is a router's view of which endpoint (by interned id) caches which KV block,
// fed by the endpoints' KV events; precise-prefix, kv-router and predicted-ttft read it.
// Each block's holders are kept most recently stored last, at most perKey of them when perKey
// is set (llm-d's index keeps 10 per key); 0 keeps them all, as Dynamo's does.
type kvHolders struct {
	holders map[uint64][]int32
	perKey  int
}

func newKVHolders(perKey int) kvHolders {
	return kvHolders{holders: map[uint64][]int32{}, perKey: perKey}
}

// stored records that ep caches h, as its most recent holder; beyond perKey holders the
// least recent is forgotten.
func (k *kvHolders) stored(ep int32, h uint64) {
	hs := slices.DeleteFunc(k.holders[h], func(e int32) bool { return e == ep })
	if hs = append(hs, ep); k.perKey > 0 && len(hs) > k.perKey {
		hs = append(hs[:0], hs[len(hs)-k.perKey:]...)
	}
	k.holders[h] = hs
}

// removed records that ep evicted h.
func (k *kvHolders) removed(ep int32, h uint64) {
	hs := slices.DeleteFunc(k.holders[h], func(e int32) bool { return e == ep })
	if len(hs) == 0 {
		delete(k.holders, h)
	} else {
		k.holders[h] = hs
	}
}

// cleared forgets every block ep caches. It visits every hash; the order does not matter.
func (k *kvHolders) cleared(ep int32) {
	for h, hs := range k.holders {
		hs = slices.DeleteFunc(hs, func(e int32) bool { return e == ep })
		if len(hs) == 0 {
			delete(k.holders, h)
		} else {
			k.holders[h] = hs
		}
	}
}

// leadingRun sets run[ep] to the number of leading blocks of hashes that ep caches without a
// gap (the prefix an engine can reuse). run must have one entry per interned id.
func (k *kvHolders) leadingRun(hashes []uint64, run []int) {
	clear(run)
	for i, h := range hashes {
		alive := false
		for _, ep := range k.holders[h] {
			if int(ep) < len(run) && run[ep] == i {
				run[ep]++
				alive = true
			}
		}
		if !alive {
			return
		}
	}
}
